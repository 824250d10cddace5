// The tuner's control-channel protocol on the wire: framing, the authenticated handshake and the
// messages of the consensus (nothing here touches a socket; control_channel.h moves the bytes).
//
// Frame: u32 little-endian body length, then the body. Handshake bodies are plain; afterwards
// every body is sealed: u8 type, u64 sequence number, payload, 16-byte truncated
// HMAC-SHA256(session key, direction | type | sequence | payload). Sequence numbers start at 1
// and must increase by exactly one per direction, so a recorded frame cannot be replayed.
//
// Authentication: the job key is HMAC-SHA256(NCCL_AUTOPILOT_COORDINATOR_SECRET, "nccl-autopilot
// tuner v1" | commId | nRanks | nNodes). commId is NCCL's hash of the communicator's unique id,
// which only the job's processes know; the optional secret adds entropy for TCP rendezvous
// across hosts. The leader opens with a random challenge; the follower answers with its own
// nonce, rank and a MAC over both nonces; the leader proves the key back over both nonces. Both
// sides derive a per-connection session key from the two nonces. A stranger can neither join
// nor impersonate the leader without the key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/sha256.h"
#include "tuner_plugin/decision.h"

namespace autopilot::tuner::wire {

inline constexpr size_t kNonceSize = 16;
inline constexpr size_t kFrameMacSize = 16;
inline constexpr size_t kMaxFrameBody = 64 * 1024;
inline constexpr uint32_t kProtocolVersion = 3;  // 2: channel counts; 3: halved-chunk arms

enum MsgType : uint8_t {
  kChallenge = 1,   // leader -> follower: protocol version, leader nonce
  kHello = 2,       // follower -> leader: nonce, rank, flags, MAC
  kWelcome = 3,     // leader -> follower: MAC (sealed frames from here on)
  kPropose = 10,    // leader: version, effective call index, proposal time, decision table
  kAck = 11,        // follower: version, its call count (it will switch at the effective index)
  kNack = 12,       // follower: version, its call count (too late, or cannot take it)
  kCommit = 13,     // leader: version (every follower acknowledged: switch at the index)
  kAbort = 14,      // leader: version (keep the current table)
  kHeartbeat = 15,  // either side: call count
  kBye = 16,        // either side: orderly finalize (the communicator is being destroyed)
};

// Flags a follower reports in its hello.
inline constexpr uint32_t kFlagUserAlgoProto = 1;  // NCCL_ALGO/NCCL_PROTO set: veto learning

using Nonce = uint8_t[kNonceSize];

void randomBytes(void* out, size_t size);

Digest jobKey(uint64_t commId, int nRanks, int nNodes, const std::string& secret);
Digest helloMac(const Digest& key, const Nonce leader, const Nonce follower, int32_t rank,
                uint32_t flags);
Digest welcomeMac(const Digest& key, const Nonce leader, const Nonce follower);
Digest sessionKey(const Digest& key, const Nonce leader, const Nonce follower);

// A key for another channel that speaks this handshake, derived from the job key so that the
// channels cannot be mistaken for one another (a peer of one cannot join the other).
Digest channelKey(const Digest& jobKey, const char* purpose);

// Little-endian byte writer/reader with bounds checks.
class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(char(v)); }
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i32(int32_t v) { raw(&v, 4); }
  void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string& str() { return out_; }

 private:
  void raw(const void* p, size_t n);  // little-endian hosts only (x86-64, aarch64)
  std::string out_;
};

class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), n_(n) {}
  bool u8(uint8_t* v) { return raw(v, 1); }
  bool u16(uint16_t* v) { return raw(v, 2); }
  bool u32(uint32_t* v) { return raw(v, 4); }
  bool u64(uint64_t* v) { return raw(v, 8); }
  bool i32(int32_t* v) { return raw(v, 4); }
  bool bytes(void* out, size_t n) { return raw(out, n); }
  size_t remaining() const { return n_ - pos_; }

 private:
  bool raw(void* out, size_t n);
  const char* p_;
  size_t n_;
  size_t pos_ = 0;
};

// The handshake's three plain bodies, built and checked here for every channel that uses it
// (the tuner's consensus, the profiler's arrival exchange). The read* functions start after the
// type byte and return false on a short body.
std::string challengeBody(const Nonce leader);
bool readChallenge(Reader* r, uint32_t* version, Nonce leader);
// Draws the follower's nonce into `follower`.
std::string helloBody(const Digest& key, const Nonce leader, Nonce follower, int32_t rank,
                      uint32_t flags);
// *authentic: the hello's MAC proves the key.
bool readHello(Reader* r, const Digest& key, const Nonce leader, Nonce follower, int32_t* rank,
               uint32_t* flags, bool* authentic);
std::string welcomeBody(const Digest& key, const Nonce leader, const Nonce follower);
// *authentic: the leader proved the key.
bool readWelcome(Reader* r, const Digest& key, const Nonce leader, const Nonce follower,
                 bool* authentic);

// A whole frame (length prefix + body) for a body.
std::string frame(const std::string& body);

// Per-connection sealing of frame bodies with the session key.
class SecureSession {
 public:
  SecureSession() = default;
  SecureSession(const Digest& key, bool leaderSide) : key_(key), leaderSide_(leaderSide) {}
  std::string seal(uint8_t type, const std::string& payload);
  // Verifies and strips a sealed body; false on a bad MAC, a wrong sequence number or a short
  // body (the connection must then be dropped).
  bool open(const std::string& body, uint8_t* type, std::string* payload);

 private:
  Digest mac(bool fromLeader, uint8_t type, uint64_t seq, const char* payload, size_t n) const;
  Digest key_{};
  bool leaderSide_ = false;
  uint64_t sendSeq_ = 0;
  uint64_t recvSeq_ = 0;
};

// Decision tables travel sparse: a count, then (context, decision) for every context not left
// untouched, in increasing context order.
void encodeTable(const DecisionTable& table, Writer* w);
// False when the table is short or holds an entry no policy could have produced (a cell out of
// range, an exploration without a period): such a proposal is refused, never applied.
bool decodeTable(Reader* r, DecisionTable* table);

}  // namespace autopilot::tuner::wire

// The verbs transport's wire formats. Little-endian, fixed sizes, every field checked by the
// decoders, which never read past the bytes they are given and never allocate (fuzzed:
// test/net/fuzz/fuzz_ib_wire.cc).
//
//  - The 128-byte handle NCCL carries from listen() to the peer's connect(): the address of the
//    listener's out-of-band control socket (TCP), a per-listen random secret, the protocol
//    version, a checksum; its last 8 bytes belong to the connecting side (connect token).
//  - Control messages (512 bytes each) on that TCP connection, which stays open for the
//    connection's lifetime: CONNECT (sender -> receiver: secret, QP endpoint per rail, the
//    address of the sender's clear-to-send FIFO and its rkey per rail), ACCEPT (the answer: the
//    receiver's QP endpoints and the address of its probe area), RAIL_DOWN (either side: its
//    QP of the rail's generation is destroyed, so nothing more lands through it; each side
//    sends it once per generation, also as the answer to the other's, and it carries the data
//    writes counted on that QP: the fence of docs/net-contract.md), REPLACE / REPLACED (the
//    sender re-creates a failed rail's QP pair with a new generation; the receiver answers with
//    its new endpoint).
//  - Clear-to-send entries (512 bytes), RDMA-written by the receiver into slot seq % 32 of the
//    sender's FIFO: a posted receive's buffers (address, size, tag, rkey per rail). The last 8
//    bytes hold seq + 1 and are written last, so the sender polls them; a checksum covers the
//    rest. Re-writing an entry on another rail after a failure is idempotent.
//  - The 32-bit immediate of every data write (RDMA WRITE WITH IMM into the receive buffer at
//    the chunk's offset): request slot, buffer, chunk index and chunk count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "net_plugin/core/chunk_plan.h"
#include "net_plugin/core/receive_matcher.h"
#include "net_plugin/transport/tcp/socket.h"
#include "net_plugin/transport/tcp/wire.h"

namespace autopilot::net::ib::wire {

using DecodeError = tcp::wire::DecodeError;
using tcp::wire::decodeErrorText;

// 2: RAIL_DOWN carries the fence's write counts and is always answered.
inline constexpr uint16_t kProtocolVersion = 2;
inline constexpr int kMaxRails = 8;  // rails per connection
inline constexpr int kSlots = 32;    // NCCL_NET_MAX_REQUESTS receives in flight per connection
inline constexpr size_t kSecretBytes = 16;

// ---- handle

inline constexpr size_t kHandleBytes = 128;
inline constexpr uint32_t kHandleMagic = 0x42495041;  // "APIB"

struct Handle {
  uint16_t version = kProtocolVersion;
  uint8_t railCount = 0;  // the listener's rails, 1..kMaxRails
  uint8_t secret[kSecretBytes] = {};
  tcp::SockAddr control;  // the listener's control socket
};

// False when the control address is neither IPv4 nor IPv6 or the rail count is out of range.
bool encodeHandle(const Handle& h, uint8_t out[kHandleBytes]);
// kBadMagic also when the handle is the TCP transport's (see isTcpHandle).
DecodeError decodeHandle(const uint8_t* in, size_t len, Handle* out);
// Whether a handle that failed to decode comes from the TCP transport (the two sides chose
// different transports: NCCL_AUTOPILOT_TRANSPORT or the devices present differ).
bool isTcpHandle(const uint8_t* in, size_t len);

// ---- control messages

inline constexpr size_t kControlBytes = 512;
inline constexpr uint32_t kControlMagic = 0x43495041;  // "APIC"

// What a peer needs to connect a QP to ours. In CONNECT and ACCEPT, an all-zero endpoint
// (qpn 0) means the rail could not be set up on that side: it starts failed and is re-created
// later by the sender's failback.
struct QpEndpoint {
  uint32_t qpn = 0;  // 24 bits
  uint32_t psn = 0;  // 24 bits
  uint16_t lid = 0;
  uint8_t linkLayer = 0;  // IBV_LINK_LAYER_INFINIBAND (1) or _ETHERNET (2)
  uint8_t mtu = 0;        // ibv_mtu, 1..5
  uint8_t gid[16] = {};
  uint32_t rkey = 0;  // rkey, on this rail, of the region the message names (FIFO, probe area)
};

enum class ControlType : uint8_t {
  kConnect = 1,
  kAccept = 2,
  kRailDown = 3,
  kReplace = 4,
  kReplaced = 5,
};

enum class ControlStatus : uint8_t {
  kOk = 0,
  kBadSecret = 1,
  kBadRails = 2,     // rail count out of range or not what the listener has
  kNoResources = 3,  // QP creation or connection failed on the answering side
  kStale = 4,        // generation not newer than the current one
};
const char* controlStatusText(ControlStatus s);

struct ControlMessage {
  ControlType type = ControlType::kConnect;
  uint64_t connectionId = 0;                  // chosen by the sender, never 0
  ControlStatus status = ControlStatus::kOk;  // ACCEPT, REPLACED
  uint8_t secret[kSecretBytes] = {};          // CONNECT
  uint8_t railCount = 0;                      // CONNECT, ACCEPT: endpoints[0..railCount)
  uint8_t rail = 0;                           // RAIL_DOWN, REPLACE, REPLACED: endpoints[0]
  uint32_t generation = 0;                    // RAIL_DOWN, REPLACE, REPLACED (>= 1)
  uint64_t regionAddress = 0;  // CONNECT: the sender's FIFO; ACCEPT: the receiver's probe area
  QpEndpoint endpoints[kMaxRails];
  // RAIL_DOWN: data writes (with immediate) on the QP of that generation. The sender fills in
  // what it posted and what it saw complete, the receiver what landed (RC places them in
  // posting order, so the first `writesLanded` the sender posted are the ones that landed).
  uint32_t writesPosted = 0;
  uint32_t writesAcked = 0;
  uint32_t writesLanded = 0;
};

void encodeControl(const ControlMessage& m, uint8_t out[kControlBytes]);
// Endpoints are checked only where they are meaningful (CONNECT; ACCEPT and REPLACED with
// status kOk; REPLACE).
DecodeError decodeControl(const uint8_t* in, size_t len, ControlMessage* out);

// ---- clear-to-send entries

inline constexpr size_t kCtsBytes = 512;
inline constexpr size_t kCtsMarkerAt = kCtsBytes - 8;

struct CtsBuffer {
  uint64_t address = 0;
  uint64_t size = 0;
  int32_t tag = 0;
  uint32_t rkeys[kMaxRails] = {};
};

struct CtsEntry {
  uint64_t seq = 0;
  int n = 0;  // buffers, 1..kMaxRecvsPerRequest
  int railCount = 0;
  CtsBuffer buffers[core::kMaxRecvsPerRequest];
};

void encodeCts(const CtsEntry& e, uint8_t out[kCtsBytes]);
// The marker an entry for `seq` carries in its last 8 bytes.
inline uint64_t ctsMarker(uint64_t seq) { return seq + 1; }
// Decodes a snapshot of a FIFO slot that carries the marker for `expectedSeq`. kBadChecksum
// can mean a torn read (the slot being rewritten); the caller retries before giving up.
DecodeError decodeCts(const uint8_t* in, size_t len, uint64_t expectedSeq, int railCount,
                      CtsEntry* out);
// The sender's matcher input.
core::PostedReceive postedReceive(const CtsEntry& e);

// ---- immediate data of a data write

// [31:28] epoch = (seq / 32) mod 16, [27:23] slot = seq mod 32, [22:20] buffer,
// [19:10] chunk count - 1, [9:0] chunk index. The epoch tells a late duplicate of a chunk of
// request seq (re-sent after a rail failure although the first copy had landed) from a chunk
// of request seq + 32, which reuses the slot: the receiver ignores the former. It repeats
// every kAliasSpan requests, and no reachable delay spans that many: duplicates exist only
// after a fence that was waited out (a confirmed fence replays only what did not land), and
// while one may be in flight, or a fence is pending, the sender places no chunk of a request
// kAliasFreeAhead or more after it (SendComm::mustWait). The receiver cannot complete those, so it
// cannot post the request kAliasSpan after the duplicate's, the only one the duplicate could be
// taken for.
inline constexpr int kEpochBits = 4;
inline constexpr int kSlotBits = 5;
inline constexpr int kBufferBits = 3;
inline constexpr int kChunkBits = 10;
inline constexpr uint32_t kMaxChunks = 1u << kChunkBits;
static_assert((1 << kSlotBits) == kSlots, "the immediate carries the request slot");
static_assert((1 << kBufferBits) == core::kMaxRecvsPerRequest,
              "the immediate carries the buffer of a multi-receive");
static_assert(core::ChunkPolicy{}.maxChunks <= kMaxChunks,
              "the immediate carries the chunk index and count");
static_assert(kEpochBits + kSlotBits + kBufferBits + 2 * kChunkBits == 32, "32-bit immediate");
inline constexpr uint64_t kAliasSpan = uint64_t(kSlots) << kEpochBits;  // same slot and epoch
inline constexpr uint64_t kAliasFreeAhead = kAliasSpan - kSlots;

struct ImmFields {
  uint32_t epoch = 0;
  uint32_t slot = 0;
  uint32_t buffer = 0;
  uint32_t chunk = 0;
  uint32_t chunks = 1;  // 1..kMaxChunks
};

inline uint32_t immEpoch(uint64_t seq) {
  return uint32_t(seq >> kSlotBits) & ((1u << kEpochBits) - 1);
}
inline uint32_t immSlot(uint64_t seq) { return uint32_t(seq) & ((1u << kSlotBits) - 1); }

// Host byte order; the transport converts with htonl/ntohl as the verbs API expects.
uint32_t encodeImm(const ImmFields& f);
// False when chunk >= chunks (cannot come from a well-behaved sender).
bool decodeImm(uint32_t imm, ImmFields* out);

}  // namespace autopilot::net::ib::wire

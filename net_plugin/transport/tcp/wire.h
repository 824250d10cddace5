// The TCP transport's wire format: the connection handshake (HELLO / HELLO_ACK, 64 bytes each)
// and the data-phase frames (a 32-byte header, then a payload for DATA or entries for CTS).
// Little-endian, fixed sizes, every field checked by the decoders, which never read past
// the bytes they are given and never allocate (they are fuzzed).
//
// Data phase, per rail connection (one TCP connection per rail, both directions):
//   receiver -> sender  CTS   a posted receive: request seq, n buffers (size, tag) each
//   sender -> receiver  DATA  chunk `chunk` of `chunks` for buffer `buffer` of request `seq`,
//                             `length` payload bytes at byte `offset` of that buffer
//   receiver -> sender  ACK   cumulative count of DATA frames consumed on this connection, and
//                             the receive watermark: every receive with a lower seq is complete
//   sender -> receiver  PING  "are you there?" (seq = nonce), sent on an idle rail when another
//                             rail stalls, to tell a dead link from a paused peer
//   receiver -> sender  PONG  the answer (same seq)
#pragma once

#include <cstddef>
#include <cstdint>

#include "net_plugin/core/receive_matcher.h"

namespace autopilot::net::tcp::wire {

inline constexpr uint16_t kProtocolVersion = 3;

// ---- handshake

inline constexpr size_t kHelloBytes = 64;
inline constexpr uint32_t kHelloMagic = 0x4c485041;     // "APHL"
inline constexpr uint32_t kHelloAckMagic = 0x4b415041;  // "APAK"
inline constexpr size_t kSecretBytes = 16;
inline constexpr int kMaxRails = 8;  // rails per connection (also bounded by the handle)

struct Hello {
  uint16_t version = kProtocolVersion;
  uint8_t railIndex = 0;
  uint8_t railCount = 0;
  uint8_t secret[kSecretBytes] = {};
  uint64_t connectionId = 0;  // chosen by the connecting side; the same on all its rails
  uint32_t generation = 0;    // per rail, grows with every re-connection
};

enum class AckStatus : uint8_t {
  kAccepted = 0,
  kBadSecret = 1,
  kBadVersion = 2,
  kWrongConnection = 3,  // the listener already serves another connection (stale handle)
  kBadRail = 4,
  kStaleGeneration = 5,
  kMalformed = 6,
  kBusy = 7,
};
const char* ackStatusText(AckStatus s);

struct HelloAck {
  uint16_t version = kProtocolVersion;
  AckStatus status = AckStatus::kAccepted;
  uint8_t railIndex = 0;
  uint64_t connectionId = 0;
  uint32_t generation = 0;
};

enum class DecodeError : uint8_t {
  kOk = 0,
  kBadMagic,
  kBadVersion,  // well-formed but another protocol version: *version tells which
  kBadChecksum,
  kBadField,
};
const char* decodeErrorText(DecodeError e);

void encodeHello(const Hello& h, uint8_t out[kHelloBytes]);
DecodeError decodeHello(const uint8_t* in, size_t len, Hello* out);
void encodeHelloAck(const HelloAck& a, uint8_t out[kHelloBytes]);
DecodeError decodeHelloAck(const uint8_t* in, size_t len, HelloAck* out);

// ---- data phase

inline constexpr size_t kFrameHeaderBytes = 32;
inline constexpr uint16_t kFrameMagic = 0xa7c3;
inline constexpr size_t kCtsEntryBytes = 16;
inline constexpr size_t kMaxCtsBodyBytes = kCtsEntryBytes * core::kMaxRecvsPerRequest;
inline constexpr uint64_t kMaxMessageBytes = uint64_t(1) << 40;  // NCCL_MAX_NET_SIZE_BYTES
inline constexpr uint32_t kMaxChunksPerMessage = 1u << 20;

enum class FrameType : uint8_t { kData = 1, kCts = 2, kAck = 3, kPing = 4, kPong = 5 };

struct FrameHeader {
  FrameType type = FrameType::kData;
  uint8_t buffer = 0;   // DATA: which buffer of a multi-receive
  uint32_t length = 0;  // DATA: payload bytes; CTS: number of entries; ACK: 0
  uint64_t seq = 0;     // DATA/CTS: receive request seq; ACK: cumulative DATA frames consumed
  uint64_t offset = 0;  // DATA: byte offset in the buffer; ACK: the receive watermark
  uint32_t chunk = 0;   // DATA
  uint32_t chunks = 0;  // DATA
};

void encodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]);
DecodeError decodeFrameHeader(const uint8_t* in, size_t len, FrameHeader* out);
// Bytes that follow the header and must be staged before the frame can be handled (CTS
// entries); DATA payloads are streamed and do not count.
size_t controlBodyBytes(const FrameHeader& h);

// CTS: header + entries, at most kFrameHeaderBytes + kMaxCtsBodyBytes bytes; returns the size.
size_t encodeCts(const core::PostedReceive& posted, uint8_t* out);
// Decodes the entries of a CTS whose header was decoded already.
DecodeError decodeCtsBody(const FrameHeader& h, const uint8_t* body, size_t len,
                          core::PostedReceive* out);
// ACK: `completedBelow` is the receive watermark (receives with seq < it are all complete).
size_t encodeAck(uint64_t consumedFrames, uint64_t completedBelow, uint8_t out[kFrameHeaderBytes]);
// PING / PONG: a header only, the nonce in seq.
size_t encodeLiveness(FrameType type, uint64_t nonce, uint8_t out[kFrameHeaderBytes]);

}  // namespace autopilot::net::tcp::wire

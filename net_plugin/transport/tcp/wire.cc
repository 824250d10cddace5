#include "net_plugin/transport/tcp/wire.h"

#include <cstring>

#include "net_plugin/core/wire_bytes.h"

namespace autopilot::net::tcp::wire {

namespace {

// The byte codec every wire format of the plugin uses (little-endian fields, FNV checksums).
using namespace core::bytes;

bool zero(const uint8_t* p, size_t n) { return allZero(p, n); }

constexpr size_t kChecksumAt = kHelloBytes - 4;

// Common prefix of HELLO and HELLO_ACK: magic @0, version @4; checksum over [0, 60) @60.
DecodeError checkEnvelope(const uint8_t* in, size_t len, uint32_t magic, uint16_t* version) {
  if (len < kHelloBytes) return DecodeError::kBadField;
  if (get32(in) != magic) return DecodeError::kBadMagic;
  if (get32(in + kChecksumAt) != fnv32(in, kChecksumAt)) return DecodeError::kBadChecksum;
  *version = get16(in + 4);
  if (*version != kProtocolVersion) return DecodeError::kBadVersion;
  return DecodeError::kOk;
}

}  // namespace

const char* ackStatusText(AckStatus s) {
  switch (s) {
    case AckStatus::kAccepted:
      return "accepted";
    case AckStatus::kBadSecret:
      return "wrong secret (a handle from another listener?)";
    case AckStatus::kBadVersion:
      return "protocol version mismatch";
    case AckStatus::kWrongConnection:
      return "listener serves another connection (stale handle?)";
    case AckStatus::kBadRail:
      return "rail index out of range";
    case AckStatus::kStaleGeneration:
      return "stale re-connection";
    case AckStatus::kMalformed:
      return "malformed hello";
    case AckStatus::kBusy:
      return "too many pending connections";
  }
  return "unknown status";
}

const char* decodeErrorText(DecodeError e) {
  switch (e) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kBadMagic:
      return "bad magic (not our protocol)";
    case DecodeError::kBadVersion:
      return "other protocol version";
    case DecodeError::kBadChecksum:
      return "bad checksum";
    case DecodeError::kBadField:
      return "malformed field";
  }
  return "?";
}

// HELLO: magic @0, version @4, railIndex @6, railCount @7, secret @8..24, connectionId @24,
// generation @32, reserved (zero) @36..60, checksum @60.
void encodeHello(const Hello& h, uint8_t out[kHelloBytes]) {
  std::memset(out, 0, kHelloBytes);
  put32(out, kHelloMagic);
  put16(out + 4, h.version);
  out[6] = h.railIndex;
  out[7] = h.railCount;
  std::memcpy(out + 8, h.secret, kSecretBytes);
  put64(out + 24, h.connectionId);
  put32(out + 32, h.generation);
  put32(out + kChecksumAt, fnv32(out, kChecksumAt));
}

DecodeError decodeHello(const uint8_t* in, size_t len, Hello* out) {
  uint16_t version = 0;
  DecodeError e = checkEnvelope(in, len, kHelloMagic, &version);
  out->version = version;
  if (e != DecodeError::kOk) return e;
  Hello h;
  h.version = version;
  h.railIndex = in[6];
  h.railCount = in[7];
  std::memcpy(h.secret, in + 8, kSecretBytes);
  h.connectionId = get64(in + 24);
  h.generation = get32(in + 32);
  if (h.railCount == 0 || h.railCount > kMaxRails || h.railIndex >= h.railCount ||
      h.generation == 0 || h.connectionId == 0 || !zero(in + 36, kChecksumAt - 36)) {
    return DecodeError::kBadField;
  }
  *out = h;
  return DecodeError::kOk;
}

// HELLO_ACK: magic @0, version @4, status @6, railIndex @7, connectionId @8, generation @16,
// reserved (zero) @20..60, checksum @60.
void encodeHelloAck(const HelloAck& a, uint8_t out[kHelloBytes]) {
  std::memset(out, 0, kHelloBytes);
  put32(out, kHelloAckMagic);
  put16(out + 4, a.version);
  out[6] = uint8_t(a.status);
  out[7] = a.railIndex;
  put64(out + 8, a.connectionId);
  put32(out + 16, a.generation);
  put32(out + kChecksumAt, fnv32(out, kChecksumAt));
}

DecodeError decodeHelloAck(const uint8_t* in, size_t len, HelloAck* out) {
  uint16_t version = 0;
  DecodeError e = checkEnvelope(in, len, kHelloAckMagic, &version);
  out->version = version;
  if (e != DecodeError::kOk) return e;
  HelloAck a;
  a.version = version;
  if (in[6] > uint8_t(AckStatus::kBusy) || !zero(in + 20, kChecksumAt - 20)) {
    return DecodeError::kBadField;
  }
  a.status = AckStatus(in[6]);
  a.railIndex = in[7];
  a.connectionId = get64(in + 8);
  a.generation = get32(in + 16);
  *out = a;
  return DecodeError::kOk;
}

// Frame header: magic @0, type @2, buffer @3, length @4, seq @8, offset @16, chunk @24,
// chunks @28.
void encodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]) {
  put16(out, kFrameMagic);
  out[2] = uint8_t(h.type);
  out[3] = h.buffer;
  put32(out + 4, h.length);
  put64(out + 8, h.seq);
  put64(out + 16, h.offset);
  put32(out + 24, h.chunk);
  put32(out + 28, h.chunks);
}

DecodeError decodeFrameHeader(const uint8_t* in, size_t len, FrameHeader* out) {
  if (len < kFrameHeaderBytes) return DecodeError::kBadField;
  if (get16(in) != kFrameMagic) return DecodeError::kBadMagic;
  FrameHeader h;
  h.type = FrameType(in[2]);
  h.buffer = in[3];
  h.length = get32(in + 4);
  h.seq = get64(in + 8);
  h.offset = get64(in + 16);
  h.chunk = get32(in + 24);
  h.chunks = get32(in + 28);
  switch (h.type) {
    case FrameType::kData:
      if (h.buffer >= core::kMaxRecvsPerRequest || h.chunks == 0 ||
          h.chunks > kMaxChunksPerMessage || h.chunk >= h.chunks || h.offset > kMaxMessageBytes ||
          h.length > kMaxMessageBytes - h.offset) {
        return DecodeError::kBadField;
      }
      break;
    case FrameType::kCts:
      if (h.length < 1 || h.length > uint32_t(core::kMaxRecvsPerRequest) || h.buffer != 0 ||
          h.offset != 0 || h.chunk != 0 || h.chunks != 0) {
        return DecodeError::kBadField;
      }
      break;
    case FrameType::kAck:
      if (h.length != 0 || h.buffer != 0 || h.chunk != 0 || h.chunks != 0) {
        return DecodeError::kBadField;
      }
      break;
    case FrameType::kPing:
    case FrameType::kPong:
      if (h.length != 0 || h.buffer != 0 || h.offset != 0 || h.chunk != 0 || h.chunks != 0) {
        return DecodeError::kBadField;
      }
      break;
    default:
      return DecodeError::kBadField;
  }
  *out = h;
  return DecodeError::kOk;
}

size_t controlBodyBytes(const FrameHeader& h) {
  return h.type == FrameType::kCts ? size_t(h.length) * kCtsEntryBytes : 0;
}

size_t encodeCts(const core::PostedReceive& posted, uint8_t* out) {
  FrameHeader h;
  h.type = FrameType::kCts;
  h.length = uint32_t(posted.n);
  h.seq = posted.seq;
  encodeFrameHeader(h, out);
  uint8_t* p = out + kFrameHeaderBytes;
  for (int i = 0; i < posted.n; ++i, p += kCtsEntryBytes) {
    put64(p, posted.sizes[i]);
    put32(p + 8, uint32_t(posted.tags[i]));
    put32(p + 12, 0);
  }
  return kFrameHeaderBytes + size_t(posted.n) * kCtsEntryBytes;
}

DecodeError decodeCtsBody(const FrameHeader& h, const uint8_t* body, size_t len,
                          core::PostedReceive* out) {
  if (h.type != FrameType::kCts || h.length < 1 || h.length > uint32_t(core::kMaxRecvsPerRequest) ||
      len < controlBodyBytes(h)) {
    return DecodeError::kBadField;
  }
  core::PostedReceive p;
  p.seq = h.seq;
  p.n = int(h.length);
  for (int i = 0; i < p.n; ++i) {
    const uint8_t* e = body + size_t(i) * kCtsEntryBytes;
    p.sizes[i] = get64(e);
    p.tags[i] = int32_t(get32(e + 8));
    if (p.sizes[i] > kMaxMessageBytes || get32(e + 12) != 0) return DecodeError::kBadField;
  }
  *out = p;
  return DecodeError::kOk;
}

size_t encodeAck(uint64_t consumedFrames, uint64_t completedBelow, uint8_t out[kFrameHeaderBytes]) {
  FrameHeader h;
  h.type = FrameType::kAck;
  h.seq = consumedFrames;
  h.offset = completedBelow;
  encodeFrameHeader(h, out);
  return kFrameHeaderBytes;
}

size_t encodeLiveness(FrameType type, uint64_t nonce, uint8_t out[kFrameHeaderBytes]) {
  FrameHeader h;
  h.type = type;
  h.seq = nonce;
  encodeFrameHeader(h, out);
  return kFrameHeaderBytes;
}

}  // namespace autopilot::net::tcp::wire

#include "net_plugin/transport/ibverbs/wire.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "net_plugin/core/wire_bytes.h"
#include "net_plugin/transport/tcp/handle.h"

namespace autopilot::net::ib::wire {

namespace {

// The byte codec every wire format of the plugin uses (little-endian fields, FNV checksums).
using namespace core::bytes;

// ---- handle layout: magic @0, version @4, rail count @6, reserved @7, secret @8, control address
// @24 (family 4|6 @24, port @25, address @27, 16 bytes), zeros to @116, checksum @116, token @120.
constexpr size_t kHandleSecretAt = 8;
constexpr size_t kHandleAddrAt = 24;
constexpr size_t kHandleChecksumAt = 116;

// ---- control layout: magic @0, version @4, type @6, status @7, connection id @8, secret @16,
// rail count @32, rail @33, reserved @34, generation @36, region @40, endpoints @48 (40 bytes
// each) or, in RAIL_DOWN, writes posted @48, acknowledged @52 and landed @56; zeros to @508,
// checksum @508.
constexpr size_t kCtlTypeAt = 6;
constexpr size_t kCtlStatusAt = 7;
constexpr size_t kCtlConnAt = 8;
constexpr size_t kCtlSecretAt = 16;
constexpr size_t kCtlRailCountAt = 32;
constexpr size_t kCtlRailAt = 33;
constexpr size_t kCtlGenerationAt = 36;
constexpr size_t kCtlRegionAt = 40;
constexpr size_t kCtlEndpointsAt = 48;
constexpr size_t kEndpointBytes = 40;
constexpr size_t kCtlWritesAt = kCtlEndpointsAt;
constexpr size_t kCtlWritesBytes = 12;
constexpr size_t kCtlChecksumAt = kControlBytes - 4;
static_assert(kCtlEndpointsAt + kMaxRails * kEndpointBytes <= kCtlChecksumAt, "fits");

// ---- CTS layout: seq @0, n @8, rail count @9, zeros to @16, buffers @16 (56 bytes each:
// address, size, tag, rkeys[8]), zeros to @496, checksum @496, zero @500, marker @504.
constexpr size_t kCtsBuffersAt = 16;
constexpr size_t kCtsBufferBytes = 56;
constexpr size_t kCtsChecksumAt = 496;
static_assert(kCtsBuffersAt + core::kMaxRecvsPerRequest * kCtsBufferBytes <= kCtsChecksumAt,
              "fits");
static_assert(kCtsMarkerAt == 504, "marker is the last word");

void putEndpoint(uint8_t* p, const QpEndpoint& e) {
  put32(p, e.qpn);
  put32(p + 4, e.psn);
  put16(p + 8, e.lid);
  p[10] = e.linkLayer;
  p[11] = e.mtu;
  std::memcpy(p + 12, e.gid, 16);
  put32(p + 28, e.rkey);
}

// An endpoint with qpn 0 is "absent" (that rail could not be set up); it must be all zeros.
bool getEndpoint(const uint8_t* p, QpEndpoint* e, bool allowAbsent) {
  if (allowAbsent && allZero(p, kEndpointBytes)) {
    *e = QpEndpoint{};
    return true;
  }
  e->qpn = get32(p);
  e->psn = get32(p + 4);
  e->lid = get16(p + 8);
  e->linkLayer = p[10];
  e->mtu = p[11];
  std::memcpy(e->gid, p + 12, 16);
  e->rkey = get32(p + 28);
  return e->qpn != 0 && e->qpn < (1u << 24) && e->psn < (1u << 24) &&
         (e->linkLayer == 1 || e->linkLayer == 2) && e->mtu >= 1 && e->mtu <= 5 &&
         allZero(p + 32, kEndpointBytes - 32);
}

// Endpoints a message carries: one per rail for CONNECT and a positive ACCEPT, one for REPLACE
// and a positive REPLACED, none otherwise.
int controlEndpoints(const ControlMessage& m) {
  bool ok = m.status == ControlStatus::kOk;
  switch (m.type) {
    case ControlType::kConnect:
      return std::min<int>(m.railCount, kMaxRails);
    case ControlType::kAccept:
      return ok ? std::min<int>(m.railCount, kMaxRails) : 0;
    case ControlType::kReplace:
      return 1;
    case ControlType::kReplaced:
      return ok ? 1 : 0;
    case ControlType::kRailDown:
      return 0;
  }
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------- handle

bool encodeHandle(const Handle& h, uint8_t out[kHandleBytes]) {
  std::memset(out, 0, kHandleBytes);
  int family = h.control.family();
  if (family != AF_INET && family != AF_INET6) return false;
  if (h.railCount < 1 || h.railCount > kMaxRails) return false;
  put32(out, kHandleMagic);
  put16(out + 4, h.version);
  out[6] = h.railCount;
  std::memcpy(out + kHandleSecretAt, h.secret, kSecretBytes);
  uint8_t* a = out + kHandleAddrAt;
  a[0] = family == AF_INET ? 4 : 6;
  put16(a + 1, h.control.port());
  if (family == AF_INET) {
    std::memcpy(a + 3, &reinterpret_cast<const sockaddr_in*>(&h.control.storage)->sin_addr, 4);
  } else {
    std::memcpy(a + 3, &reinterpret_cast<const sockaddr_in6*>(&h.control.storage)->sin6_addr, 16);
  }
  put32(out + kHandleChecksumAt, fnv32(out, kHandleChecksumAt));
  return true;
}

DecodeError decodeHandle(const uint8_t* in, size_t len, Handle* out) {
  if (len < kHandleBytes) return DecodeError::kBadField;
  if (get32(in) != kHandleMagic) return DecodeError::kBadMagic;
  if (get32(in + kHandleChecksumAt) != fnv32(in, kHandleChecksumAt)) {
    return DecodeError::kBadChecksum;
  }
  Handle h;
  h.version = get16(in + 4);
  out->version = h.version;
  if (h.version != kProtocolVersion) return DecodeError::kBadVersion;
  h.railCount = in[6];
  if (h.railCount < 1 || h.railCount > kMaxRails || in[7] != 0) return DecodeError::kBadField;
  std::memcpy(h.secret, in + kHandleSecretAt, kSecretBytes);
  const uint8_t* a = in + kHandleAddrAt;
  uint16_t port = get16(a + 1);
  if (port == 0) return DecodeError::kBadField;
  if (a[0] == 4) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&h.control.storage);
    v4->sin_family = AF_INET;
    std::memcpy(&v4->sin_addr, a + 3, 4);
    h.control.length = sizeof(sockaddr_in);
    if (!allZero(a + 7, 12)) return DecodeError::kBadField;
  } else if (a[0] == 6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&h.control.storage);
    v6->sin6_family = AF_INET6;
    std::memcpy(&v6->sin6_addr, a + 3, 16);
    h.control.length = sizeof(sockaddr_in6);
  } else {
    return DecodeError::kBadField;
  }
  h.control.setPort(port);
  if (!allZero(in + kHandleAddrAt + 19, kHandleChecksumAt - kHandleAddrAt - 19)) {
    return DecodeError::kBadField;
  }
  *out = h;
  return DecodeError::kOk;
}

bool isTcpHandle(const uint8_t* in, size_t len) {
  return len >= 4 && get32(in) == tcp::kHandleMagic;
}

// ---------------------------------------------------------------------------- control

const char* controlStatusText(ControlStatus s) {
  switch (s) {
    case ControlStatus::kOk:
      return "accepted";
    case ControlStatus::kBadSecret:
      return "wrong secret (the handle is stale or not ours)";
    case ControlStatus::kBadRails:
      return "rail count does not match the listener's device";
    case ControlStatus::kNoResources:
      return "the peer could not create or connect its QP";
    case ControlStatus::kStale:
      return "stale generation";
  }
  return "unknown status";
}

void encodeControl(const ControlMessage& m, uint8_t out[kControlBytes]) {
  std::memset(out, 0, kControlBytes);
  put32(out, kControlMagic);
  put16(out + 4, kProtocolVersion);
  out[kCtlTypeAt] = uint8_t(m.type);
  out[kCtlStatusAt] = uint8_t(m.status);
  put64(out + kCtlConnAt, m.connectionId);
  std::memcpy(out + kCtlSecretAt, m.secret, kSecretBytes);
  out[kCtlRailCountAt] = m.railCount;
  out[kCtlRailAt] = m.rail;
  put32(out + kCtlGenerationAt, m.generation);
  put64(out + kCtlRegionAt, m.regionAddress);
  for (int i = 0; i < controlEndpoints(m); ++i) {
    putEndpoint(out + kCtlEndpointsAt + size_t(i) * kEndpointBytes, m.endpoints[i]);
  }
  if (m.type == ControlType::kRailDown) {
    put32(out + kCtlWritesAt, m.writesPosted);
    put32(out + kCtlWritesAt + 4, m.writesAcked);
    put32(out + kCtlWritesAt + 8, m.writesLanded);
  }
  put32(out + kCtlChecksumAt, fnv32(out, kCtlChecksumAt));
}

DecodeError decodeControl(const uint8_t* in, size_t len, ControlMessage* out) {
  if (len < kControlBytes) return DecodeError::kBadField;
  if (get32(in) != kControlMagic) return DecodeError::kBadMagic;
  if (get32(in + kCtlChecksumAt) != fnv32(in, kCtlChecksumAt)) return DecodeError::kBadChecksum;
  if (get16(in + 4) != kProtocolVersion) return DecodeError::kBadVersion;
  ControlMessage m;
  uint8_t type = in[kCtlTypeAt];
  if (type < uint8_t(ControlType::kConnect) || type > uint8_t(ControlType::kReplaced)) {
    return DecodeError::kBadField;
  }
  m.type = ControlType(type);
  if (in[kCtlStatusAt] > uint8_t(ControlStatus::kStale)) return DecodeError::kBadField;
  m.status = ControlStatus(in[kCtlStatusAt]);
  m.connectionId = get64(in + kCtlConnAt);
  std::memcpy(m.secret, in + kCtlSecretAt, kSecretBytes);
  m.railCount = in[kCtlRailCountAt];
  m.rail = in[kCtlRailAt];
  m.generation = get32(in + kCtlGenerationAt);
  m.regionAddress = get64(in + kCtlRegionAt);
  if (m.connectionId == 0 || get16(in + 34) != 0) return DecodeError::kBadField;
  bool perRail = m.type == ControlType::kConnect || m.type == ControlType::kAccept;
  if (perRail) {
    if (m.railCount < 1 || m.railCount > kMaxRails || m.rail != 0 || m.generation != 0) {
      return DecodeError::kBadField;
    }
  } else if (m.railCount != 0 || m.rail >= kMaxRails || m.generation == 0 || m.regionAddress != 0) {
    return DecodeError::kBadField;
  }
  // Only answers carry a status.
  if (m.type != ControlType::kAccept && m.type != ControlType::kReplaced &&
      m.status != ControlStatus::kOk) {
    return DecodeError::kBadField;
  }
  int endpoints = controlEndpoints(m);
  if (m.type != ControlType::kConnect && !allZero(m.secret, kSecretBytes)) {
    return DecodeError::kBadField;
  }
  for (int i = 0; i < endpoints; ++i) {
    if (!getEndpoint(in + kCtlEndpointsAt + size_t(i) * kEndpointBytes, &m.endpoints[i], perRail)) {
      return DecodeError::kBadField;
    }
  }
  size_t used = kCtlEndpointsAt + size_t(endpoints) * kEndpointBytes;
  if (m.type == ControlType::kRailDown) {
    m.writesPosted = get32(in + kCtlWritesAt);
    m.writesAcked = get32(in + kCtlWritesAt + 4);
    m.writesLanded = get32(in + kCtlWritesAt + 8);
    if (m.writesAcked > m.writesPosted) return DecodeError::kBadField;
    used = kCtlWritesAt + kCtlWritesBytes;
  }
  if (!allZero(in + used, kCtlChecksumAt - used)) return DecodeError::kBadField;
  *out = m;
  return DecodeError::kOk;
}

// ---------------------------------------------------------------------------- CTS

void encodeCts(const CtsEntry& e, uint8_t out[kCtsBytes]) {
  std::memset(out, 0, kCtsBytes);
  put64(out, e.seq);
  out[8] = uint8_t(e.n);
  out[9] = uint8_t(e.railCount);
  for (int i = 0; i < e.n && i < core::kMaxRecvsPerRequest; ++i) {
    uint8_t* b = out + kCtsBuffersAt + size_t(i) * kCtsBufferBytes;
    put64(b, e.buffers[i].address);
    put64(b + 8, e.buffers[i].size);
    put32(b + 16, uint32_t(e.buffers[i].tag));
    for (int r = 0; r < e.railCount && r < kMaxRails; ++r) {
      put32(b + 20 + size_t(r) * 4, e.buffers[i].rkeys[r]);
    }
  }
  put32(out + kCtsChecksumAt, fnv32(out, kCtsChecksumAt));
  put64(out + kCtsMarkerAt, ctsMarker(e.seq));
}

DecodeError decodeCts(const uint8_t* in, size_t len, uint64_t expectedSeq, int railCount,
                      CtsEntry* out) {
  if (len < kCtsBytes) return DecodeError::kBadField;
  if (get64(in + kCtsMarkerAt) != ctsMarker(expectedSeq) || get64(in) != expectedSeq) {
    return DecodeError::kBadMagic;
  }
  if (get32(in + kCtsChecksumAt) != fnv32(in, kCtsChecksumAt) || get32(in + 500) != 0) {
    return DecodeError::kBadChecksum;
  }
  CtsEntry e;
  e.seq = expectedSeq;
  e.n = in[8];
  e.railCount = in[9];
  if (e.n < 1 || e.n > core::kMaxRecvsPerRequest || e.railCount != railCount ||
      !allZero(in + 10, kCtsBuffersAt - 10)) {
    return DecodeError::kBadField;
  }
  for (int i = 0; i < core::kMaxRecvsPerRequest; ++i) {
    const uint8_t* b = in + kCtsBuffersAt + size_t(i) * kCtsBufferBytes;
    if (i >= e.n) {
      if (!allZero(b, kCtsBufferBytes)) return DecodeError::kBadField;
      continue;
    }
    e.buffers[i].address = get64(b);
    e.buffers[i].size = get64(b + 8);
    e.buffers[i].tag = int32_t(get32(b + 16));
    if (e.buffers[i].size > tcp::wire::kMaxMessageBytes ||
        e.buffers[i].address + e.buffers[i].size < e.buffers[i].address) {
      return DecodeError::kBadField;
    }
    for (int r = 0; r < kMaxRails; ++r) {
      uint32_t key = get32(b + 20 + size_t(r) * 4);
      if (r < railCount) {
        e.buffers[i].rkeys[r] = key;
      } else if (key != 0) {
        return DecodeError::kBadField;
      }
    }
    if (!allZero(b + 52, kCtsBufferBytes - 52)) return DecodeError::kBadField;
  }
  if (!allZero(in + kCtsBuffersAt + core::kMaxRecvsPerRequest * kCtsBufferBytes,
               kCtsChecksumAt - kCtsBuffersAt - core::kMaxRecvsPerRequest * kCtsBufferBytes)) {
    return DecodeError::kBadField;
  }
  *out = e;
  return DecodeError::kOk;
}

core::PostedReceive postedReceive(const CtsEntry& e) {
  core::PostedReceive p;
  p.seq = e.seq;
  p.n = e.n;
  for (int i = 0; i < e.n; ++i) {
    p.sizes[i] = e.buffers[i].size;
    p.tags[i] = e.buffers[i].tag;
  }
  return p;
}

// ---------------------------------------------------------------------------- immediate

uint32_t encodeImm(const ImmFields& f) {
  constexpr int kBufferAt = 2 * kChunkBits;
  constexpr int kSlotAt = kBufferAt + kBufferBits;
  constexpr int kEpochAt = kSlotAt + kSlotBits;
  return (f.epoch & ((1u << kEpochBits) - 1)) << kEpochAt |
         (f.slot & ((1u << kSlotBits) - 1)) << kSlotAt |
         (f.buffer & ((1u << kBufferBits) - 1)) << kBufferAt |
         ((f.chunks - 1) & (kMaxChunks - 1)) << kChunkBits | (f.chunk & (kMaxChunks - 1));
}

bool decodeImm(uint32_t imm, ImmFields* out) {
  constexpr int kBufferAt = 2 * kChunkBits;
  constexpr int kSlotAt = kBufferAt + kBufferBits;
  constexpr int kEpochAt = kSlotAt + kSlotBits;
  ImmFields f;
  f.epoch = imm >> kEpochAt;
  f.slot = (imm >> kSlotAt) & ((1u << kSlotBits) - 1);
  f.buffer = (imm >> kBufferAt) & ((1u << kBufferBits) - 1);
  f.chunks = ((imm >> kChunkBits) & (kMaxChunks - 1)) + 1;
  f.chunk = imm & (kMaxChunks - 1);
  if (f.chunk >= f.chunks) return false;
  *out = f;
  return true;
}

}  // namespace autopilot::net::ib::wire

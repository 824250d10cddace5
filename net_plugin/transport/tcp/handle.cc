#include "net_plugin/transport/tcp/handle.h"

#include <netinet/in.h>

#include <cstring>

#include "net_plugin/core/wire_bytes.h"

namespace autopilot::net::tcp {

namespace {

constexpr size_t kRailsAt = 24;
constexpr size_t kChecksumAt = 116;

using core::bytes::fnv32;
using core::bytes::get32;
using core::bytes::put32;

}  // namespace

bool encodeHandle(const Handle& h, uint8_t out[kHandleBytes], std::string* error) {
  std::memset(out, 0, kHandleBytes);
  if (h.railCount < 1 || h.railCount > wire::kMaxRails) {
    if (error) *error = "a handle carries 1 to " + std::to_string(wire::kMaxRails) + " rails";
    return false;
  }
  put32(out, kHandleMagic);
  out[4] = uint8_t(h.version);
  out[5] = uint8_t(h.version >> 8);
  out[6] = uint8_t(h.railCount);
  std::memcpy(out + 8, h.secret, wire::kSecretBytes);
  size_t pos = kRailsAt;
  for (int i = 0; i < h.railCount; ++i) {
    const SockAddr& a = h.rails[i];
    size_t addrBytes = a.family() == AF_INET ? 4 : a.family() == AF_INET6 ? 16 : 0;
    if (addrBytes == 0) {
      if (error) *error = "rail " + std::to_string(i) + " has no IPv4/IPv6 address";
      return false;
    }
    if (pos + 3 + addrBytes > kChecksumAt) {
      if (error) *error = "rail addresses do not fit in NCCL's 128-byte handle";
      return false;
    }
    out[pos] = a.family() == AF_INET ? 4 : 6;
    uint16_t port = a.port();
    out[pos + 1] = uint8_t(port);
    out[pos + 2] = uint8_t(port >> 8);
    if (a.family() == AF_INET) {
      std::memcpy(out + pos + 3, &reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr, 4);
    } else {
      std::memcpy(out + pos + 3, &reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr, 16);
    }
    pos += 3 + addrBytes;
  }
  put32(out + kChecksumAt, fnv32(out, kChecksumAt));
  return true;
}

wire::DecodeError decodeHandle(const uint8_t* in, size_t len, Handle* out) {
  using wire::DecodeError;
  if (len < kHandleBytes) return DecodeError::kBadField;
  if (get32(in) != kHandleMagic) return DecodeError::kBadMagic;
  if (get32(in + kChecksumAt) != fnv32(in, kChecksumAt)) return DecodeError::kBadChecksum;
  Handle h;
  h.version = uint16_t(in[4] | (in[5] << 8));
  out->version = h.version;
  if (h.version != wire::kProtocolVersion) return DecodeError::kBadVersion;
  h.railCount = in[6];
  if (h.railCount < 1 || h.railCount > wire::kMaxRails || in[7] != 0) return DecodeError::kBadField;
  std::memcpy(h.secret, in + 8, wire::kSecretBytes);
  size_t pos = kRailsAt;
  for (int i = 0; i < h.railCount; ++i) {
    if (pos + 3 > kChecksumAt) return DecodeError::kBadField;
    uint8_t family = in[pos];
    size_t addrBytes = family == 4 ? 4 : family == 6 ? 16 : 0;
    if (addrBytes == 0 || pos + 3 + addrBytes > kChecksumAt) return DecodeError::kBadField;
    uint16_t port = uint16_t(in[pos + 1] | (in[pos + 2] << 8));
    if (port == 0) return DecodeError::kBadField;
    SockAddr& a = h.rails[i];
    a = SockAddr{};
    if (family == 4) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
      v4->sin_family = AF_INET;
      std::memcpy(&v4->sin_addr, in + pos + 3, 4);
      a.length = sizeof(sockaddr_in);
    } else {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
      v6->sin6_family = AF_INET6;
      std::memcpy(&v6->sin6_addr, in + pos + 3, 16);
      a.length = sizeof(sockaddr_in6);
    }
    a.setPort(port);
    pos += 3 + addrBytes;
  }
  for (size_t i = pos; i < kChecksumAt; ++i) {
    if (in[i] != 0) return DecodeError::kBadField;
  }
  *out = h;
  return DecodeError::kOk;
}

}  // namespace autopilot::net::tcp

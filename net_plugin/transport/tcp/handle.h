// The 128-byte connection handle NCCL carries from listen() to the peer's connect(): every rail
// address of the listening side (IPv4 or IPv6, one per rail), a per-listen random secret, the
// protocol version and a magic, all covered by a checksum, so that garbage, a handle from
// another program or another version is recognised and rejected with a clear message.
//
// Layout: magic @0 "APNH", version @4, rail count @6, reserved @7, secret @8..24, rails from
// @24 (family 4|6, port, 4 or 16 address bytes each) up to @116, checksum @116, and @120 eight
// bytes that belong to the connecting side: NCCL calls connect() again with the same handle
// buffer until it completes, and the connecting side keeps a token there to find its
// in-progress state (the listener writes zeros).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "net_plugin/transport/tcp/socket.h"
#include "net_plugin/transport/tcp/wire.h"

namespace autopilot::net::tcp {

inline constexpr size_t kHandleBytes = 128;
inline constexpr uint32_t kHandleMagic = 0x484e5041;  // "APNH"

struct Handle {
  uint16_t version = wire::kProtocolVersion;
  uint8_t secret[wire::kSecretBytes] = {};
  int railCount = 0;
  SockAddr rails[wire::kMaxRails];
};

// False (with a reason) when the rails do not fit in the handle.
bool encodeHandle(const Handle& h, uint8_t out[kHandleBytes], std::string* error);
wire::DecodeError decodeHandle(const uint8_t* in, size_t len, Handle* out);

}  // namespace autopilot::net::tcp

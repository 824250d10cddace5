// libFuzzer target: the 128-byte connection handle decoder (handle.h). Whatever the bytes, the
// decoder must not read out of bounds or crash, and whatever it accepts must survive an
// encode/decode round trip unchanged.
#include <cstring>
#include <string>

#include "net_plugin/transport/tcp/handle.h"
#include "test/net/fuzz/fuzz_common.h"

using namespace autopilot::net::tcp;

namespace {

// Structure-aware mode: a valid handle built from the input, then one byte changed (and the
// checksum fixed), so the field checks behind the checksum see near-valid inputs.
bool buildNearValid(const uint8_t* data, size_t size, uint8_t* buf) {
  if (size < 4) return false;
  Handle h;
  h.railCount = 1 + data[0] % wire::kMaxRails;
  std::memcpy(h.secret, data, std::min(size, sizeof(h.secret)));
  size_t pos = 1;
  auto next = [&]() -> uint8_t { return pos < size ? data[pos++] : uint8_t(pos++); };
  for (int r = 0; r < h.railCount; ++r) {
    bool v6 = next() & 1;
    std::string host =
        v6 ? "fd00::" + std::to_string(next()) : "127.31." + std::to_string(next()) + ".2";
    if (!SockAddr::parseHost(host, &h.rails[r])) return false;
    h.rails[r].setPort(uint16_t(1 + next() * 251));
  }
  std::string error;
  if (!encodeHandle(h, buf, &error)) return false;
  size_t at = next() % 116;
  buf[at] ^= next();
  autopilot::fuzz::fixChecksum(buf, 116);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint8_t flags = data[0];
  uint8_t buf[kHandleBytes] = {};
  std::memcpy(buf, data + 1, std::min(size - 1, sizeof(buf)));
  if ((flags & 4) && !buildNearValid(data + 1, size - 1, buf)) return 0;
  if ((flags & 4) == 0 && (flags & 1)) {  // plausible header: our magic and version
    autopilot::fuzz::put32(buf, kHandleMagic);
    buf[4] = uint8_t(wire::kProtocolVersion);
    buf[5] = 0;
  }
  if ((flags & 4) == 0 && (flags & 2)) autopilot::fuzz::fixChecksum(buf, 116);
  // Short inputs must be rejected, not read beyond their end.
  Handle shortHandle;
  if (decodeHandle(data, std::min(size, kHandleBytes - 1), &shortHandle) ==
      wire::DecodeError::kOk) {
    __builtin_trap();
  }
  Handle h;
  if (decodeHandle(buf, sizeof(buf), &h) != wire::DecodeError::kOk) return 0;
  if (h.railCount < 1 || h.railCount > wire::kMaxRails) __builtin_trap();
  uint8_t again[kHandleBytes];
  std::string error;
  if (!encodeHandle(h, again, &error)) __builtin_trap();
  Handle h2;
  if (decodeHandle(again, sizeof(again), &h2) != wire::DecodeError::kOk) __builtin_trap();
  if (h2.railCount != h.railCount || std::memcmp(h2.secret, h.secret, sizeof(h.secret)) != 0) {
    __builtin_trap();
  }
  for (int r = 0; r < h.railCount; ++r) {
    if (!h2.rails[r].sameHost(h.rails[r]) || h2.rails[r].port() != h.rails[r].port()) {
      __builtin_trap();
    }
  }
  // The last 8 bytes belong to the connecting side (its connect token): writing them must not
  // spoil the handle.
  std::memset(again + kHandleBytes - 8, 0xa5, 8);
  if (decodeHandle(again, sizeof(again), &h2) != wire::DecodeError::kOk) __builtin_trap();
  return 0;
}

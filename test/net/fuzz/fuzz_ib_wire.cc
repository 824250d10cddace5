// libFuzzer target: everything the verbs transport decodes from a peer. The first byte picks
// the format: the connection handle, a control message (CONNECT / ACCEPT / RAIL_DOWN / REPLACE /
// REPLACED), a clear-to-send entry as it lands in the FIFO, or a write's immediate. Half of the
// inputs get a valid checksum (and marker) so that the field checks behind them are reached.
// Nothing may crash or read out of bounds, and whatever decodes must re-encode to the same bytes
// (no field is silently dropped or normalised).
#include <cstring>

#include "net_plugin/transport/ibverbs/wire.h"
#include "test/net/fuzz/fuzz_common.h"

using namespace autopilot::net::ib;

namespace {

void handle(const uint8_t* data, size_t size, bool fix) {
  uint8_t buf[wire::kHandleBytes] = {};
  std::memcpy(buf, data, std::min(size, sizeof(buf)));
  if (fix) {
    autopilot::fuzz::put32(buf, wire::kHandleMagic);
    buf[4] = uint8_t(wire::kProtocolVersion);
    buf[5] = 0;
    autopilot::fuzz::fixChecksum(buf, 116);
  }
  wire::Handle h;
  if (wire::decodeHandle(buf, sizeof(buf), &h) != wire::DecodeError::kOk) return;
  if (h.railCount < 1 || h.railCount > wire::kMaxRails || h.control.port() == 0) __builtin_trap();
  uint8_t again[wire::kHandleBytes];
  if (!wire::encodeHandle(h, again) || std::memcmp(again, buf, 120) != 0) __builtin_trap();
}

void control(const uint8_t* data, size_t size, bool fix) {
  uint8_t buf[wire::kControlBytes] = {};
  std::memcpy(buf, data, std::min(size, sizeof(buf)));
  if (fix) {
    autopilot::fuzz::put32(buf, wire::kControlMagic);
    buf[4] = uint8_t(wire::kProtocolVersion);
    buf[5] = 0;
    autopilot::fuzz::fixChecksum(buf, wire::kControlBytes - 4);
  }
  wire::ControlMessage m;
  if (wire::decodeControl(buf, sizeof(buf), &m) != wire::DecodeError::kOk) return;
  if (m.connectionId == 0) __builtin_trap();
  uint8_t again[wire::kControlBytes];
  wire::encodeControl(m, again);
  if (std::memcmp(again, buf, sizeof(buf)) != 0) __builtin_trap();
}

void cts(const uint8_t* data, size_t size, bool fix) {
  if (size < 2) return;
  int rails = 1 + data[0] % wire::kMaxRails;
  uint8_t buf[wire::kCtsBytes] = {};
  std::memcpy(buf, data + 1, std::min(size - 1, sizeof(buf)));
  uint64_t seq = 0;
  for (int i = 7; i >= 0; --i) seq = (seq << 8) | buf[i];
  if (fix) {
    autopilot::fuzz::fixChecksum(buf, 496);
    std::memset(buf + 500, 0, 4);
    uint64_t marker = wire::ctsMarker(seq);
    std::memcpy(buf + wire::kCtsMarkerAt, &marker, 8);  // little-endian host
  }
  wire::CtsEntry e;
  if (wire::decodeCts(buf, sizeof(buf), seq, rails, &e) != wire::DecodeError::kOk) return;
  if (e.n < 1 || e.n > autopilot::net::core::kMaxRecvsPerRequest || e.railCount != rails) {
    __builtin_trap();
  }
  uint8_t again[wire::kCtsBytes];
  wire::encodeCts(e, again);
  if (std::memcmp(again, buf, sizeof(buf)) != 0) __builtin_trap();
  autopilot::net::core::PostedReceive p = wire::postedReceive(e);
  if (p.n != e.n) __builtin_trap();
}

void immediate(const uint8_t* data, size_t size) {
  uint32_t imm = 0;
  std::memcpy(&imm, data, std::min<size_t>(size, 4));
  wire::ImmFields f;
  if (!wire::decodeImm(imm, &f)) return;
  if (f.chunk >= f.chunks || f.chunks > wire::kMaxChunks || f.slot >= wire::kSlots) {
    __builtin_trap();
  }
  if (wire::encodeImm(f) != imm) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  bool fix = data[0] & 0x80;
  switch (data[0] & 0x3) {
    case 0:
      handle(data + 1, size - 1, fix);
      break;
    case 1:
      control(data + 1, size - 1, fix);
      break;
    case 2:
      cts(data + 1, size - 1, fix);
      break;
    case 3:
      immediate(data + 1, size - 1);
      break;
  }
  return 0;
}

// libFuzzer target: everything a peer can put on the wire. The first byte picks what the rest
// is: a HELLO, a HELLO_ACK, or a byte stream parsed as data-phase frames exactly as the comms
// do (header, staged control body, CTS entries fed to the receive matcher, DATA chunk indices
// fed to a chunk bitmap). Nothing may crash, read out of bounds, or accept a frame that breaks
// the invariants the comms rely on.
#include <cstring>

#include "net_plugin/core/chunk_bitmap.h"
#include "net_plugin/core/receive_matcher.h"
#include "net_plugin/transport/tcp/wire.h"
#include "test/net/fuzz/fuzz_common.h"

using namespace autopilot::net;
using namespace autopilot::net::tcp;

namespace {

void hello(const uint8_t* data, size_t size, bool fix, bool ack) {
  uint8_t buf[wire::kHelloBytes] = {};
  std::memcpy(buf, data, std::min(size, sizeof(buf)));
  if (fix) {
    autopilot::fuzz::put32(buf, ack ? wire::kHelloAckMagic : wire::kHelloMagic);
    buf[4] = uint8_t(wire::kProtocolVersion);
    buf[5] = 0;
    autopilot::fuzz::fixChecksum(buf, wire::kHelloBytes - 4);
  }
  if (ack) {
    wire::HelloAck a;
    if (wire::decodeHelloAck(buf, sizeof(buf), &a) == wire::DecodeError::kOk &&
        uint8_t(a.status) > uint8_t(wire::AckStatus::kBusy)) {
      __builtin_trap();
    }
    return;
  }
  wire::Hello h;
  if (wire::decodeHello(buf, sizeof(buf), &h) == wire::DecodeError::kOk) {
    if (h.railCount == 0 || h.railCount > wire::kMaxRails || h.railIndex >= h.railCount ||
        h.generation == 0 || h.connectionId == 0) {
      __builtin_trap();
    }
    uint8_t again[wire::kHelloBytes];
    wire::encodeHello(h, again);
    if (std::memcmp(again, buf, sizeof(buf)) != 0) __builtin_trap();
  }
}

void stream(const uint8_t* data, size_t size) {
  core::ReceiveMatcher matcher(32);
  core::ChunkBitmap bitmap(1024);
  size_t pos = 0;
  while (size - pos >= wire::kFrameHeaderBytes) {
    wire::FrameHeader h;
    if (wire::decodeFrameHeader(data + pos, size - pos, &h) != wire::DecodeError::kOk) return;
    size_t body = wire::controlBodyBytes(h);
    if (body > wire::kMaxCtsBodyBytes) __builtin_trap();
    if (size - pos < wire::kFrameHeaderBytes + body) return;
    const uint8_t* b = data + pos + wire::kFrameHeaderBytes;
    switch (h.type) {
      case wire::FrameType::kCts: {
        core::PostedReceive p;
        if (wire::decodeCtsBody(h, b, body, &p) == wire::DecodeError::kOk) {
          if (p.n < 1 || p.n > core::kMaxRecvsPerRequest) __builtin_trap();
          matcher.offer(p);
          core::ReceiveMatcher::Slot slot;
          matcher.match(p.tags[0], p.sizes[0], &slot);
        }
        break;
      }
      case wire::FrameType::kData:
        if (h.chunk >= h.chunks || h.offset + h.length < h.offset) __builtin_trap();
        if (bitmap.mark(h.chunk, h.chunks) == core::ChunkBitmap::Mark::kInvalid) bitmap.reset();
        // The payload follows; skip what the input has of it.
        pos += std::min<uint64_t>(h.length, size - pos - wire::kFrameHeaderBytes);
        break;
      case wire::FrameType::kAck:
      case wire::FrameType::kPing:
      case wire::FrameType::kPong: {
        // Header-only frames re-encode to the same bytes.
        uint8_t again[wire::kFrameHeaderBytes];
        if (h.type == wire::FrameType::kAck) {
          wire::encodeAck(h.seq, h.offset, again);
        } else {
          wire::encodeLiveness(h.type, h.seq, again);
        }
        if (std::memcmp(again, data + pos, wire::kFrameHeaderBytes) != 0) __builtin_trap();
        break;
      }
    }
    pos += wire::kFrameHeaderBytes + body;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint8_t mode = data[0];
  data++;
  size--;
  switch (mode % 5) {
    case 0:
      hello(data, size, false, false);
      break;
    case 1:
      hello(data, size, true, false);
      break;
    case 2:
      hello(data, size, true, true);
      break;
    default:
      stream(data, size);
      break;
  }
  return 0;
}

// The TCP transport's data-phase frames: header-only frames round-trip, and anything else in
// their spare fields is rejected.
#include <catch2/catch.hpp>
#include <cstring>

#include "net_plugin/transport/tcp/wire.h"

using namespace autopilot::net::tcp;

TEST_CASE("wire: liveness ping and pong round-trip; stray fields are rejected", "[net][wire]") {
  for (wire::FrameType t : {wire::FrameType::kPing, wire::FrameType::kPong}) {
    uint8_t buf[wire::kFrameHeaderBytes];
    REQUIRE(wire::encodeLiveness(t, 0x1122334455667788ull, buf) == wire::kFrameHeaderBytes);
    wire::FrameHeader h;
    REQUIRE(wire::decodeFrameHeader(buf, sizeof(buf), &h) == wire::DecodeError::kOk);
    CHECK(h.type == t);
    CHECK(h.seq == 0x1122334455667788ull);
    CHECK(wire::controlBodyBytes(h) == 0);
    uint8_t bad[wire::kFrameHeaderBytes];
    std::memcpy(bad, buf, sizeof(bad));
    bad[4] = 1;  // a length on a header-only frame
    CHECK(wire::decodeFrameHeader(bad, sizeof(bad), &h) == wire::DecodeError::kBadField);
    CHECK(wire::decodeFrameHeader(buf, sizeof(buf) - 1, &h) == wire::DecodeError::kBadField);
  }
  uint8_t unknown[wire::kFrameHeaderBytes];
  wire::encodeLiveness(wire::FrameType::kPing, 1, unknown);
  unknown[2] = 9;  // no such frame type
  wire::FrameHeader h;
  CHECK(wire::decodeFrameHeader(unknown, sizeof(unknown), &h) == wire::DecodeError::kBadField);
}

TEST_CASE("wire: an acknowledgement carries the frame count and the receive watermark",
          "[net][wire]") {
  uint8_t buf[wire::kFrameHeaderBytes];
  REQUIRE(wire::encodeAck(123456, 789, buf) == wire::kFrameHeaderBytes);
  wire::FrameHeader h;
  REQUIRE(wire::decodeFrameHeader(buf, sizeof(buf), &h) == wire::DecodeError::kOk);
  CHECK(h.type == wire::FrameType::kAck);
  CHECK(h.seq == 123456);
  CHECK(h.offset == 789);
  buf[24] = 1;  // a chunk index on an acknowledgement
  CHECK(wire::decodeFrameHeader(buf, sizeof(buf), &h) == wire::DecodeError::kBadField);
}

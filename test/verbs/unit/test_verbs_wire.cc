// The verbs transport's wire formats: round trips, and every corruption a peer (or a torn RDMA
// write) could produce is rejected, never mistaken for a valid entry.
#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "net_plugin/core/transport_glue.h"
#include "net_plugin/transport/ibverbs/wire.h"
#include "net_plugin/transport/tcp/handle.h"

using namespace autopilot::net;
using namespace autopilot::net::ib;
using wire::DecodeError;

TEST_CASE("verbs wire: immediates carry epoch, slot, buffer, chunk and count", "[verbs][unit]") {
  for (uint64_t seq : {0ull, 1ull, 31ull, 32ull, 33ull, 511ull, 512ull, 123456789ull}) {
    for (uint32_t buffer : {0u, 3u, 7u}) {
      for (uint32_t chunks : {1u, 2u, 1000u, 1024u}) {
        for (uint32_t chunk : {0u, chunks / 2, chunks - 1}) {
          wire::ImmFields f{wire::immEpoch(seq), wire::immSlot(seq), buffer, chunk, chunks}, g;
          REQUIRE(wire::decodeImm(wire::encodeImm(f), &g));
          CHECK(g.epoch == seq / 32 % 16);
          CHECK(g.slot == seq % 32);
          CHECK(g.buffer == buffer);
          CHECK(g.chunk == chunk);
          CHECK(g.chunks == chunks);
        }
      }
    }
  }
  // Requests 32 apart share a slot but not an epoch.
  CHECK(wire::immSlot(5) == wire::immSlot(37));
  CHECK(wire::immEpoch(5) != wire::immEpoch(37));
  // The sender's bound (SendComm::mustWait): while a duplicate for receive d may be in flight,
  // no chunk of a receive d + kAliasFreeAhead or later is placed, so the receiver completes at
  // most the receives before it and posts at most up to d + kAliasFreeAhead + 31. None of
  // those shares d's slot and epoch; the first receive that does lies beyond.
  for (uint64_t d : {uint64_t(0), uint64_t(5), uint64_t(479), uint64_t(1) << 40}) {
    uint64_t lastPostable = d + wire::kAliasFreeAhead + wire::kSlots - 1;
    for (uint64_t s = d + 1; s <= lastPostable; ++s) {
      bool alias = wire::immSlot(s) == wire::immSlot(d) && wire::immEpoch(s) == wire::immEpoch(d);
      if (alias) FAIL("receive " << s << " aliases " << d);
    }
    CHECK(wire::immSlot(lastPostable + 1) == wire::immSlot(d));
    CHECK(wire::immEpoch(lastPostable + 1) == wire::immEpoch(d));
  }
  // A chunk index beyond the count cannot come from a well-behaved sender.
  wire::ImmFields g;
  CHECK_FALSE(wire::decodeImm(wire::encodeImm({0, 0, 0, 5, 6}) + 1, &g));
  CHECK_FALSE(wire::decodeImm(0x000003ffu, &g));  // chunk 1023 of 1
}

namespace {

wire::CtsEntry sampleCts(uint64_t seq, int n, int rails) {
  wire::CtsEntry e;
  e.seq = seq;
  e.n = n;
  e.railCount = rails;
  for (int i = 0; i < n; ++i) {
    e.buffers[i].address = 0x7f0000001000ull + uint64_t(i) * 0x100000;
    e.buffers[i].size = uint64_t(i + 1) * 4096 + 3;
    e.buffers[i].tag = i * 7 - 3;
    for (int r = 0; r < rails; ++r) e.buffers[i].rkeys[r] = 0x1000u * uint32_t(r + 1) + uint32_t(i);
  }
  return e;
}

}  // namespace

TEST_CASE("verbs wire: clear-to-send entries round-trip; corruption is rejected", "[verbs][unit]") {
  uint8_t buf[wire::kCtsBytes];
  wire::CtsEntry e = sampleCts(77, 3, 2), d;
  wire::encodeCts(e, buf);
  REQUIRE(wire::decodeCts(buf, sizeof(buf), 77, 2, &d) == DecodeError::kOk);
  CHECK(d.seq == 77);
  REQUIRE(d.n == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(d.buffers[i].address == e.buffers[i].address);
    CHECK(d.buffers[i].size == e.buffers[i].size);
    CHECK(d.buffers[i].tag == e.buffers[i].tag);
    CHECK(d.buffers[i].rkeys[0] == e.buffers[i].rkeys[0]);
    CHECK(d.buffers[i].rkeys[1] == e.buffers[i].rkeys[1]);
  }
  core::PostedReceive p = wire::postedReceive(d);
  CHECK(p.seq == 77);
  CHECK(p.n == 3);
  CHECK(p.sizes[2] == e.buffers[2].size);
  CHECK(p.tags[1] == e.buffers[1].tag);

  // Another sequence number (an older entry still in the slot) is "not yet", not an error.
  CHECK(wire::decodeCts(buf, sizeof(buf), 78, 2, &d) == DecodeError::kBadMagic);
  CHECK(wire::decodeCts(buf, sizeof(buf), 45, 2, &d) == DecodeError::kBadMagic);
  // Rail count disagreement, truncation.
  CHECK(wire::decodeCts(buf, sizeof(buf), 77, 3, &d) == DecodeError::kBadField);
  CHECK(wire::decodeCts(buf, sizeof(buf) - 1, 77, 2, &d) == DecodeError::kBadField);
  // Every single-byte change is caught (checksum, marker or field checks).
  for (size_t i = 0; i < sizeof(buf); ++i) {
    uint8_t bad[wire::kCtsBytes];
    std::memcpy(bad, buf, sizeof(bad));
    bad[i] ^= 0x5a;
    INFO("byte " << i);
    CHECK(wire::decodeCts(bad, sizeof(bad), 77, 2, &d) != DecodeError::kOk);
  }
  // A torn write: the marker of the new entry over the body of the old one.
  uint8_t older[wire::kCtsBytes];
  wire::encodeCts(sampleCts(45, 1, 2), older);
  std::memcpy(older + wire::kCtsMarkerAt, buf + wire::kCtsMarkerAt, 8);
  CHECK(wire::decodeCts(older, sizeof(older), 77, 2, &d) != DecodeError::kOk);
}

TEST_CASE("verbs wire: control messages round-trip; garbage is rejected", "[verbs][unit]") {
  wire::ControlMessage m;
  m.type = wire::ControlType::kConnect;
  m.connectionId = 0x1234567890abcdefull;
  for (size_t i = 0; i < sizeof(m.secret); ++i) m.secret[i] = uint8_t(i * 13 + 1);
  m.railCount = 2;
  m.regionAddress = 0x7f12345000ull;
  for (int r = 0; r < 2; ++r) {
    m.endpoints[r].qpn = 0x11 + uint32_t(r);
    m.endpoints[r].psn = 0xabcdef;
    m.endpoints[r].lid = 0;
    m.endpoints[r].linkLayer = 2;
    m.endpoints[r].mtu = 3;
    m.endpoints[r].gid[10] = 0xff;
    m.endpoints[r].gid[11] = 0xff;
    m.endpoints[r].gid[15] = uint8_t(r + 1);
    m.endpoints[r].rkey = 0xfeed0000u + uint32_t(r);
  }
  uint8_t buf[wire::kControlBytes];
  wire::encodeControl(m, buf);
  wire::ControlMessage d;
  REQUIRE(wire::decodeControl(buf, sizeof(buf), &d) == DecodeError::kOk);
  CHECK(d.type == wire::ControlType::kConnect);
  CHECK(d.connectionId == m.connectionId);
  CHECK(std::memcmp(d.secret, m.secret, sizeof(m.secret)) == 0);
  CHECK(d.railCount == 2);
  CHECK(d.regionAddress == m.regionAddress);
  CHECK(d.endpoints[1].qpn == 0x12);
  CHECK(d.endpoints[1].rkey == 0xfeed0001u);
  CHECK(d.endpoints[1].gid[15] == 2);
  for (size_t i = 0; i < sizeof(buf); ++i) {
    uint8_t bad[wire::kControlBytes];
    std::memcpy(bad, buf, sizeof(bad));
    bad[i] ^= 0x01;
    INFO("byte " << i);
    CHECK(wire::decodeControl(bad, sizeof(bad), &d) != DecodeError::kOk);
  }

  // Per-rail messages: one endpoint for REPLACE, none for RAIL_DOWN and refusals.
  wire::ControlMessage r;
  r.type = wire::ControlType::kReplace;
  r.connectionId = 9;
  r.rail = 1;
  r.generation = 4;
  r.endpoints[0] = m.endpoints[0];
  wire::encodeControl(r, buf);
  REQUIRE(wire::decodeControl(buf, sizeof(buf), &d) == DecodeError::kOk);
  CHECK(d.rail == 1);
  CHECK(d.generation == 4);
  CHECK(d.endpoints[0].qpn == m.endpoints[0].qpn);

  wire::ControlMessage refused;
  refused.type = wire::ControlType::kReplaced;
  refused.connectionId = 9;
  refused.rail = 1;
  refused.generation = 4;
  refused.status = wire::ControlStatus::kNoResources;
  wire::encodeControl(refused, buf);
  REQUIRE(wire::decodeControl(buf, sizeof(buf), &d) == DecodeError::kOk);
  CHECK(d.status == wire::ControlStatus::kNoResources);

  wire::ControlMessage down;
  down.type = wire::ControlType::kRailDown;
  down.connectionId = 9;
  down.rail = 0;
  down.generation = 1;
  down.writesPosted = 70000;
  down.writesAcked = 69990;
  down.writesLanded = 69995;
  wire::encodeControl(down, buf);
  REQUIRE(wire::decodeControl(buf, sizeof(buf), &d) == DecodeError::kOk);
  CHECK(d.type == wire::ControlType::kRailDown);
  CHECK(d.writesPosted == 70000);
  CHECK(d.writesAcked == 69990);
  CHECK(d.writesLanded == 69995);

  // More writes acknowledged than posted cannot come from a well-behaved peer.
  down.writesAcked = 70001;
  wire::encodeControl(down, buf);
  CHECK(wire::decodeControl(buf, sizeof(buf), &d) == DecodeError::kBadField);
  down.writesAcked = 0;

  // Structurally invalid, with a valid checksum: a status on a request, a rail out of range.
  down.status = wire::ControlStatus::kStale;
  wire::encodeControl(down, buf);
  CHECK(wire::decodeControl(buf, sizeof(buf), &d) == DecodeError::kBadField);
  down.status = wire::ControlStatus::kOk;
  down.rail = wire::kMaxRails;
  wire::encodeControl(down, buf);
  CHECK(wire::decodeControl(buf, sizeof(buf), &d) == DecodeError::kBadField);
  r.endpoints[0].mtu = 9;
  wire::encodeControl(r, buf);
  CHECK(wire::decodeControl(buf, sizeof(buf), &d) == DecodeError::kBadField);
}

TEST_CASE("verbs wire: the handle round-trips; the TCP transport's handle is recognised",
          "[verbs][unit]") {
  wire::Handle h;
  h.railCount = 2;
  for (size_t i = 0; i < sizeof(h.secret); ++i) h.secret[i] = uint8_t(200 - i);
  REQUIRE(tcp::SockAddr::parseHost("127.0.0.1", &h.control));
  h.control.setPort(40123);
  uint8_t buf[wire::kHandleBytes];
  REQUIRE(wire::encodeHandle(h, buf));
  core::bytes::put64(buf + core::kConnectTokenAt, 0x1122334455667788ull);  // the connecting side's
  wire::Handle d;
  REQUIRE(wire::decodeHandle(buf, sizeof(buf), &d) == DecodeError::kOk);
  CHECK(d.control.str() == "127.0.0.1:40123");
  CHECK(d.railCount == 2);
  CHECK(std::memcmp(d.secret, h.secret, sizeof(h.secret)) == 0);

  REQUIRE(tcp::SockAddr::parseHost("::1", &h.control));
  h.control.setPort(7);
  REQUIRE(wire::encodeHandle(h, buf));
  REQUIRE(wire::decodeHandle(buf, sizeof(buf), &d) == DecodeError::kOk);
  CHECK(d.control.str() == "[::1]:7");

  for (size_t i = 0; i < 116; ++i) {
    uint8_t bad[wire::kHandleBytes];
    std::memcpy(bad, buf, sizeof(bad));
    bad[i] ^= 0x80;
    INFO("byte " << i);
    CHECK(wire::decodeHandle(bad, sizeof(bad), &d) != DecodeError::kOk);
  }

  tcp::Handle th;
  th.railCount = 1;
  REQUIRE(tcp::SockAddr::parseHost("127.0.0.1", &th.rails[0]));
  th.rails[0].setPort(5);
  uint8_t tb[tcp::kHandleBytes];
  REQUIRE(tcp::encodeHandle(th, tb, nullptr));
  CHECK(wire::decodeHandle(tb, sizeof(tb), &d) == DecodeError::kBadMagic);
  CHECK(wire::isTcpHandle(tb, sizeof(tb)));
  CHECK_FALSE(wire::isTcpHandle(buf, sizeof(buf)));
}

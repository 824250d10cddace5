// The TCP rail link's read pacing (bookkeeping only: no connection needed).
#include <catch2/catch.hpp>

#include "net_plugin/transport/tcp/rail_link.h"

using autopilot::net::tcp::RailLink;

TEST_CASE("rail link: a quiet rail is read at most every kQuietReadNs, an active one every pass",
          "[net][tcp]") {
  RailLink link;
  const uint64_t t = 10'000'000'000ull;
  CHECK(link.readDue(t));  // never read
  CHECK_FALSE(link.active(t));
  link.noteRead(t, false);
  CHECK_FALSE(link.readDue(t + 1));
  CHECK_FALSE(link.readDue(t + RailLink::kQuietReadNs - 1));
  CHECK(link.readDue(t + RailLink::kQuietReadNs));
  // Bytes came: read on every pass for kActiveNs.
  link.noteRead(t + 100, true);
  CHECK(link.active(t + 100 + RailLink::kActiveNs - 1));
  CHECK(link.readDue(t + 101));
  link.noteRead(t + 101, false);
  CHECK(link.readDue(t + 102));
  CHECK_FALSE(link.active(t + 100 + RailLink::kActiveNs));
  const uint64_t quiet = t + 100 + RailLink::kActiveNs;
  link.noteRead(quiet, false);
  CHECK_FALSE(link.readDue(quiet + 1));
  // A frame in progress, or bytes staged, are read on regardless.
  link.inPayload = true;
  CHECK(link.readDue(quiet + 1));
  link.inPayload = false;
  // A new connection starts quiet, never read.
  link.attach(autopilot::net::tcp::Fd(), 2);
  CHECK(link.readDue(quiet + 1));
  CHECK_FALSE(link.active(quiet + 1));
}

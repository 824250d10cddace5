// RailHealth: transitions logged once, counted, journaled and published to telemetry.
#include <catch2/catch.hpp>

#include "common/event_journal.h"
#include "common/rail_telemetry.h"
#include "net_plugin/core/rail_health.h"

using namespace autopilot;
using namespace autopilot::net::core;
using State = telemetry::RailState;

constexpr uint64_t kMs = 1'000'000;

namespace {
std::vector<RailHealth::RailInfo> rails(int n, int standby = -1) {
  auto& reg = telemetry::RailRegistry::instance();
  std::vector<RailHealth::RailInfo> out;
  for (int i = 0; i < n; ++i) {
    telemetry::RailIdentity id{};
    std::snprintf(id.name, sizeof(id.name), "hr%d", i);
    std::snprintf(id.transport, sizeof(id.transport), "tcp");
    RailHealth::RailInfo info;
    info.telemetryId = reg.registerRail(id);
    info.name = id.name;
    info.standby = i == standby;
    out.push_back(info);
  }
  return out;
}

size_t journalCount(const char* kind) {
  uint64_t cursor = 0;
  journal::Event ev[256];
  size_t n = journal::EventJournal::instance().readSince(&cursor, ev, 256), c = 0;
  for (size_t i = 0; i < n; ++i) c += std::string(ev[i].kind) == kind;
  return c;
}
}  // namespace

TEST_CASE("rail health: fail, re-join, probation; every change counted and journaled",
          "[net][health]") {
  telemetry::RailRegistry::instance().resetForTesting();
  journal::EventJournal::instance().resetForTesting();
  RailHealth h;
  RailHealthConfig cfg;
  cfg.probationNs = 500 * kMs;
  h.init(0x77, "send", rails(3, 2), cfg, 0);
  CHECK(h.liveCount() == 0);
  CHECK(h.noLiveRailSinceNs() == 0);  // set at init to `now` = 0
  for (int r = 0; r < 3; ++r) h.connected(r, 1);
  CHECK(h.liveCount() == 3);
  CHECK(h.state(0) == State::kHealthy);
  CHECK(h.state(2) == State::kStandby);
  CHECK(h.mode(2) == RailMode::kStandby);
  CHECK(h.mode(0) == RailMode::kActive);
  CHECK(h.noLiveRailSinceNs() == 0);

  REQUIRE(h.fail(1, 10 * kMs, "no progress"));
  CHECK_FALSE(h.fail(1, 11 * kMs, "again"));  // logged and counted once
  CHECK(h.state(1) == State::kFailed);
  CHECK(h.mode(1) == RailMode::kDown);
  CHECK(h.failures(1) == 1);
  CHECK(h.failback(1).waiting());
  CHECK(journalCount("rail_failed") == 1);
  int id1 = h.info(1).telemetryId;
  CHECK(telemetry::RailRegistry::instance().state(id1) == State::kFailed);

  CHECK_FALSE(h.rejoin(0, 20 * kMs));  // not failed
  REQUIRE(h.rejoin(1, 100 * kMs));
  CHECK(h.state(1) == State::kProbing);
  CHECK(h.rejoins(1) == 1);
  h.evaluate(599 * kMs, nullptr, nullptr);
  CHECK(h.state(1) == State::kProbing);
  h.evaluate(600 * kMs, nullptr, nullptr);
  CHECK(h.state(1) == State::kHealthy);
  CHECK(journalCount("rail_rejoined") == 1);
  CHECK(journalCount("rail_healthy") == 1);
  telemetry::RailSnapshot snap[8];
  size_t n = telemetry::RailRegistry::instance().snapshot(snap, 8, 700 * kMs);
  REQUIRE(n >= 2);
  CHECK(snap[id1].failovers == 1);
  CHECK(snap[id1].recoveries == 1);
}

TEST_CASE("rail health: losing every rail is tracked and speeds up probing", "[net][health]") {
  RailHealth h;
  RailHealthConfig cfg;
  cfg.failback.initialBackoffNs = 50 * kMs;
  cfg.failback.maxBackoffNs = 5000 * kMs;
  h.init(0x78, "recv", rails(2), cfg, 0);
  h.connected(0, 0);
  h.connected(1, 0);
  h.fail(0, 10 * kMs, "reset");
  for (int i = 0; i < 10; ++i) h.failback(0).onAttemptFailed(10 * kMs);
  CHECK(h.failback(0).nextAttemptNs() > 4000 * kMs);
  CHECK(h.noLiveRailSinceNs() == 0);
  CHECK(h.noLiveRailForNs(15 * kMs) == 0);
  h.fail(1, 20 * kMs, "reset");
  CHECK(h.noLiveRailSinceNs() == 20 * kMs);
  CHECK(h.noLiveRailForNs(25 * kMs) == 5 * kMs);
  // The last rail failed on a clock read after the caller's (a completion polled later in the
  // same pass): no time has passed yet, the difference must not wrap to ~584 years.
  CHECK(h.noLiveRailForNs(19 * kMs) == 0);
  CHECK(h.failback(0).nextAttemptNs() <= 70 * kMs);
  h.rejoin(0, 30 * kMs);
  CHECK(h.noLiveRailSinceNs() == 0);
  CHECK(h.noLiveRailForNs(40 * kMs) == 0);
  CHECK(h.totalFailures() == 2);
  CHECK(h.totalRejoins() == 1);
}

TEST_CASE("rail health: a persistently slow rail is marked degraded, then recovers",
          "[net][health]") {
  journal::EventJournal::instance().resetForTesting();
  RailHealth h;
  RailHealthConfig cfg;
  cfg.degradation.holdNs = 100 * kMs;
  h.init(0x79, "send", rails(3), cfg, 0);
  for (int r = 0; r < 3; ++r) h.connected(r, 0);
  double bw[3] = {1e9, 1e9, 2e8};
  uint64_t samples[3] = {0, 0, 0};
  auto measureAll = [&] {
    for (uint64_t& n : samples) ++n;
  };
  for (uint64_t t = 0; t <= 200 * kMs; t += 10 * kMs, measureAll()) h.evaluate(t, bw, samples);
  CHECK(h.state(2) == State::kDegraded);
  CHECK(h.state(0) == State::kHealthy);
  CHECK(journalCount("rail_degraded") == 1);
  bw[2] = 9e8;
  for (uint64_t t = 300 * kMs; t <= 500 * kMs; t += 10 * kMs, measureAll())
    h.evaluate(t, bw, samples);
  CHECK(h.state(2) == State::kHealthy);
  CHECK(journalCount("rail_recovered") == 1);
  // A low estimate that no further measurement confirms (the connection went quiet after the
  // one low sample, taken last, that lowered it) is no verdict, however long it stands.
  bw[2] = 2e8;
  for (uint64_t t = 600 * kMs; t <= 1600 * kMs; t += 10 * kMs) h.evaluate(t, bw, samples);
  CHECK(h.state(2) == State::kHealthy);
  // Confirmed by two more (with that one, the default minSamples of three), it is.
  measureAll();
  h.evaluate(1610 * kMs, bw, samples);
  CHECK(h.state(2) == State::kHealthy);
  measureAll();
  h.evaluate(1620 * kMs, bw, samples);
  CHECK(h.state(2) == State::kDegraded);
  CHECK(journalCount("rail_degraded") == 2);
}

TEST_CASE("rail health: a stall is blamed on one rail only when the peer shows life elsewhere",
          "[net][health]") {
  telemetry::RailRegistry::instance().resetForTesting();
  RailHealth h;
  RailHealthConfig cfg;
  cfg.peerStallNs = 1000 * kMs;
  h.init(0x78, "send", rails(3), cfg, 0);
  for (int r = 0; r < 3; ++r) h.connected(r, 0);
  for (int r = 0; r < 3; ++r) {
    h.failure(r).reset(0);
    h.failure(r).setOutstanding(true, 10 * kMs);
  }
  // Every rail stalls together from t=10ms: the peer paused, nobody is blamed yet...
  CHECK_FALSE(h.stallBlamesRail(0, 300 * kMs));
  CHECK_FALSE(h.stallBlamesRail(1, 300 * kMs));
  // ... until the stall outlasts the peer allowance.
  CHECK(h.stallBlamesRail(0, 1011 * kMs));
  // Rail 2 shows the peer consuming data after rail 0 stalled: rail 0 is at fault...
  h.failure(2).onProgress(280 * kMs);
  CHECK(h.stallBlamesRail(0, 300 * kMs));
  CHECK(h.stallBlamesRail(1, 300 * kMs));
  // ... but only while that evidence is recent: a peer that answered and then paused does not
  // incriminate a rail (the default stall timeout is 100 ms: evidence within the last 50 ms).
  CHECK_FALSE(h.stallBlamesRail(0, 400 * kMs));
  // Evidence from before the stall began does not count.
  h.failure(1).onProgress(250 * kMs);
  h.failure(1).setOutstanding(false, 251 * kMs);
  h.failure(1).setOutstanding(true, 290 * kMs);  // a new stall starting at 290 ms
  CHECK_FALSE(h.stallBlamesRail(1, 300 * kMs));  // rail 2's evidence (280 ms) predates it
  // A hard error is always the rail's own.
  h.failure(1).onError();
  CHECK(h.stallBlamesRail(1, 300 * kMs));
}

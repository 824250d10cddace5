// The demo's recovery time: after a fault or repair, how long until a window of completions
// carries 90% of the new state's steady throughput; for a flapping rail, per change of state.
#include <catch2/catch.hpp>
#include <functional>

#include "bench/demo/report.h"
#include "bench/demo/wire.h"

using namespace autopilot::demo;

namespace {

constexpr double kWindowS = 0.25;

// Rank 0 completes a collective every 10 ms from `fromS` to `toS`, carrying
// rate(t) * 10 ms bytes each.
void completeEvery10ms(ModeRecord* rec, double fromS, double toS,
                       const std::function<double(double)>& rate) {
  static uint64_t iteration = 0;
  for (double t = fromS + 0.01; t < toS - 1e-9; t += 0.01) {
    wire::Iteration it{};
    it.h.rank = 0;
    it.iteration = iteration++;
    it.endNs = uint64_t(t * 1e9);
    it.durationNs = 10000000;
    it.busBytes = uint64_t(rate(t) * 0.01);
    it.tunerBytes = 1 << 20;
    rec->add(it, 0, 0, 1e9);
  }
}

}  // namespace

TEST_CASE("demo report: recovery per change of state when a rail flaps", "[demo][report]") {
  // A 7 s flapping phase from t = 10 s, state changing every 1.5 s (down first): 60 MB/s while
  // the rail is down, 90 while it is up, and after each change 0.2 s at a third of that, except
  // 0.6 s after the repair at 13 s.
  ModeRecord rec("closed-loop", {{"before", 0, 10}, {"flapping", 10, 17}}, 1);
  auto rate = [](double t) {
    const double since = t - 10;
    const int period = int(since / 1.5);
    const double into = since - period * 1.5;
    const double full = period % 2 == 0 ? 60e6 : 90e6;
    const double slow = period == 1 ? 0.6 : 0.2;
    return into < slow ? full / 3 : full;
  };
  completeEvery10ms(&rec, 10, 17, rate);
  // Against the phase's second half (75 MB/s on average), the rail-down periods never reach
  // 90%: the whole-phase measure waits for the first repair.
  const double whole = rec.settleSeconds("flapping", kWindowS, 0.9);
  CHECK(whole > 1.5);
  // Per change: the slowest, the repair at 13 s, took its 0.6 s and most of a window.
  const double perChange = rec.settleSecondsPerPeriod("flapping", 1.5, kWindowS, 0.9);
  CHECK(perChange >= 0.6);
  CHECK(perChange <= 0.6 + kWindowS + 0.01);

  // A change that never recovers within its period: no recovery time.
  ModeRecord stuck("closed-loop", {{"flapping", 0, 7}}, 1);
  completeEvery10ms(&stuck, 0, 7, [](double t) {
    return (t >= 4.5 && t < 6.0) ? 1e6 : (int(t / 1.5) % 2 == 0 ? 60e6 : 90e6);
  });
  CHECK(stuck.settleSecondsPerPeriod("flapping", 1.5, kWindowS, 0.9) < 0);
  // A phase too short to hold both states: none either.
  ModeRecord shortPhase("closed-loop", {{"flapping", 0, 1.5}}, 1);
  completeEvery10ms(&shortPhase, 0, 1.5, [](double) { return 60e6; });
  CHECK(shortPhase.settleSecondsPerPeriod("flapping", 1.5, kWindowS, 0.9) < 0);
}

// The demo's false-failover count: a heal brings the failed rail up host by host, and the
// ranks' Prometheus files are read up to a rewrite late, so a rank that rightly fails over the
// rail while it is still down is read in the healed phase.
TEST_CASE("demo report: a failover read while a repair settles is charged to the phase before",
          "[demo][report]") {
  constexpr int kFailed = 3, kHealed = 4;
  RailEventLedger ledger;
  RailEventLedger::Charge c = ledger.read(kFailed, 4, 0, 10.0);  // the fault's own failovers
  CHECK(c.failoverPhase == kFailed);
  CHECK(c.failovers == 4);
  // The heal is in place at 17.0 s; a failover and two recoveries are read 0.3 s later.
  ledger.holdFailoversFor(kFailed, 17.0 + 0.5);
  CHECK_FALSE(ledger.holdEnded(17.3));
  c = ledger.read(kHealed, 5, 2, 17.3);
  CHECK(c.failoverPhase == kFailed);
  CHECK(c.failovers == 1);
  CHECK(c.recoveries == 2);  // the repair's own: they belong to the phase in force
  // The first read at the hold's end still belongs to it, and closes it.
  CHECK(ledger.holdEnded(17.55));
  c = ledger.read(kHealed, 6, 3, 17.55);
  CHECK(c.failoverPhase == kFailed);
  CHECK(c.failovers == 1);
  CHECK(c.recoveries == 1);
  CHECK_FALSE(ledger.holdEnded(17.6));
  // Later, a failover with every rail up is the healed phase's: a false one.
  c = ledger.read(kHealed, 7, 3, 20.0);
  CHECK(c.failoverPhase == kHealed);
  CHECK(c.failovers == 1);
  CHECK(c.recoveries == 0);
}

TEST_CASE("demo report: rail counters are charged once, whatever the files say", "[demo][report]") {
  RailEventLedger ledger;
  CHECK(ledger.read(1, 3, 1, 1.0).failovers == 3);
  // A rank's file missing from one read: the total falls, then comes back.
  RailEventLedger::Charge c = ledger.read(1, 1, 0, 1.2);
  CHECK(c.failovers == 0);
  CHECK(c.recoveries == 0);
  c = ledger.read(1, 3, 1, 1.4);
  CHECK(c.failovers == 0);
  CHECK(c.recoveries == 0);
  // What is new after the dip is charged, once.
  c = ledger.read(2, 5, 2, 5.0);
  CHECK(c.failoverPhase == 2);
  CHECK(c.failovers == 2);
  CHECK(c.recoveries == 1);
}

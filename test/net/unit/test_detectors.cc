// Failure detector, degradation detector, failback scheduler: the time-based policies, driven
// with synthetic clocks.
#include <catch2/catch.hpp>

#include "net_plugin/core/degradation_detector.h"
#include "net_plugin/core/failback_scheduler.h"
#include "net_plugin/core/failure_detector.h"

using namespace autopilot::net::core;

constexpr uint64_t kMs = 1'000'000;

TEST_CASE("failure detector: an idle rail is never suspected", "[net][detector]") {
  FailureDetector d;
  d.reset(0);
  CHECK_FALSE(d.failed(100000 * kMs, 0, 1e9));
  d.setOutstanding(false, 50 * kMs);
  CHECK_FALSE(d.failed(100000 * kMs, 1 << 20, 1e9));
  CHECK(d.stalledForNs(100000 * kMs) == 0);
}

TEST_CASE("failure detector: holding data without progress fails after the timeout",
          "[net][detector]") {
  FailureDetector::Config cfg;
  cfg.stallTimeoutNs = 100 * kMs;
  cfg.drainFactor = 1.0;
  FailureDetector d(cfg);
  d.reset(0);
  // Idle for a long time, then data: the clock starts now, not at the last progress.
  d.setOutstanding(true, 10000 * kMs);
  CHECK_FALSE(d.failed(10050 * kMs, 0, 1e9));
  CHECK(d.stalledForNs(10050 * kMs) == 50 * kMs);
  CHECK(d.failed(10101 * kMs, 0, 1e9));
  // Progress resets the clock.
  d.onProgress(10101 * kMs);
  CHECK_FALSE(d.failed(10150 * kMs, 0, 1e9));
  CHECK(d.failed(10202 * kMs, 0, 1e9));
  // Staying outstanding does not restart the clock.
  d.setOutstanding(true, 10300 * kMs);
  CHECK(d.failed(10300 * kMs, 0, 1e9));
}

// A detector with a 100 ms stall timeout and a 2 s cap, holding data since t = 0.
FailureDetector holdingSinceZero() {
  FailureDetector::Config cfg;
  cfg.stallTimeoutNs = 100 * kMs;
  cfg.maxTimeoutNs = 2000 * kMs;
  FailureDetector d(cfg);
  d.reset(0);
  d.setOutstanding(true, 0);
  return d;
}

TEST_CASE("failure detector: a stall within one retransmission timeout is no failure",
          "[net][detector]") {
  FailureDetector d = holdingSinceZero();
  // No timer known: the stall timeout alone.
  CHECK(d.failed(150 * kMs, 0, 0));
  // TCP's RTO at 212 ms: a lost segment is resent then; its acknowledgement may take half the
  // stall timeout more.
  d.setRetransmitTimeout(212 * kMs);
  CHECK(d.timeoutNs(0, 0) == 262 * kMs);
  CHECK_FALSE(d.failed(210 * kMs, 0, 0));
  CHECK_FALSE(d.failed(260 * kMs, 0, 0));
  CHECK(d.failed(263 * kMs, 0, 0));
  // The larger of the two allowances counts: much data on a slow rail drains longer.
  CHECK(d.timeoutNs(4 << 20, 250e6 / 8) == 262 * kMs);
  CHECK(d.timeoutNs(8 << 20, 250e6 / 8) == Approx(368.4 * kMs).epsilon(0.01));
  // The timer counts up to 300 ms: a fresh connection's 1 s first timeout, or one backed off to
  // seconds, does not hold a dead link.
  d.setRetransmitTimeout(1000 * kMs);
  CHECK(d.timeoutNs(0, 0) == 350 * kMs);
  CHECK(d.failed(351 * kMs, 0, 0));
  d.setRetransmitTimeout(0);
  CHECK(d.timeoutNs(0, 0) == 100 * kMs);
}

TEST_CASE("failure detector: bytes still queued on this host extend the allowance to its cap",
          "[net][detector]") {
  FailureDetector d = holdingSinceZero();
  d.setRetransmitTimeout(208 * kMs);
  d.setLocallyQueued(true);
  CHECK(d.timeoutNs(0, 0) == 2000 * kMs);
  CHECK_FALSE(d.failed(1500 * kMs, 64 << 10, 3e6));
  CHECK(d.failed(2001 * kMs, 64 << 10, 3e6));
  // Once the bytes left, the path is on trial again.
  d.setLocallyQueued(false);
  CHECK(d.timeoutNs(0, 0) == 258 * kMs);
}

TEST_CASE("failure detector: the timeout scales with what the rail holds", "[net][detector]") {
  FailureDetector::Config cfg;
  cfg.stallTimeoutNs = 100 * kMs;
  cfg.drainFactor = 1.0;
  cfg.maxTimeoutNs = 2000 * kMs;
  FailureDetector d(cfg);
  // 4 MiB at 250 Mbit/s takes 134 ms to drain: allowance 234 ms.
  double slow = 250e6 / 8;
  CHECK(d.timeoutNs(4 << 20, slow) == Approx(100 * kMs + 134.2 * kMs).epsilon(0.01));
  // Same data on a fast rail: barely more than the base.
  CHECK(d.timeoutNs(4 << 20, 7e9 / 8) < 106 * kMs);
  // Capped; and an unknown bandwidth gives the base.
  CHECK(d.timeoutNs(uint64_t(1) << 40, slow) == 2000 * kMs);
  CHECK(d.timeoutNs(1 << 20, 0) == 100 * kMs);
  d.reset(0);
  d.setOutstanding(true, 0);
  CHECK_FALSE(d.failed(200 * kMs, 4 << 20, slow));
  CHECK(d.failed(240 * kMs, 4 << 20, slow));
}

TEST_CASE("failure detector: a rate-limited rail that keeps acknowledging never fails",
          "[net][detector]") {
  FailureDetector d;
  d.reset(0);
  d.setOutstanding(true, 0);
  // 512 KiB chunks at 250 Mbit/s: one acknowledgement every ~17 ms, forever.
  for (uint64_t t = 0; t < 60000 * kMs; t += 17 * kMs) {
    REQUIRE_FALSE(d.failed(t, 4 << 20, 250e6 / 8));
    d.onProgress(t);
  }
}

TEST_CASE("failure detector: errors are immediate and sticky until reset", "[net][detector]") {
  FailureDetector d;
  d.reset(0);
  d.onError();
  CHECK(d.failed(0, 0, 1e9));
  CHECK(d.hasError());
  d.onProgress(5);
  CHECK(d.failed(5, 0, 1e9));
  d.reset(10);
  CHECK_FALSE(d.failed(10, 0, 1e9));
}

TEST_CASE("degradation: needs a persistent gap, with hysteresis", "[net][detector]") {
  DegradationDetector::Config cfg;
  cfg.degradeBelow = 0.5;
  cfg.recoverAbove = 0.7;
  cfg.holdNs = 300 * kMs;
  cfg.minSamples = 2;
  DegradationDetector d(cfg);
  uint64_t t = 0;
  uint64_t n = 0;  // the rail is measured between every two updates
  // Briefly slow: no verdict.
  CHECK_FALSE(d.update(0.2, 1.0, t, ++n));
  CHECK_FALSE(d.update(0.2, 1.0, t += 200 * kMs, ++n));
  CHECK_FALSE(d.update(0.9, 1.0, t += 10 * kMs, ++n));
  CHECK_FALSE(d.update(0.2, 1.0, t += 10 * kMs, ++n));
  CHECK_FALSE(d.update(0.2, 1.0, t += 299 * kMs, ++n));
  CHECK_FALSE(d.degraded());
  CHECK(d.update(0.2, 1.0, t += 2 * kMs, ++n));
  CHECK(d.degraded());
  // Between the thresholds: stays degraded however long.
  for (int i = 0; i < 100; ++i) CHECK_FALSE(d.update(0.6, 1.0, t += 100 * kMs, ++n));
  CHECK(d.degraded());
  // Above recoverAbove long enough: healthy.
  CHECK_FALSE(d.update(0.8, 1.0, t += 1, ++n));
  CHECK_FALSE(d.update(0.8, 1.0, t += 150 * kMs, ++n));
  CHECK(d.update(0.8, 1.0, t += 150 * kMs, ++n));
  CHECK_FALSE(d.degraded());
}

TEST_CASE("degradation: a low estimate left by a quiet connection is not a verdict",
          "[net][detector]") {
  // The defaults: below 0.5, above 0.7, for 300 ms and three measurements.
  DegradationDetector d;
  uint64_t t = 0;
  CHECK_FALSE(d.update(0.9, 1.0, t, 39));
  // One low sample (a receiver that paused) crosses, then the connection carries nothing: its
  // estimate stays where that sample left it, for far longer than the hold.
  CHECK_FALSE(d.update(0.25, 1.0, t += 20 * kMs, 40));
  for (int i = 0; i < 20; ++i) CHECK_FALSE(d.update(0.25, 1.0, t += 100 * kMs, 40));
  CHECK_FALSE(d.degraded());
  // Used again: the crossing's own sample and one more are not yet enough, whatever the time ...
  CHECK_FALSE(d.update(0.3, 1.0, t += 10 * kMs, 41));
  CHECK_FALSE(d.degraded());
  // ... and the next, still low, is: the third measurement since the crossing confirms it.
  CHECK(d.update(0.3, 1.0, t += 10 * kMs, 42));
  CHECK(d.degraded());
  // Recovery needs the same evidence: a quiet spell after one fast sample is not enough.
  CHECK_FALSE(d.update(0.9, 1.0, t += 1, 43));
  CHECK_FALSE(d.update(0.9, 1.0, t += 1000 * kMs, 43));
  CHECK(d.degraded());
  CHECK_FALSE(d.update(0.9, 1.0, t += 1, 44));
  CHECK(d.update(0.9, 1.0, t += 1, 45));
  CHECK_FALSE(d.degraded());
  // A rail that really slowed: the samples that made it cross count, so the verdict comes
  // after the hold although few come later (its share shrinks at once).
  CHECK_FALSE(d.update(0.9, 1.0, t += 1, 45));
  CHECK_FALSE(d.update(0.1, 1.0, t += 20 * kMs, 47));
  CHECK_FALSE(d.update(0.1, 1.0, t += 150 * kMs, 47));
  CHECK(d.update(0.1, 1.0, t += 150 * kMs, 48));
  CHECK(d.degraded());
  // An estimate set afresh (a re-joined rail: its count starts again) restarts a pending change
  // rather than passing it on a count from before.
  d.reset();
  CHECK_FALSE(d.update(0.9, 1.0, t += 1, 49));
  CHECK_FALSE(d.update(0.2, 1.0, t += 1, 50));
  CHECK_FALSE(d.update(0.2, 1.0, t += 400 * kMs, 0));
  CHECK_FALSE(d.update(0.2, 1.0, t += 400 * kMs, 1));
  CHECK_FALSE(d.update(0.2, 1.0, t += 1, 2));
  CHECK(d.update(0.2, 1.0, t += 1, 3));
}

TEST_CASE("degradation: a ratio oscillating around one threshold does not flap",
          "[net][detector]") {
  DegradationDetector d;
  uint64_t t = 0;
  int changes = 0;
  for (int i = 0; i < 10000; ++i) {
    double ratio = i % 2 ? 0.45 : 0.55;  // crosses degradeBelow every sample
    changes += d.update(ratio, 1.0, t += 50 * kMs, uint64_t(i));
  }
  CHECK(changes == 0);
}

TEST_CASE("degradation: no peers, no verdict", "[net][detector]") {
  DegradationDetector::Config cfg;
  cfg.holdNs = 0;
  cfg.minSamples = 0;
  DegradationDetector d(cfg);
  CHECK(d.update(0.1, 1.0, 1, 1));
  CHECK(d.degraded());
  CHECK(d.update(0.1, 0.0, 2, 2));  // peers gone: cleared
  CHECK_FALSE(d.degraded());
  CHECK_FALSE(d.update(0.1, 0.0, 3, 3));
}

TEST_CASE("failback: exponential backoff, capped, never gives up", "[net][failback]") {
  FailbackScheduler::Config cfg;
  cfg.initialBackoffNs = 50 * kMs;
  cfg.maxBackoffNs = 2000 * kMs;
  FailbackScheduler f(cfg);
  f.onFailed(0);
  CHECK_FALSE(f.due(49 * kMs));
  CHECK(f.due(50 * kMs));
  uint64_t t = 50 * kMs;
  uint64_t expect[] = {100, 200, 400, 800, 1600, 2000, 2000, 2000};
  for (uint64_t e : expect) {
    f.onAttemptStarted();
    CHECK_FALSE(f.due(t + 100000 * kMs));  // not due while an attempt is running
    f.onAttemptFailed(t);
    CHECK(f.backoffNs() == e * kMs);
    CHECK_FALSE(f.due(t + e * kMs - 1));
    CHECK(f.due(t + e * kMs));
    t += e * kMs;
  }
  for (int i = 0; i < 100000; ++i) {
    f.onAttemptStarted();
    f.onAttemptFailed(t);
    t += 2000 * kMs;
  }
  CHECK(f.due(t));
  CHECK(f.attempts() == 100008);
}

TEST_CASE("failback: a flapping rail is retried less and less; a stable one starts over",
          "[net][failback]") {
  FailbackScheduler::Config cfg;
  cfg.initialBackoffNs = 50 * kMs;
  cfg.maxBackoffNs = 1600 * kMs;
  cfg.stableNs = 10000 * kMs;
  FailbackScheduler f(cfg);
  uint64_t t = 0;
  f.onFailed(t);
  CHECK(f.backoffNs() == 50 * kMs);
  uint64_t prev = 0;
  for (int i = 0; i < 8; ++i) {
    t = f.nextAttemptNs();
    f.onAttemptStarted();
    f.onRejoined(t);
    f.onFailed(t += 100 * kMs);  // failed again soon after re-joining
    CHECK(f.backoffNs() >= prev);
    prev = f.backoffNs();
  }
  CHECK(f.backoffNs() == 1600 * kMs);
  t = f.nextAttemptNs();
  f.onRejoined(t);
  f.onFailed(t + 20000 * kMs);  // stayed up long enough
  CHECK(f.backoffNs() == 50 * kMs);
}

TEST_CASE("failback: expedite brings a far attempt forward", "[net][failback]") {
  FailbackScheduler::Config cfg;
  cfg.initialBackoffNs = 50 * kMs;
  cfg.maxBackoffNs = 2000 * kMs;
  FailbackScheduler f(cfg);
  f.onFailed(0);
  for (int i = 0; i < 6; ++i) f.onAttemptFailed(0);
  CHECK(f.nextAttemptNs() == 2000 * kMs);
  f.expedite(10 * kMs);
  CHECK(f.nextAttemptNs() == 60 * kMs);
  f.onAttemptStarted();
  f.expedite(10 * kMs);  // no attempt pending: nothing to bring forward
  CHECK_FALSE(f.due(100000 * kMs));
}

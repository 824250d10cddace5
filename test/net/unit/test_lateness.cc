// The process's own lateness (core/lateness_meter.h) and what it does to the failure detector's
// allowance: a loaded host must not take its own starvation for a dead rail, an idle one must
// declare a dead rail as fast as before.
#include <catch2/catch.hpp>

#include "common/clock.h"
#include "net_plugin/core/failure_detector.h"
#include "net_plugin/core/lateness_meter.h"
#include "net_plugin/core/rail_health.h"

using namespace autopilot::net::core;
using autopilot::monotonicNs;

namespace {
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kStart = 10'000 * kMs;  // a monotonic clock well past zero
}  // namespace

TEST_CASE("lateness: the longest recent gap, halving every 2 s", "[net][lateness]") {
  LatenessMeter m;
  CHECK(m.recentNs(kStart) == 0);
  m.onGap(20 * kMs, kStart);
  CHECK(m.recentNs(kStart) == 20 * kMs);
  m.onGap(5 * kMs, kStart + 10 * kMs);  // shorter: the longest stays
  CHECK(m.recentNs(kStart + 10 * kMs) == 20 * kMs);
  CHECK(m.recentNs(kStart + 2000 * kMs) == 10 * kMs);
  CHECK(m.recentNs(kStart + 4000 * kMs) == 5 * kMs);
  CHECK(m.recentNs(kStart + 100'000 * kMs) == 0);  // a load gone for long counts nothing
  m.onGap(30 * kMs, kStart + 4000 * kMs);
  CHECK(m.recentNs(kStart + 4000 * kMs) == 30 * kMs);
  // A reading older than the newest gap (another thread's clock): no decay, no wrap.
  CHECK(m.recentNs(kStart + 3999 * kMs) == 30 * kMs);
}

TEST_CASE("lateness: only gaps between passes while work was outstanding count",
          "[net][lateness]") {
  LatenessMeter m;
  PassClock c;
  { PassClock::Scope s(c); }  // a pass that ended at the real clock's now
  uint64_t t = monotonicNs();
  c.begin(t, false, m);
  { PassClock::Scope s(c); }
  t = monotonicNs();
  c.begin(t + 500 * kMs, true, m);  // idle before: NCCL had no reason to call
  CHECK(m.recentNs(t + 500 * kMs) == 0);
  { PassClock::Scope s(c); }
  t = monotonicNs();
  uint64_t late = c.begin(t + 40 * kMs, true, m);  // busy since: 40 ms without a pass
  CHECK(late >= 40 * kMs);
  CHECK(late < 41 * kMs);
  // Busy at the start of a pass, but its last request went back to NCCL after it: the wait
  // for NCCL's next call is not lateness.
  { PassClock::Scope s(c); }
  c.idle();
  t = monotonicNs();
  c.begin(t + 900 * kMs, true, m);
  CHECK(m.recentNs(t + 900 * kMs) < 41 * kMs);
}

TEST_CASE("failure detector: the allowance grows with the process's lateness, up to the cap",
          "[net][lateness][detector]") {
  FailureDetector::Config cfg;
  cfg.stallTimeoutNs = 100 * kMs;
  cfg.latenessFactor = 4.0;
  cfg.latenessFloorNs = 1 * kMs;
  cfg.latenessCapNs = 1000 * kMs;
  FailureDetector d(cfg);
  d.reset(0);
  d.setOutstanding(true, kStart);
  // Idle host: gaps under the floor change nothing; a dead rail fails as before.
  d.setLateness(kMs / 2);
  CHECK(d.timeoutNs(0, 0) == 100 * kMs);
  CHECK(d.failed(kStart + 101 * kMs, 0, 0));
  // Loaded host, passes 21 ms apart: 4 x 20 ms more.
  d.setLateness(21 * kMs);
  CHECK(d.stretchNs() == 80 * kMs);
  CHECK(d.timeoutNs(0, 0) == 180 * kMs);
  CHECK_FALSE(d.failed(kStart + 150 * kMs, 0, 0));
  CHECK(d.failed(kStart + 181 * kMs, 0, 0));
  // A process starved for seconds: the stretch stops at the cap.
  d.setLateness(5000 * kMs);
  CHECK(d.stretchNs() == 1000 * kMs);
  CHECK(d.failed(kStart + 1101 * kMs, 0, 0));
  // Cap 0: no stretch at all.
  cfg.latenessCapNs = 0;
  FailureDetector off(cfg);
  off.setLateness(5000 * kMs);
  CHECK(off.timeoutNs(0, 0) == 100 * kMs);
}

TEST_CASE("rail health: the peer-stall bound grows with the lateness as well",
          "[net][lateness][health]") {
  RailHealthConfig cfg;
  cfg.failure.stallTimeoutNs = 100 * kMs;
  cfg.peerStallNs = 1000 * kMs;
  RailHealth h;
  h.init(1, "send", {{-1, "a", false}, {-1, "b", false}}, cfg, 0);
  h.connected(0, 0);
  h.connected(1, 0);
  h.failure(0).setOutstanding(true, kStart);
  h.failure(1).setOutstanding(true, kStart);
  // Both rails stall, nothing shows the peer alive: only the peer-stall bound blames a rail.
  CHECK_FALSE(h.stallBlamesRail(0, kStart + 999 * kMs));
  CHECK(h.stallBlamesRail(0, kStart + 1000 * kMs));
  h.setLateness(51 * kMs);  // 200 ms more
  CHECK_FALSE(h.stallBlamesRail(0, kStart + 1100 * kMs));
  CHECK(h.stallBlamesRail(0, kStart + 1200 * kMs));
}

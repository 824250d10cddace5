// The striper: earliest predicted completion with measured bandwidth, windows, probes,
// standby rails, equal split. Includes a small discrete-event simulation of rails with
// different speeds.
#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "net_plugin/core/rail_striper.h"

using namespace autopilot::net::core;

namespace {

struct SimResult {
  double seconds = 0;
  std::vector<double> share;  // fraction of bytes per rail
  std::vector<double> estimate;
};

// Rails serve their queue FIFO at `rates[i]` bytes/s (0 = dead: never completes). Sends
// `total` bytes in `chunk`-byte chunks, as a transport would: place while pick() allows, then
// advance to the next completion.
SimResult simulate(RailStriper& s, const std::vector<double>& rates, uint64_t total, uint64_t chunk,
                   uint64_t startNs = 1'000'000'000) {
  int n = int(rates.size());
  struct Item {
    uint64_t bytes, doneNs;
  };
  std::vector<std::vector<Item>> queues(n);
  std::vector<uint64_t> freeAt(n, startNs), bytes(n, 0);
  uint64_t now = startNs, placed = 0, completed = 0;
  while (completed < total) {
    while (placed < total) {
      uint64_t c = std::min(chunk, total - placed);
      int r = s.pick(c, now);
      if (r < 0) break;
      s.onAssigned(r, c, now);
      uint64_t start = std::max(freeAt[r], now);
      uint64_t done = rates[r] > 0 ? start + uint64_t(double(c) * 1e9 / rates[r]) : UINT64_MAX;
      freeAt[r] = done;
      queues[r].push_back({c, done});
      placed += c;
      bytes[r] += c;
    }
    int next = -1;
    for (int r = 0; r < n; ++r) {
      if (!queues[r].empty() &&
          (next < 0 || queues[r].front().doneNs < queues[next].front().doneNs))
        next = r;
    }
    REQUIRE(next >= 0);
    REQUIRE(queues[next].front().doneNs != UINT64_MAX);
    now = queues[next].front().doneNs;
    s.onCompleted(next, queues[next].front().bytes, now);
    completed += queues[next].front().bytes;
    queues[next].erase(queues[next].begin());
  }
  SimResult res;
  res.seconds = double(now - startNs) / 1e9;
  for (int r = 0; r < n; ++r) {
    res.share.push_back(double(bytes[r]) / double(total));
    res.estimate.push_back(s.bandwidth(r));
  }
  return res;
}

// Gives `rail` a measured estimate of `bw` (one pipelined sample replacing the guess).
void measureAt(RailStriper& s, int rail, double bw, uint64_t* t) {
  s.setBandwidth(rail, bw);
  s.onAssigned(rail, 1 << 20, *t);
  s.onAssigned(rail, 1 << 20, *t);
  s.onCompleted(rail, 1 << 20, *t += uint64_t(double(1 << 20) * 1e9 / bw));
  s.onCompleted(rail, 1 << 20, *t += uint64_t(double(1 << 20) * 1e9 / bw));
}

RailStriper activeStriper(int n, RailStriper::Config cfg = {}) {
  RailStriper s(cfg);
  s.reset(n);
  for (int i = 0; i < n; ++i) s.setMode(i, RailMode::kActive);
  return s;
}

}  // namespace

TEST_CASE("striper: equal rails share equally and reach the sum of their rates", "[net][striper]") {
  RailStriper s = activeStriper(4);
  std::vector<double> rates(4, 125e6);  // 1 Gbit/s each
  SimResult r = simulate(s, rates, uint64_t(1) << 30, 256 << 10);
  double gbps = double(uint64_t(1) << 30) * 8 / r.seconds / 1e9;
  CHECK(gbps > 0.95 * 4);
  for (double sh : r.share) CHECK(sh == Approx(0.25).margin(0.03));
  for (double e : r.estimate) CHECK(e == Approx(125e6).epsilon(0.1));
}

TEST_CASE("striper: a slow rail gets a share proportional to its measured bandwidth",
          "[net][striper]") {
  RailStriper s = activeStriper(4);
  std::vector<double> rates = {125e6, 125e6, 125e6, 31.25e6};  // one rail at 250 Mbit/s
  SimResult r = simulate(s, rates, uint64_t(1) << 30, 256 << 10);
  double gbps = double(uint64_t(1) << 30) * 8 / r.seconds / 1e9;
  INFO("achieved " << gbps << " Gbit/s of 3.25");
  CHECK(gbps > 0.9 * 3.25);
  CHECK(r.share[3] == Approx(31.25 / 406.25).margin(0.03));
  CHECK(r.estimate[3] == Approx(31.25e6).epsilon(0.15));

  // The same rails under an equal split finish no faster than 4x the slow rail.
  RailStriper::Config eq;
  eq.policy = StripingPolicy::kEqualSplit;
  RailStriper e = activeStriper(4, eq);
  SimResult re = simulate(e, rates, uint64_t(256) << 20, 256 << 10);
  double eqGbps = double(uint64_t(256) << 20) * 8 / re.seconds / 1e9;
  INFO("equal split " << eqGbps << " Gbit/s");
  CHECK(eqGbps < 4 * 0.25 * 1.05);
  for (double sh : re.share) CHECK(sh == Approx(0.25).margin(0.01));
  CHECK(gbps > 2.5 * eqGbps);
}

TEST_CASE("striper: the share follows a rate change (degrade, then heal)", "[net][striper]") {
  RailStriper s = activeStriper(2);
  std::vector<double> fast = {125e6, 125e6};
  simulate(s, fast, 256 << 20, 256 << 10);
  std::vector<double> degraded = {125e6, 12.5e6};
  SimResult r = simulate(s, degraded, 512 << 20, 256 << 10, 10'000'000'000ull);
  CHECK(r.estimate[1] < 20e6);
  CHECK(r.share[1] < 0.15);
  // Healed: probes keep measuring the slow rail, so its share grows back.
  SimResult h = simulate(s, fast, 512 << 20, 256 << 10, 100'000'000'000ull);
  CHECK(h.estimate[1] > 80e6);
  CHECK(h.share[1] > 0.35);
}

TEST_CASE("striper: windows bound what a rail holds; an empty rail takes any chunk",
          "[net][striper]") {
  RailStriper::Config cfg;
  cfg.windowBytes = 1 << 20;
  cfg.probeEvery = 0;
  RailStriper s = activeStriper(1, cfg);
  CHECK(s.pick(4 << 20, 0) == 0);  // larger than the window, but the rail is empty
  s.onAssigned(0, 4 << 20, 0);
  CHECK(s.pick(1, 0) == -1);
  s.onCompleted(0, 4 << 20, 1000);
  for (int i = 0; i < 4; ++i) {
    REQUIRE(s.pick(256 << 10, 0) == 0);
    s.onAssigned(0, 256 << 10, 0);
  }
  CHECK(s.inFlight(0) == (1 << 20));
  CHECK(s.pick(1, 0) == -1);
  CHECK(s.pick(1, 0, 0) == -1);
}

TEST_CASE("striper: when the best rail is full, it waits rather than use a slower one",
          "[net][striper]") {
  RailStriper::Config cfg;
  cfg.windowBytes = 1 << 20;
  cfg.probeEvery = 0;
  RailStriper s = activeStriper(2, cfg);
  s.setBandwidth(0, 1e9);
  s.setBandwidth(1, 1e6);
  s.onAssigned(0, 1 << 20, 0);
  // Rail 0 is full; rail 1 would take 0.26 s for 256 KiB, rail 0 ~1.3 ms once it drains.
  CHECK(s.pick(256 << 10, 0) == -1);
  // Excluding rail 0 (queue full) does not divert either.
  CHECK(s.pick(256 << 10, 0, 1u << 0) == -1);
}

TEST_CASE("striper: down rails are never used; standby only when no active rail is",
          "[net][striper]") {
  RailStriper s(RailStriper::Config{});
  s.reset(3);
  CHECK(s.pick(100, 0) == -1);  // everything down
  s.setMode(0, RailMode::kStandby);
  CHECK(s.pick(100, 0) == 0);
  s.setMode(1, RailMode::kActive);
  s.setMode(2, RailMode::kActive);
  for (int i = 0; i < 200; ++i) {
    int r = s.pick(64 << 10, uint64_t(i) * 1'000'000'000ull);
    CHECK(r != 0);
    REQUIRE(r >= 0);
    s.onAssigned(r, 64 << 10, uint64_t(i) * 1'000'000'000ull);
    s.onCompleted(r, 64 << 10, uint64_t(i) * 1'000'000'000ull + 1000);
  }
  s.setMode(1, RailMode::kDown);
  s.setMode(2, RailMode::kDown);
  CHECK(s.pick(100, 0) == 0);
}

TEST_CASE("striper: idle rails are probed now and then", "[net][striper]") {
  RailStriper::Config cfg;
  cfg.probeEvery = 8;
  cfg.probeIdleNs = 1'000'000;
  cfg.probeSpacing = 0;  // the cadence alone (the spacing: next test)
  RailStriper s = activeStriper(2, cfg);
  s.setBandwidth(0, 1e10);
  s.setBandwidth(1, 1e6);  // looks 10000x slower: never the earliest completion
  int probes = 0;
  uint64_t now = 0;
  for (int i = 0; i < 800; ++i) {
    now += 10'000'000;
    int r = s.pick(64 << 10, now);
    REQUIRE(r >= 0);
    if (r == 1) ++probes;
    s.onAssigned(r, 64 << 10, now);
    s.onCompleted(r, 64 << 10, now + 1000);
  }
  CHECK(probes >= 80);
  CHECK(probes <= 110);
}

TEST_CASE("striper: a much slower rail is probed at most once per ten probe times",
          "[net][striper]") {
  RailStriper::Config cfg;
  cfg.probeEvery = 8;
  cfg.probeIdleNs = 1'000'000;
  cfg.bandHoldNs = 0;  // the slow rail's own estimate counts at once (the band: tests above)
  RailStriper s = activeStriper(2, cfg);
  s.setBandwidth(0, 1e10);
  // A set estimate is a guess: the first probe comes at the plain cadence (8 picks, 80 ms) and
  // its measurement (1 MB/s: a 64 KiB probe holds its message 65.5 ms there) replaces it.
  s.setBandwidth(1, 5e8);
  uint64_t now = 0;
  int picks = 0;
  for (; picks < 8; ++picks) {
    now += 10'000'000;
    int r = s.pick(64 << 10, now);
    REQUIRE(r >= 0);
    s.onAssigned(r, 64 << 10, now);
    if (r == 1) {
      s.onCompleted(r, 64 << 10, now + 65'536'000);
      break;
    }
    s.onCompleted(r, 64 << 10, now + 1000);
  }
  REQUIRE(picks < 8);
  REQUIRE(s.samples(1) == 1);
  CHECK(s.bandwidth(1) == Approx(1e6).epsilon(0.01));
  int probes = 0;
  uint64_t lastProbe = now;
  now += 65'536'000;
  for (int i = 0; i < 800; ++i) {
    now += 10'000'000;  // 8 s in all
    int r = s.pick(64 << 10, now);
    REQUIRE(r >= 0);
    if (r == 1) {
      CHECK(now - lastProbe >= 655'000'000);
      ++probes;
      lastProbe = now;
    }
    s.onAssigned(r, 64 << 10, now);
    s.onCompleted(r, 64 << 10, now + 1000);
  }
  // Every 0.66-0.74 s (the spacing, then the next probe turn): 11 or 12, not the cadence's 100.
  CHECK(probes >= 10);
  CHECK(probes <= 13);
}

TEST_CASE("striper: small chunks do not move the estimate; estimates are clamped",
          "[net][striper]") {
  RailStriper::Config cfg;
  cfg.minBandwidth = 1e6;
  cfg.maxBandwidth = 1e10;
  RailStriper s = activeStriper(1, cfg);
  s.setBandwidth(0, 5e8);
  for (int i = 0; i < 100; ++i) {
    s.onAssigned(0, 8, uint64_t(i) * 1'000'000);
    s.onCompleted(0, 8, uint64_t(i) * 1'000'000 + 900'000);  // would be 9 KB/s
  }
  CHECK(s.bandwidth(0) == Approx(5e8));
  CHECK(s.samples(0) == 0);
  s.setBandwidth(0, 1e20);
  CHECK(s.bandwidth(0) == 1e10);
  s.setBandwidth(0, -5);
  CHECK(s.bandwidth(0) == 1e6);
  // A very slow measurement is clamped to the minimum.
  s.setBandwidth(0, 1e9);
  for (int i = 0; i < 50; ++i) {
    uint64_t t = uint64_t(i) * 10'000'000'000ull;
    s.onAssigned(0, 1 << 20, t);
    s.onCompleted(0, 1 << 20, t + 9'000'000'000ull);
  }
  CHECK(s.bandwidth(0) == Approx(1e6).epsilon(0.2));
}

TEST_CASE("striper: a lost rail forgets its in-flight bytes", "[net][striper]") {
  RailStriper s = activeStriper(2);
  s.onAssigned(1, 1 << 20, 0);
  CHECK(s.inFlight(1) == (1 << 20));
  s.onRailLost(1);
  CHECK(s.inFlight(1) == 0);
  s.onCompleted(1, 1 << 20, 10);  // a late report must not underflow
  CHECK(s.inFlight(1) == 0);
  CHECK(s.pick(100, 0, 0) >= 0);
  // Out-of-range rails are ignored.
  s.onAssigned(7, 1, 0);
  s.setMode(-1, RailMode::kActive);
}

TEST_CASE("striper: a latency-bound sample raises the estimate but never lowers it",
          "[net][striper]") {
  RailStriper::Config cfg;
  cfg.sampleMinNs = 1'000'000;
  RailStriper s = activeStriper(1, cfg);
  s.setBandwidth(0, 1e9);
  uint64_t t = 0;
  // First measurement after setBandwidth replaces the guess, whatever it is.
  s.onAssigned(0, 1 << 20, t);
  s.onCompleted(0, 1 << 20, t += 2'000'000);  // ~524 MB/s
  REQUIRE(s.samples(0) == 1);
  double first = s.bandwidth(0);
  CHECK(first == Approx(524e6).epsilon(0.01));
  // One chunk at a time, slower: ignored.
  for (int i = 0; i < 20; ++i) {
    s.onAssigned(0, 1 << 20, t);
    s.onCompleted(0, 1 << 20, t += 10'000'000);  // ~105 MB/s
  }
  CHECK(s.bandwidth(0) == Approx(first));
  // Two chunks at a time, just as slow: the rail really is slower.
  for (int i = 0; i < 20; ++i) {
    s.onAssigned(0, 1 << 20, t);
    s.onAssigned(0, 1 << 20, t);
    s.onCompleted(0, 1 << 20, t += 10'000'000);
    s.onCompleted(0, 1 << 20, t += 10'000'000);
  }
  CHECK(s.bandwidth(0) < 0.3 * first);
  // One chunk at a time, faster: raises.
  double low = s.bandwidth(0);
  for (int i = 0; i < 5; ++i) {
    s.onAssigned(0, 1 << 20, t);
    s.onCompleted(0, 1 << 20, t += 1'000'000);
  }
  CHECK(s.bandwidth(0) > 2 * low);
}

TEST_CASE("striper: noisy estimates of equal rails still split equally; a truly slow rail does not",
          "[net][striper]") {
  RailStriper s = activeStriper(3);
  // Estimates as a loaded host measures three equal 250 Mbit/s rails.
  uint64_t t = 0;
  measureAt(s, 0, 36e6, &t);
  measureAt(s, 1, 27e6, &t);
  measureAt(s, 2, 31e6, &t);
  CHECK(s.effectiveBandwidth(0) == Approx(31e6).epsilon(0.01));
  CHECK(s.effectiveBandwidth(1) == Approx(31e6).epsilon(0.01));
  uint64_t assigned[3] = {};
  for (int round = 0; round < 10; ++round) {
    // Thirty 64 KiB chunks in flight together, then all acknowledged at once (no time passes,
    // so the estimates themselves do not move).
    int picked[30];
    for (int k = 0; k < 30; ++k) {
      picked[k] = s.pick(64 << 10, 1'000'000'000);
      REQUIRE(picked[k] >= 0);
      s.onAssigned(picked[k], 64 << 10, 1'000'000'000);
      ++assigned[picked[k]];
    }
    for (int k = 0; k < 30; ++k) s.onCompleted(picked[k], 64 << 10, 1'000'000'000);
  }
  for (uint64_t a : assigned) CHECK(a == Approx(100).margin(3));
  // A degraded rail (a tenth of the others) leaves the band: once it has stayed outside for the
  // hold, it keeps its own estimate.
  t = 2'000'000'000;
  measureAt(s, 1, 3e6, &t);
  s.pick(64 << 10, t);
  CHECK(s.effectiveBandwidth(1) == Approx(31e6).epsilon(0.01));
  s.pick(64 << 10, t + s.config().bandHoldNs);
  CHECK(s.effectiveBandwidth(1) == Approx(3e6).epsilon(0.01));
  CHECK(s.effectiveBandwidth(0) == Approx(31e6).epsilon(0.2));
}

TEST_CASE("striper: equal rails take turns when chunks start on idle rails", "[net][striper]") {
  // Latency-bound traffic: each message is one or two chunks sent while every rail is idle.
  // Breaking ties toward the lowest index would leave the last rail unused.
  RailStriper s = activeStriper(3);
  for (int i = 0; i < 3; ++i) s.setBandwidth(i, 31e6);
  uint64_t assigned[3] = {};
  for (int msg = 0; msg < 300; ++msg) {
    int a = s.pick(64 << 10, 1'000'000'000);
    s.onAssigned(a, 64 << 10, 1'000'000'000);
    int b = s.pick(64 << 10, 1'000'000'000);
    s.onAssigned(b, 64 << 10, 1'000'000'000);
    ++assigned[a];
    ++assigned[b];
    s.onCompleted(a, 64 << 10, 1'000'000'000);
    s.onCompleted(b, 64 << 10, 1'000'000'000);
  }
  for (uint64_t n : assigned) CHECK(n == Approx(200).margin(2));
}

TEST_CASE("striper: latency-bound bursts lift a rail to its peers' level, not above",
          "[net][striper]") {
  RailStriper::Config cfg;
  cfg.sampleMinNs = 1'000'000;
  RailStriper s = activeStriper(2, cfg);
  uint64_t t = 0;
  // Rail 1 measured pipelined at ~105 MB/s.
  for (int i = 0; i < 10; ++i) {
    s.onAssigned(1, 1 << 20, t);
    s.onAssigned(1, 1 << 20, t);
    s.onCompleted(1, 1 << 20, t += 10'000'000);
    s.onCompleted(1, 1 << 20, t += 10'000'000);
  }
  double peer = s.bandwidth(1);
  REQUIRE(peer == Approx(105e6).epsilon(0.05));
  // Rail 0 starts low (a small share), then sees one chunk at a time at burst speed (~524 MB/s,
  // a shaper's bucket): it rises to rail 1's level and stops there.
  s.setBandwidth(0, 20e6);
  s.onAssigned(0, 1 << 20, t);
  s.onCompleted(0, 1 << 20, t += 2'000'000);
  CHECK(s.bandwidth(0) == Approx(peer));
  for (int i = 0; i < 10; ++i) {
    s.onAssigned(0, 1 << 20, t);
    s.onCompleted(0, 1 << 20, t += 2'000'000);
  }
  CHECK(s.bandwidth(0) == Approx(peer));
  CHECK(s.effectiveBandwidth(0) == Approx(s.effectiveBandwidth(1)));
  // Pipelined, it may show it really is faster.
  for (int i = 0; i < 10; ++i) {
    s.onAssigned(0, 1 << 20, t);
    s.onAssigned(0, 1 << 20, t);
    s.onCompleted(0, 1 << 20, t += 2'000'000);
    s.onCompleted(0, 1 << 20, t += 2'000'000);
  }
  CHECK(s.bandwidth(0) > 3 * peer);
}

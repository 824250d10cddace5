// The change-point detector: noise never fires, a real step fires within a bounded number of
// values, and the detector recovers (re-learns, then reports the return). Seeded generators:
// every run sees the same streams.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "common/shift_detector.h"
#include "profiler_plugin/collective_stats.h"

using autopilot::Shift;
using autopilot::ShiftDetector;
using autopilot::ShiftDetectorConfig;
using autopilot::profiler::ArmShift;
using autopilot::profiler::CollectiveStats;

namespace {

// Log-normal noise around `level` with relative spread `sigma`, plus rare outliers.
struct Noise {
  std::mt19937_64 rng;
  double sigma;
  double outlierRate;
  double outlierFactor;
  double next(double level) {
    std::normal_distribution<double> n(0.0, sigma);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    double v = level * std::exp(n(rng));
    if (u(rng) < outlierRate) v *= outlierFactor;
    return v;
  }
};

// Feeds `n` values; returns the index (0-based) of the first fire, or -1.
int firstFire(ShiftDetector& d, Noise& noise, double level, int n, Shift* shift = nullptr) {
  for (int i = 0; i < n; ++i) {
    Shift s = d.update(noise.next(level));
    if (s.fired) {
      if (shift) *shift = s;
      return i;
    }
  }
  return -1;
}

}  // namespace

TEST_CASE("noise alone never fires", "[detector]") {
  struct Case {
    double sigma, outlierRate, outlierFactor;
  } cases[] = {
      {0.001, 0.0, 1.0},  // ultra-stable: the noise floor keeps small wobbles quiet
      {0.02, 0.0, 1.0},  {0.10, 0.0, 1.0}, {0.30, 0.0, 1.0},  // very noisy
      {0.05, 0.01, 5.0},  // 1% of values 5x slower (preemption, retransmits)
      {0.05, 0.01, 0.2},  // 1% 5x faster
  };
  for (const Case& c : cases) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      Noise noise{std::mt19937_64(seed), c.sigma, c.outlierRate, c.outlierFactor};
      ShiftDetector d;
      INFO("sigma " << c.sigma << " outliers " << c.outlierRate << " x" << c.outlierFactor
                    << " seed " << seed);
      CHECK(firstFire(d, noise, 100e3, 20000) == -1);
      CHECK(d.shifts() == 0);
    }
  }
}

TEST_CASE("a doubling fires within a bounded number of values, with its ratio", "[detector]") {
  for (double sigma : {0.001, 0.02, 0.1}) {
    for (double factor : {2.0, 0.5, 3.0}) {
      for (uint64_t seed = 1; seed <= 5; ++seed) {
        Noise noise{std::mt19937_64(seed), sigma, 0.0, 1.0};
        ShiftDetector d;
        REQUIRE(firstFire(d, noise, 50e3, 200) == -1);
        Shift s;
        int at = firstFire(d, noise, 50e3 * factor, 100, &s);
        INFO("sigma " << sigma << " factor " << factor << " seed " << seed);
        // clip - drift = 2 per value against a threshold of 8: by the 5th value.
        CHECK(at >= 0);
        CHECK(at <= 4);
        CHECK(s.ratio == Approx(factor).epsilon(0.15));
        CHECK(s.baseline == Approx(50e3).epsilon(0.1));
      }
    }
  }
}

TEST_CASE("the detector recovers: re-learns the new level and reports the return", "[detector]") {
  Noise noise{std::mt19937_64(7), 0.05, 0.0, 1.0};
  ShiftDetector d;
  REQUIRE(firstFire(d, noise, 10e3, 100) == -1);
  REQUIRE(firstFire(d, noise, 20e3, 20) >= 0);
  CHECK_FALSE(d.ready());  // learning the new baseline
  // Staying at the new level is not a shift.
  CHECK(firstFire(d, noise, 20e3, 5000) == -1);
  CHECK(d.baseline() == Approx(20e3).epsilon(0.1));
  // Going back is one.
  Shift s;
  REQUIRE(firstFire(d, noise, 10e3, 20, &s) >= 0);
  CHECK(s.ratio == Approx(0.5).epsilon(0.1));
  CHECK(d.shifts() == 2);
}

TEST_CASE("small persistent changes below the noise floor do not fire", "[detector]") {
  Noise noise{std::mt19937_64(3), 0.001, 0.0, 1.0};
  ShiftDetector d;
  REQUIRE(firstFire(d, noise, 10e3, 100) == -1);
  CHECK(firstFire(d, noise, 10.4e3, 10000) == -1);  // +4%: below drift x minSigma
}

TEST_CASE("bad values are ignored", "[detector]") {
  ShiftDetector d;
  for (double v : {0.0, -1.0, double(std::nan("")), double(INFINITY)})
    CHECK_FALSE(d.update(v).fired);
  CHECK(d.values() == 0);
}

TEST_CASE("collective stats: per-arm aggregates and shifts, bounded arms", "[stats]") {
  CollectiveStats stats(/*nRanks=*/4, /*maxArms=*/3);
  ArmShift shift;
  // AllReduce 1 MiB Ring/Simple: 100 us, then 250 us.
  for (int i = 0; i < 50; ++i) CHECK_FALSE(stats.add(4, 1, 2, 1 << 20, 100000, i, &shift));
  int fired = 0;
  for (int i = 0; i < 20; ++i) fired += stats.add(4, 1, 2, 1 << 20, 250000, 100 + i, &shift);
  CHECK(fired == 1);
  CHECK(shift.key.func == 4);
  CHECK(shift.key.bucket == 20);
  CHECK(shift.shift.ratio == Approx(2.5).epsilon(0.05));
  // A size change inside one bucket (1 MiB -> 1.9 MiB at the same bandwidth) is not a shift.
  for (int i = 0; i < 200; ++i) {
    uint64_t bytes = i % 2 ? (1 << 20) : (1900 << 10);
    CHECK_FALSE(stats.add(4, 0, 2, bytes, bytes * 100000 / (1 << 20), i, &shift));
  }
  stats.add(2, 1, 0, 4096, 10000, 0, nullptr);
  stats.add(3, 1, 0, 4096, 10000, 0, nullptr);  // a 4th arm: counted only
  CHECK(stats.arms().size() == 3);
  CHECK(stats.untracked() == 1);
  auto order = stats.byTotalTime();
  REQUIRE(order.size() == 3);
  CHECK(order[0]->key.algo == 0);  // 200 calls of ~145 us
  const auto& ring = *order[1];
  CHECK(ring.count == 70);
  CHECK(ring.minUs == Approx(100.0));
  CHECK(ring.maxUs == Approx(250.0));
  CHECK(ring.shifts == 1);
  // busbw = bytes / time x 2(n-1)/n.
  double alg = double(70ull << 20) / ((50 * 100.0 + 20 * 250.0) * 1e3);
  CHECK(ring.algBwGbs() == Approx(alg));
  CHECK(ring.busBwGbs() == Approx(alg * 1.5));
}

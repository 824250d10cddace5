// The arrival exchange: clock offset estimation, the straggler analysis (pure), and two ranks
// talking over a real Unix socket on the channel thread.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "common/clock.h"
#include "profiler_plugin/arrival_analyzer.h"
#include "profiler_plugin/arrival_exchange.h"
#include "profiler_plugin/clock_offset.h"
#include "tuner_plugin/wire_format.h"

using namespace autopilot;
using namespace autopilot::profiler;

namespace {

constexpr uint64_t kMs = 1'000'000;

// One probe exchange with a peer whose clock runs `offset` ahead, with the given one-way delays
// and hold time.
ClockSample exchange(uint64_t t1, int64_t offset, uint64_t out, uint64_t hold, uint64_t back) {
  ClockSample s;
  s.t1 = t1;
  s.t2 = uint64_t(int64_t(t1 + out) + offset);
  s.t3 = s.t2 + hold;
  s.t4 = t1 + out + hold + back;
  return s;
}

}  // namespace

TEST_CASE("clock offset: the estimate is within its bound whatever the delays") {
  std::mt19937_64 rng(7);
  for (int64_t offset : {int64_t(0), int64_t(123456789), -int64_t(987654321012)}) {
    ClockOffsetEstimator est;
    uint64_t t = 1'000'000'000'000;
    for (int i = 0; i < 50; ++i) {
      // Asymmetric: queueing adds up to 2 ms in either direction.
      uint64_t out = 20'000 + rng() % 2'000'000, back = 20'000 + rng() % 2'000'000;
      REQUIRE(est.add(exchange(t, offset, out, 5'000 + rng() % 50'000, back)));
      int64_t err = est.offsetNs() - offset;
      REQUIRE(uint64_t(std::llabs(err)) <= est.errorNs(t + out + back));
      t += 250 * kMs;
    }
    CHECK(est.samples() == 50);
  }
}

TEST_CASE("clock offset: the exchange with the least delay wins, and the bound ages") {
  ClockOffsetEstimator est;
  const int64_t offset = 5 * int64_t(kMs);
  REQUIRE(est.add(exchange(1000 * kMs, offset, 3 * kMs, 10'000, 1 * kMs)));
  REQUIRE(est.add(exchange(1250 * kMs, offset, 20'000, 10'000, 20'000)));  // the quiet one
  REQUIRE(est.add(exchange(1500 * kMs, offset, 1 * kMs, 10'000, 4 * kMs)));
  CHECK(est.delayNs() == 40'000);
  CHECK(std::llabs(est.offsetNs() - offset) <= 1);
  const uint64_t fresh = est.errorNs(1250 * kMs + 50'000);
  CHECK(fresh <= 20'001 + 1);
  // Ten seconds later the drift allowance (100 ppm) dominates: 1 ms.
  CHECK(est.errorNs(11'250 * kMs) >= fresh + 999'000);
}

TEST_CASE("clock offset: timestamps no single exchange can produce are refused") {
  ClockOffsetEstimator est;
  ClockSample backwards{100, 5, 6, 50};  // answered before it was asked
  CHECK_FALSE(est.add(backwards));
  ClockSample held{100, 10, 500, 200};  // held longer than the whole round trip
  CHECK_FALSE(est.add(held));
  CHECK_FALSE(est.valid());
  CHECK(est.rejected() == 2);
  CHECK(est.errorNs(0) == UINT64_MAX);
}

namespace {

// Feeds collectives (every 10 ms) to an analyzer, rank `slow` arriving `lag` late and spending
// that much less in the collective than the others, which wait for it; everyone jitters by up
// to `jitter`. Returns the windows' changes.
struct Feed {
  Feed(ArrivalAnalyzer* analyzer, int ranks) : a(analyzer), nRanks(ranks) {}
  ArrivalAnalyzer* a;
  int nRanks;
  std::mt19937_64 rng{1};
  uint64_t now = 0;
  uint64_t seq = 0;
  std::vector<ArrivalChange> changes;
  void collectives(int count, int slow, uint64_t lag, uint64_t jitter, uint64_t errorNs = 0) {
    for (int i = 0; i < count; ++i) {
      now += 10 * kMs;
      for (int r = 0; r < nRanks; ++r) {
        uint64_t arrival = now + (jitter ? rng() % jitter : 0) + (r == slow ? lag : 0);
        uint64_t duration = 2 * kMs + (r == slow ? 0 : lag);
        a->add(r, 0, seq, int64_t(arrival), r == 0 ? 0 : errorNs, duration, now);
      }
      ++seq;
      a->advance(now, &changes);
    }
  }
};

ArrivalConfig config(int nRanks) {
  ArrivalConfig c;
  c.nRanks = nRanks;
  c.windowNs = 100 * kMs;  // ten collectives a window
  return c;
}

}  // namespace

TEST_CASE("arrivals: a rank late in every collective is named after two windows, only it") {
  ArrivalAnalyzer a(config(4), 0);
  Feed f{&a, 4};
  f.collectives(10, 2, 20 * kMs, 300'000);  // first window
  CHECK(f.changes.empty());
  f.collectives(10, 2, 20 * kMs, 300'000);
  REQUIRE(f.changes.size() == 1);
  CHECK(f.changes[0].rank == 2);
  CHECK(f.changes[0].named);
  const RankArrival& r2 = a.ranks()[2];
  CHECK(r2.named);
  CHECK(r2.streakLateFraction() == 1.0);
  CHECK(r2.streakLateMeanLagNs() > 19 * kMs);
  CHECK(r2.streakLateMeanLagNs() < 21 * kMs);
  CHECK(r2.sinceNs == 0);  // the start of its first late window
  for (int r : {0, 1, 3}) CHECK_FALSE(a.ranks()[size_t(r)].named);
  // It catches up: the next window clears it.
  f.changes.clear();
  f.collectives(10, -1, 0, 300'000);
  REQUIRE(f.changes.size() == 1);
  CHECK(f.changes[0].rank == 2);
  CHECK_FALSE(f.changes[0].named);
  CHECK(a.unmatched() == 0);
  CHECK(a.matched() == 30);
}

TEST_CASE("arrivals: jitter, clock uncertainty and cheap lateness name nobody") {
  SECTION("jitter below the minimum lag") {
    ArrivalAnalyzer a(config(8), 0);
    Feed f{&a, 8};
    f.collectives(100, -1, 0, 900'000);
    CHECK(f.changes.empty());
  }
  SECTION("a lag that the clocks' error bounds could explain") {
    ArrivalAnalyzer a(config(4), 0);
    Feed f{&a, 4};
    // 3 ms late, but every follower's clock is known only to within 2 ms.
    f.collectives(50, 3, 3 * kMs, 0, 2 * kMs);
    CHECK(f.changes.empty());
    CHECK(a.ranks()[3].late == 0);
  }
  SECTION("a lag that is a small share of the collective") {
    ArrivalConfig c = config(4);
    ArrivalAnalyzer a(c, 0);
    Feed f{&a, 4};
    for (int i = 0; i < 50; ++i) {
      f.now += 10 * kMs;
      for (int r = 0; r < 4; ++r) {
        // 2 ms late in 40 ms collectives: under a quarter of what the others spend.
        a.add(r, 0, f.seq, int64_t(f.now + (r == 1 ? 2 * kMs : 0)), 0, 40 * kMs, f.now);
      }
      ++f.seq;
      a.advance(f.now, &f.changes);
    }
    CHECK(f.changes.empty());
  }
}

TEST_CASE("arrivals: a rank that leaves is not waited for, and bounds hold") {
  SECTION("leaving") {
    ArrivalAnalyzer a(config(3), 0);
    Feed f{&a, 3};
    f.collectives(5, -1, 0, 0);
    a.setPresent(1, false);
    // Only ranks 0 and 2 report now; their collectives complete without rank 1.
    for (int i = 0; i < 5; ++i) {
      a.add(0, 0, 100 + uint64_t(i), 0, 0, kMs, f.now);
      a.add(2, 0, 100 + uint64_t(i), 0, 0, kMs, f.now);
      a.add(1, 0, 100 + uint64_t(i), 0, 0, kMs, f.now);  // a straggling batch: ignored
    }
    CHECK(a.matched() == 10);
    CHECK(a.ignored() == 5);
  }
  SECTION("collectives some rank never reports are dropped, counted") {
    ArrivalConfig c = config(2);
    c.maxPending = 8;
    ArrivalAnalyzer a(c, 0);
    for (uint64_t s = 0; s < 20; ++s) a.add(0, 1, s, 0, 0, kMs, 0);
    CHECK(a.unmatched() == 12);  // the oldest, when the table filled
    std::vector<ArrivalChange> changes;
    a.advance(c.pendingTimeoutNs + 1, &changes);
    CHECK(a.unmatched() == 20);  // the rest, on timeout
    a.add(0, 1, 3, 0, 0, kMs, 0);
    a.add(0, 1, 3, 0, 0, kMs, 0);  // the same rank twice
    CHECK(a.ignored() == 1);
    a.add(5, 1, 3, 0, 0, kMs, 0);  // no such rank
    CHECK(a.ignored() == 2);
  }
}

namespace {

std::string privateDir() {
  char tmpl[] = "/tmp/ap-arrivals-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

ExchangeConfig exchangeConfig(const std::string& dir, int rank, const Digest& key) {
  ExchangeConfig c;
  c.commId = 0xabc;
  c.label = "test";
  c.rank = rank;
  c.nRanks = 2;
  c.endpoint.kind = tuner::Endpoint::Kind::kUnix;
  c.endpoint.path = dir + "/arrivals.sock";
  c.key = key;
  c.analysis = config(2);
  c.sendIntervalNs = 20 * kMs;
  c.probeIntervalNs = 20 * kMs;
  return c;
}

template <typename Pred>
bool waitFor(Pred pred, int seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

}  // namespace

TEST_CASE("arrival exchange: rank 0 aligns a skewed clock and names the late rank") {
  std::string dir = privateDir();
  Digest key = tuner::wire::channelKey(tuner::wire::jobKey(0xabc, 2, 1, ""), "test");
  ExchangeConfig c0 = exchangeConfig(dir, 0, key);
  ExchangeConfig c1 = exchangeConfig(dir, 1, key);
  const int64_t skew = -int64_t(3'000'000'000);  // rank 1's host clock: 3 s behind
  c1.clockSkewNs = skew;
  c1.reportAll = true;
  ArrivalExchange rank0(c0), rank1(c1);
  REQUIRE(rank0.start());
  REQUIRE(rank1.start());
  // Collectives every 5 ms for up to 3 s; rank 1 arrives 20 ms late and waits less.
  bool named = false;
  for (uint64_t seq = 0; seq < 600 && !named; ++seq) {
    uint64_t t = monotonicNs();
    rank0.recordArrival(0, seq, t, 25 * kMs);
    rank1.recordArrival(0, seq, t + 20 * kMs, 5 * kMs);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ArrivalReport r = rank0.report();
    named = r.valid && r.ranks.size() == 2 && r.ranks[1].named;
  }
  REQUIRE(named);
  ArrivalReport r = rank0.report();
  CHECK_FALSE(r.ranks[0].named);
  CHECK(r.ranks[1].streakLateLagNs > 18e6);
  CHECK(r.ranks[1].streakLateLagNs < 30e6);
  REQUIRE(r.ranks[1].clockKnown);
  CHECK(uint64_t(std::llabs(r.ranks[1].clockOffsetNs - skew)) <= r.ranks[1].clockErrorNs);
  CHECK(r.ranks[1].clockErrorNs < 50 * kMs);
  // NCCL_AUTOPILOT_STRAGGLER_REPORT=all: rank 1 holds the same verdict.
  CHECK(waitFor(
      [&] {
        ArrivalReport r1 = rank1.report();
        for (const auto& e : r1.ranks) {
          if (e.rank == 1 && e.named) return true;
        }
        return false;
      },
      5));
  CHECK(rank1.counters().sent > 0);
  CHECK(rank0.counters().rejected == 0);
  rank1.stop();
  rank0.stop();
  struct stat st;
  CHECK(stat(c0.endpoint.path.c_str(), &st) != 0);  // rank 0 removed its socket
  rmdir(dir.c_str());
}

TEST_CASE("arrival exchange: a process without the key is refused") {
  std::string dir = privateDir();
  Digest key = tuner::wire::channelKey(tuner::wire::jobKey(0xabc, 2, 1, ""), "test");
  Digest other = tuner::wire::channelKey(tuner::wire::jobKey(0xabc, 2, 1, "other"), "test");
  ArrivalExchange rank0(exchangeConfig(dir, 0, key));
  ArrivalExchange stranger(exchangeConfig(dir, 1, other));
  REQUIRE(rank0.start());
  REQUIRE(stranger.start());
  CHECK(waitFor([&] { return rank0.counters().rejected >= 1; }, 5));
  stranger.recordArrival(0, 1, monotonicNs(), kMs);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(stranger.counters().sent == 0);
  stranger.stop();
  rank0.stop();
  rmdir(dir.c_str());
}

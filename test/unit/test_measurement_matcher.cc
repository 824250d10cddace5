// common/measurement_matcher.h: the clock rule and the sample-to-call match by sequence number
// (docs/measurement-matching.md). Each scenario reproduces one way NCCL's numbering and the
// tuner's calls relate: lone collectives, lost and reordered samples, merged aggregates, calls
// without tasks, tasks without calls, unrecorded calls, a full window, bad input.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "common/measurement_matcher.h"

using autopilot::bus::CollectiveSample;
using autopilot::bus::DurationClock;
using autopilot::bus::MeasurementMatcher;
using Outcome = MeasurementMatcher::Outcome;

namespace {

constexpr int kAllReduce = 4;
constexpr int kAllGather = 2;

CollectiveSample sample(int func, uint64_t seq, uint64_t nBytes,
                        DurationClock clock = DurationClock::kGpu) {
  CollectiveSample s;
  s.commId = 1;
  s.func = func;
  s.seqNumber = seq;
  s.nBytes = nBytes;
  s.algo = 1;
  s.proto = 2;
  s.durationNs = 1000;
  s.clock = clock;
  return s;
}

// Matches and returns the outcome; *ctx as the matcher gave it.
Outcome feed(MeasurementMatcher& m, const CollectiveSample& s, int* ctx) { return m.match(s, ctx); }

}  // namespace

TEST_CASE("matcher: the first clock admitted is the communicator's", "[matcher][clock]") {
  MeasurementMatcher m(0);
  CHECK(m.clock() == -1);
  CHECK(m.admitClock(DurationClock::kGpu));
  CHECK(m.clock() == int(DurationClock::kGpu));
  CHECK_FALSE(m.admitClock(DurationClock::kHost));
  CHECK(m.admitClock(DurationClock::kGpu));
  m.reset();
  CHECK(m.clock() == -1);
  CHECK(m.admitClock(DurationClock::kHost));
  CHECK_FALSE(m.admitClock(DurationClock::kGpu));

  // Racing first samples of both kinds: exactly one kind wins, and every thread agrees.
  for (int round = 0; round < 200; ++round) {
    MeasurementMatcher r(0);
    std::atomic<int> admittedGpu{0}, admittedHost{0};
    std::thread a([&] { admittedGpu += r.admitClock(DurationClock::kGpu); });
    std::thread b([&] { admittedHost += r.admitClock(DurationClock::kHost); });
    a.join();
    b.join();
    REQUIRE(admittedGpu + admittedHost == 1);
    CHECK(r.clock() == (admittedGpu == 1 ? int(DurationClock::kGpu) : int(DurationClock::kHost)));
  }
}

TEST_CASE("matcher: samples of the other clock are counted and dropped", "[matcher][clock]") {
  MeasurementMatcher m(64);
  int ctx = -1;
  m.addCall(kAllReduce, 0, 100, 7);
  m.addCall(kAllReduce, 1, 100, 8);
  CHECK(feed(m, sample(kAllReduce, 0, 100, DurationClock::kHost), &ctx) == Outcome::kMatched);
  CHECK(ctx == 7);
  CHECK(feed(m, sample(kAllReduce, 1, 100, DurationClock::kGpu), &ctx) == Outcome::kOtherClock);
  CHECK(ctx == -1);
  CHECK(m.stats().otherClock == 1);
  // The dropped sample did not move anything: its call can still be matched.
  CHECK(feed(m, sample(kAllReduce, 1, 100, DurationClock::kHost), &ctx) == Outcome::kMatched);
  CHECK(ctx == 8);
}

TEST_CASE("matcher: lone collectives match by sequence, each function on its own counter",
          "[matcher]") {
  MeasurementMatcher m(64);
  // AllReduce and AllGather interleaved, sizes repeating: a search on (func, bytes) would have
  // several candidates; the sequence number names exactly one.
  for (uint64_t i = 0; i < 20; ++i) {
    m.addCall(kAllReduce, i, 1024 << (i % 3), int(100 + i));
    m.addCall(kAllGather, i, 4096, int(200 + i));
  }
  int ctx = -1;
  for (uint64_t i = 0; i < 20; ++i) {
    REQUIRE(feed(m, sample(kAllGather, i, 4096), &ctx) == Outcome::kMatched);
    CHECK(ctx == int(200 + i));
    REQUIRE(feed(m, sample(kAllReduce, i, 1024 << (i % 3)), &ctx) == Outcome::kMatched);
    CHECK(ctx == int(100 + i));
  }
  CHECK(m.stats().matched == 40);
}

TEST_CASE("matcher: lost samples leave gaps, reordered ones still match, duplicates do not",
          "[matcher]") {
  MeasurementMatcher m(64);
  for (uint64_t i = 0; i < 8; ++i) m.addCall(kAllReduce, i, 512, int(i));
  int ctx = -1;
  CHECK(feed(m, sample(kAllReduce, 0, 512), &ctx) == Outcome::kMatched);
  // 1 and 2 lost on a full bus; 4 completes before 3.
  CHECK(feed(m, sample(kAllReduce, 4, 512), &ctx) == Outcome::kMatched);
  CHECK(ctx == 4);
  CHECK(feed(m, sample(kAllReduce, 3, 512), &ctx) == Outcome::kMatched);
  CHECK(ctx == 3);
  CHECK(feed(m, sample(kAllReduce, 3, 512), &ctx) == Outcome::kNoCall);  // duplicate
  CHECK(feed(m, sample(kAllReduce, 5, 512), &ctx) == Outcome::kMatched);
  CHECK(ctx == 5);
  CHECK(m.stats().matched == 4);
  CHECK(m.stats().realigned == 0);
}

TEST_CASE("matcher: a merged aggregate is recognised and shifts the alignment", "[matcher]") {
  MeasurementMatcher m(64);
  // Calls: 100 B lone; an aggregate of 100 + 200 B asked as 300 B; then 50 B lone.
  m.addCall(kAllReduce, 0, 100, 10);
  m.addCall(kAllReduce, 1, 300, 11);
  m.addCall(kAllReduce, 2, 50, 12);
  int ctx = -1;
  CHECK(feed(m, sample(kAllReduce, 0, 100), &ctx) == Outcome::kMatched);
  CHECK(feed(m, sample(kAllReduce, 1, 100), &ctx) == Outcome::kAggregatePart);
  CHECK(ctx == -1);
  CHECK(feed(m, sample(kAllReduce, 2, 200), &ctx) == Outcome::kAggregated);
  CHECK(ctx == -1);  // aggregates are never learned from
  // The lone 50 B collective took sequence 3 for call 2.
  CHECK(feed(m, sample(kAllReduce, 3, 50), &ctx) == Outcome::kMatched);
  CHECK(ctx == 12);
  CHECK(m.stats().aggregates == 1);
  CHECK(m.stats().aggregateParts == 2);

  // Three tasks in one call, then a lone one.
  m.addCall(kAllReduce, 3, 70, 13);
  m.addCall(kAllReduce, 4, 64, 14);
  CHECK(feed(m, sample(kAllReduce, 4, 10), &ctx) == Outcome::kAggregatePart);
  CHECK(feed(m, sample(kAllReduce, 5, 20), &ctx) == Outcome::kAggregatePart);
  CHECK(feed(m, sample(kAllReduce, 6, 40), &ctx) == Outcome::kAggregated);
  CHECK(feed(m, sample(kAllReduce, 7, 64), &ctx) == Outcome::kMatched);
  CHECK(ctx == 14);
}

TEST_CASE("matcher: an aggregate whose last task was lost is abandoned, then realigned",
          "[matcher]") {
  MeasurementMatcher m(64);
  m.addCall(kAllReduce, 0, 300, 10);  // tasks 100 + 200; the 200 B sample is lost
  m.addCall(kAllReduce, 1, 64, 11);
  m.addCall(kAllReduce, 2, 64, 12);
  int ctx = -1;
  CHECK(feed(m, sample(kAllReduce, 0, 100), &ctx) == Outcome::kAggregatePart);
  // Sequence 2 belongs to call 1, but the alignment still says call 2: the sample neither
  // continues the aggregate nor starts one, so the matcher re-anchors without learning.
  CHECK(feed(m, sample(kAllReduce, 2, 64), &ctx) == Outcome::kRealigned);
  CHECK(ctx == -1);
  CHECK(feed(m, sample(kAllReduce, 3, 64), &ctx) == Outcome::kMatched);
  CHECK(ctx == 12);
}

TEST_CASE("matcher: tasks without a call (graph replays) and calls without a task", "[matcher]") {
  MeasurementMatcher m(64);
  int ctx = -1;
  m.addCall(kAllReduce, 0, 1000, 1);
  CHECK(feed(m, sample(kAllReduce, 0, 1000), &ctx) == Outcome::kMatched);
  // Two replays of a captured 1000 B collective: numbered, but no call of their own.
  CHECK(feed(m, sample(kAllReduce, 1, 1000), &ctx) == Outcome::kNoCall);
  CHECK(feed(m, sample(kAllReduce, 2, 1000), &ctx) == Outcome::kNoCall);
  // Eager again: call 1 runs as sequence 3.
  m.addCall(kAllReduce, 1, 1000, 2);
  CHECK(feed(m, sample(kAllReduce, 3, 1000), &ctx) == Outcome::kRealigned);
  m.addCall(kAllReduce, 2, 1000, 3);
  CHECK(feed(m, sample(kAllReduce, 4, 1000), &ctx) == Outcome::kMatched);
  CHECK(ctx == 3);

  // A simulated group (ncclGroupSimulateEnd): calls 3 and 4 never launch.
  m.addCall(kAllReduce, 3, 500, 4);
  m.addCall(kAllReduce, 4, 700, 5);
  m.addCall(kAllReduce, 5, 2000, 6);
  m.addCall(kAllReduce, 6, 2000, 7);
  CHECK(feed(m, sample(kAllReduce, 5, 2000), &ctx) == Outcome::kRealigned);  // call 5
  CHECK(feed(m, sample(kAllReduce, 6, 2000), &ctx) == Outcome::kMatched);
  CHECK(ctx == 7);
  CHECK(m.stats().realigned == 2);
  CHECK(m.stats().noCall == 2);

  // A simulated call larger than the task that takes its place looks like the start of an
  // aggregate: those samples are lost, never attributed to the wrong call.
  m.addCall(kAllReduce, 7, 9000, 8);  // never launched
  m.addCall(kAllReduce, 8, 3000, 9);
  m.addCall(kAllReduce, 9, 3000, 10);
  m.addCall(kAllReduce, 10, 5000, 11);
  m.addCall(kAllReduce, 11, 5000, 12);
  CHECK(feed(m, sample(kAllReduce, 7, 3000), &ctx) == Outcome::kAggregatePart);
  CHECK(feed(m, sample(kAllReduce, 8, 3000), &ctx) == Outcome::kAggregatePart);
  CHECK(feed(m, sample(kAllReduce, 9, 5000), &ctx) == Outcome::kRealigned);  // call 10
  CHECK(feed(m, sample(kAllReduce, 10, 5000), &ctx) == Outcome::kMatched);
  CHECK(ctx == 12);
  // A task smaller than the previous one does not continue an aggregate (NCCL merges tasks in
  // ascending size).
  m.addCall(kAllReduce, 12, 300, 13);
  m.addCall(kAllReduce, 13, 100, 14);
  CHECK(feed(m, sample(kAllReduce, 11, 200), &ctx) == Outcome::kAggregatePart);
  CHECK(feed(m, sample(kAllReduce, 12, 100), &ctx) == Outcome::kRealigned);  // call 13
  CHECK(m.stats().aggregates == 0);
}

TEST_CASE("matcher: a task asked about twice (2.30's symmetric-kernel check) is matched once",
          "[matcher]") {
  // Each task: the fallback check, then the legacy path's question, same bytes and context;
  // one sample. Sizes change from task to task, growing and shrinking.
  MeasurementMatcher m(64);
  int ctx = -1;
  const uint64_t sizes[] = {4096, 8192, 2048, 2048, 2048, 16384, 1024};
  uint64_t ordinal = 0;
  for (uint64_t seq = 0; seq < 7; ++seq) {
    const int context = int(sizes[seq] / 1024);  // the context follows from the size
    m.addCall(kAllReduce, ordinal++, sizes[seq], context);
    m.addCall(kAllReduce, ordinal++, sizes[seq], context);
    INFO("task " << seq);
    CHECK(feed(m, sample(kAllReduce, seq, sizes[seq]), &ctx) == Outcome::kMatched);
    CHECK(ctx == context);
  }
  CHECK(m.stats().matched == 7);
  CHECK(m.stats().realigned == 0);
  CHECK(m.stats().aggregateParts == 0);
  // Skipped where the size changed (the run of three 2048 B tasks matched leftover questions of
  // the same size and context, three of them skipped at once at the 16384 B task).
  CHECK(m.stats().repeatsSkipped == 4);
}

TEST_CASE("matcher: after a long run of one size asked about twice, a new size still matches",
          "[matcher]") {
  // 200 tasks of one size, each asked about twice: every sample matches a call of its size and
  // context, the older ones first, so the calls not used pile up to the whole window. The next
  // size's samples must still find their own calls at once.
  MeasurementMatcher m(64);
  int ctx = -1;
  uint64_t ordinal = 0, seq = 0;
  auto task = [&](uint64_t bytes, int context) {
    m.addCall(kAllReduce, ordinal++, bytes, context);
    m.addCall(kAllReduce, ordinal++, bytes, context);
    return feed(m, sample(kAllReduce, seq++, bytes), &ctx);
  };
  int matchedA = 0;
  for (int i = 0; i < 200; ++i) matchedA += task(4096, 1) == Outcome::kMatched;
  CHECK(matchedA >= 190);  // a sample whose call was pushed out of the window re-anchors
  for (int i = 0; i < 5; ++i) {
    CHECK(task(8192, 2) == Outcome::kMatched);
    CHECK(ctx == 2);
  }
  for (int i = 0; i < 5; ++i) {
    CHECK(task(4096, 1) == Outcome::kMatched);
    CHECK(ctx == 1);
  }
}

TEST_CASE("matcher: a repeated call is skipped only when the next call is the sample's",
          "[matcher]") {
  MeasurementMatcher m(64);
  int ctx = -1;
  // Two groups of two 1000 B tasks, each merged into one 2000 B call, then a 1000 B call: the
  // second aggregate's first task must start an aggregate, not skip to the 1000 B call.
  m.addCall(kAllReduce, 0, 2000, 1);
  m.addCall(kAllReduce, 1, 2000, 1);
  m.addCall(kAllReduce, 2, 3000, 2);
  CHECK(feed(m, sample(kAllReduce, 0, 1000), &ctx) == Outcome::kAggregatePart);
  CHECK(feed(m, sample(kAllReduce, 1, 1000), &ctx) == Outcome::kAggregated);
  CHECK(feed(m, sample(kAllReduce, 2, 1000), &ctx) == Outcome::kAggregatePart);
  CHECK(feed(m, sample(kAllReduce, 3, 1000), &ctx) == Outcome::kAggregated);
  CHECK(feed(m, sample(kAllReduce, 4, 3000), &ctx) == Outcome::kMatched);
  CHECK(ctx == 2);
  // A repeat in another context is a question of its own (e.g. another numPipeOps bucket).
  m.addCall(kAllReduce, 3, 500, 7);
  m.addCall(kAllReduce, 4, 500, 8);
  m.addCall(kAllReduce, 5, 600, 9);
  CHECK(feed(m, sample(kAllReduce, 5, 500), &ctx) == Outcome::kMatched);
  CHECK(feed(m, sample(kAllReduce, 6, 600), &ctx) == Outcome::kRealigned);
  CHECK(m.stats().repeatsSkipped == 0);
}

TEST_CASE("matcher: calls made but not recorded leave holes, not a realignment", "[matcher]") {
  MeasurementMatcher m(64);
  m.addCall(kAllReduce, 0, 1 << 20, 1);
  m.addCall(kAllReduce, 2, 1 << 20, 3);  // call 1 was below the learning floor
  int ctx = -1;
  CHECK(feed(m, sample(kAllReduce, 1, 64), &ctx) == Outcome::kNotRecorded);
  CHECK(feed(m, sample(kAllReduce, 0, 1 << 20), &ctx) == Outcome::kMatched);
  CHECK(feed(m, sample(kAllReduce, 2, 1 << 20), &ctx) == Outcome::kMatched);
  CHECK(ctx == 3);
  CHECK(m.stats().notRecorded == 1);
  CHECK(m.stats().realigned == 0);
}

TEST_CASE("matcher: the window wraps around; calls pushed out are counted", "[matcher]") {
  MeasurementMatcher m(16);
  int ctx = -1;
  // Many laps of the 16-slot window, samples trailing the calls by up to 8.
  uint64_t next = 0;
  for (uint64_t i = 0; i < 10000; ++i) {
    m.addCall(kAllReduce, i, 4096 + (i % 5), int(i % 1000));
    if (i >= 8) {
      REQUIRE(feed(m, sample(kAllReduce, next, 4096 + (next % 5)), &ctx) == Outcome::kMatched);
      CHECK(ctx == int(next % 1000));
      ++next;
    }
  }
  CHECK(m.stats().callsOverwritten == 0);
  // 40 calls nobody measured: 24 of them are pushed out unused.
  for (uint64_t i = 10000; i < 10040; ++i) m.addCall(kAllReduce, i, 64, 0);
  CHECK(m.stats().callsOverwritten == 24 + 8);
  CHECK(feed(m, sample(kAllReduce, 9995, 4096 + 0), &ctx) == Outcome::kNoCall);
}

TEST_CASE("matcher: bad input is counted, never matched", "[matcher]") {
  MeasurementMatcher m(16);
  m.addCall(kAllReduce, 0, 100, 1);
  int ctx = -1;
  auto s = sample(kAllReduce, 0, 100);
  auto bad = [&](CollectiveSample x) { return feed(m, x, &ctx) == Outcome::kBadSample; };
  s.func = -1;
  CHECK(bad(s));
  s.func = 7;  // point-to-point and newer functions never reach the tuner
  CHECK(bad(s));
  s = sample(kAllReduce, 0, 100);
  s.algo = -1;  // copy-engine collectives have no algorithm
  CHECK(bad(s));
  s.algo = 7;
  CHECK(bad(s));
  s = sample(kAllReduce, 0, 100);
  s.proto = 3;
  CHECK(bad(s));
  s = sample(kAllReduce, 0, 100);
  s.durationNs = 0;
  CHECK(bad(s));
  s = sample(kAllReduce, 0, 100);
  s.nBytes = 0;
  CHECK(bad(s));
  s = sample(kAllReduce, ~uint64_t(0), 100);
  CHECK(bad(s));
  s = sample(kAllReduce, 0, 100);
  s.clock = DurationClock(9);
  CHECK(bad(s));
  CHECK(m.stats().badSample == 9);
  CHECK(m.clock() == -1);  // bad samples never decide the clock
  // Bad calls: function out of range, an ordinal that goes back.
  m.addCall(-1, 1, 100, 1);
  m.addCall(5, 1, 100, 1);
  m.addCall(kAllReduce, 0, 100, 99);
  CHECK(m.stats().callsRejected == 3);
  CHECK(feed(m, sample(kAllReduce, 0, 100), &ctx) == Outcome::kMatched);
  CHECK(ctx == 1);

  // A clock-rule-only matcher (the profiler's) matches nothing.
  MeasurementMatcher clockOnly(0);
  clockOnly.addCall(kAllReduce, 0, 100, 1);
  CHECK(clockOnly.match(sample(kAllReduce, 0, 100), &ctx) == Outcome::kNoCall);
  CHECK(clockOnly.stats().callsRejected == 1);
}

TEST_CASE("matcher: lone collectives with losses and reordering are matched exactly", "[matcher]") {
  // Randomised: 5 functions, sizes from a small set (many repeats), 10% of samples lost, pairs
  // completing out of order. Every sample that arrives names its own call.
  std::mt19937_64 rng(7);
  MeasurementMatcher m(1024);
  uint64_t ordinal[5] = {};
  struct Pending {
    int func;
    uint64_t seq, nBytes;
    int ctx;
  };
  std::vector<Pending> inFlight;
  uint64_t expectMatched = 0;
  int ctx = -1;
  for (int i = 0; i < 20000; ++i) {
    int func = int(rng() % 5);
    uint64_t nBytes = uint64_t(1) << (10 + rng() % 4);
    int callCtx = int(rng() % 100000);
    m.addCall(func, ordinal[func], nBytes, callCtx);
    inFlight.push_back({func, ordinal[func]++, nBytes, callCtx});
    if (inFlight.size() >= 2 && rng() % 4 == 0) std::swap(inFlight[0], inFlight[1]);
    if (inFlight.size() >= 3) {
      Pending p = inFlight.front();
      inFlight.erase(inFlight.begin());
      if (rng() % 10 == 0) continue;  // lost
      REQUIRE(feed(m, sample(p.func, p.seq, p.nBytes), &ctx) == Outcome::kMatched);
      REQUIRE(ctx == p.ctx);
      ++expectMatched;
    }
  }
  CHECK(m.stats().matched == expectMatched);
  CHECK(m.stats().realigned == 0);
}

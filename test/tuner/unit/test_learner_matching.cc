// The learner's side of the measurement path: calls recorded on NCCL's thread, samples drained
// from the measurement bus, attributed by sequence number (common/measurement_matcher.h). The
// cases are the ones a search on (function, bytes) got wrong or could not tell apart.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "common/abi/nccl_abi.h"
#include "common/measurement_bus.h"
#include "tuner_plugin/decision.h"
#include "tuner_plugin/learner.h"
#include "tuner_plugin/tuner_comm.h"

using namespace autopilot;
using namespace autopilot::tuner;

namespace {

constexpr uint64_t kComm = 0x5eed0001;
constexpr int kRingSimple = abi::kAlgoRing * abi::kNumProtocols + abi::kProtoSimple;

struct Fixture {
  TunerComm comm{kComm, /*minBytes=*/0, /*syncTimeoutNs=*/1000000000, nullptr};
  Learner learner{&comm, PolicyConfig{}};
  bus::MeasurementBus& bus = bus::MeasurementBus::instance();
  uint64_t seq[abi::kNumTunedFuncs] = {};

  Fixture() {
    bus.resetForTesting();
    REQUIRE(bus.attach(kComm));
    comm.setRecording(true);
  }
  ~Fixture() { bus.detach(kComm); }

  void call(int func, uint64_t nBytes, int numPipeOps) {
    float table[abi::kNumAlgorithms][abi::kNumProtocols];
    for (auto& row : table) {
      for (float& c : row) c = -1.0f;
    }
    table[abi::kAlgoRing][abi::kProtoSimple] = 100.0f;
    table[abi::kAlgoTree][abi::kProtoSimple] = 150.0f;
    int nChannels = 0;
    comm.getCollInfo(func, nBytes, numPipeOps, reinterpret_cast<float**>(table),
                     abi::kNumAlgorithms, abi::kNumProtocols, &nChannels);
  }
  // The sample of the next collective of `func` NCCL numbers; `lost` only advances the number.
  void collective(int func, uint64_t nBytes, bool lost = false) {
    bus::CollectiveSample s;
    s.commId = kComm;
    s.func = func;
    s.seqNumber = seq[func]++;
    s.nBytes = nBytes;
    s.algo = abi::kAlgoRing;
    s.proto = abi::kProtoSimple;
    s.durationNs = 90000;
    s.clock = bus::DurationClock::kGpu;
    if (!lost) REQUIRE(bus.publish(s));
  }
  double samplesOf(int ctx) const {
    const BanditPolicy::ArmStats* a = learner.policy().arm(ctx, kRingSimple);
    return a ? a->n : 0;
  }
};

}  // namespace

TEST_CASE("learner: a sample goes to its own call, not the oldest one of the same size",
          "[learner][matching]") {
  Fixture f;
  const int lone = contextIndex(abi::kFuncAllReduce, 1 << 20, 1);
  const int piped = contextIndex(abi::kFuncAllReduce, 1 << 20, 8);
  REQUIRE(lone != piped);
  // Two calls of the same size in different numPipeOps buckets; the first one's sample is lost.
  f.call(abi::kFuncAllReduce, 1 << 20, 1);
  f.call(abi::kFuncAllReduce, 1 << 20, 8);
  f.collective(abi::kFuncAllReduce, 1 << 20, /*lost=*/true);
  f.collective(abi::kFuncAllReduce, 1 << 20);
  f.learner.step();
  CHECK(f.learner.stats().attributed == 1);
  CHECK(f.samplesOf(piped) == 1);
  CHECK(f.samplesOf(lone) == 0);
}

TEST_CASE("learner: grouped collectives are recognised and not learned from",
          "[learner][matching]") {
  Fixture f;
  const int big = contextIndex(abi::kFuncAllReduce, 3 << 20, 1);
  const int small = contextIndex(abi::kFuncAllReduce, 1 << 20, 1);
  // One call for a merged aggregate of 1 MiB + 2 MiB, then a lone 1 MiB collective.
  f.call(abi::kFuncAllReduce, 3 << 20, 1);
  f.call(abi::kFuncAllReduce, 1 << 20, 1);
  f.collective(abi::kFuncAllReduce, 1 << 20);
  f.collective(abi::kFuncAllReduce, 2 << 20);
  f.collective(abi::kFuncAllReduce, 1 << 20);
  f.learner.step();
  CHECK(f.learner.matchStats().aggregates == 1);
  CHECK(f.learner.stats().attributed == 1);
  CHECK(f.samplesOf(big) == 0);
  CHECK(f.samplesOf(small) == 1);
}

TEST_CASE("learner: calls below the learning floor keep their ordinals", "[learner][matching]") {
  Fixture f;
  // A call of a function the tuner does not know takes no AllReduce ordinal; a call the tuner
  // does not record (0 bytes: no context) still takes one.
  f.call(7, 1 << 20, 1);
  f.call(abi::kFuncAllReduce, 0, 1);
  f.call(abi::kFuncAllReduce, 4096, 1);
  f.collective(abi::kFuncAllReduce, 4096, /*lost=*/true);  // ordinal 0 (the 0-byte call)
  f.collective(abi::kFuncAllReduce, 4096);
  f.learner.step();
  CHECK(f.learner.stats().attributed == 1);
  CHECK(f.learner.matchStats().realigned == 0);
  CHECK(f.samplesOf(contextIndex(abi::kFuncAllReduce, 4096, 1)) == 1);
}

TEST_CASE("learner: each shift notice re-opens its contexts; dropped notices re-open all",
          "[learner][shifts]") {
  Fixture f;
  f.call(abi::kFuncAllReduce, 1 << 20, 1);
  f.call(abi::kFuncAllGather, 1 << 20, 1);
  f.learner.step();  // both contexts live
  const uint64_t before = f.learner.policy().reopenCount();
  bus::ShiftNotice n;
  n.func = abi::kFuncAllReduce;
  n.nBytes = 1 << 20;
  REQUIRE(f.bus.reportShift(kComm, n));
  f.learner.step();
  CHECK(f.learner.policy().reopenCount() == before + 1);  // the AllReduce context only
  CHECK(f.learner.stats().shifts == 1);
  // More notices than the queue holds: the queued ones each re-open their context, and the
  // dropped ones, which cannot be placed, re-open every context.
  for (size_t i = 0; i < bus::MeasurementBus::kShiftCapacity + 3; ++i) f.bus.reportShift(kComm, n);
  f.learner.step();
  CHECK(f.learner.policy().reopenCount() == before + 1 + bus::MeasurementBus::kShiftCapacity + 2);
  CHECK(f.learner.stats().shifts == 1 + bus::MeasurementBus::kShiftCapacity + 3);
  f.learner.step();  // nothing new
  CHECK(f.learner.stats().shifts == 1 + bus::MeasurementBus::kShiftCapacity + 3);
}

TEST_CASE(
    "learner: another scale's corrections seed a new context's prior, never one that has "
    "its own saved state",
    "[learner][transfer]") {
  Fixture f;
  constexpr int kTreeSimple = abi::kAlgoTree * abi::kNumProtocols + abi::kProtoSimple;
  auto record = [&](uint64_t nBytes) {
    BanditPolicy::ContextRecord r;
    r.ctx = contextIndex(abi::kFuncAllReduce, nBytes, 1);
    for (float& v : r.prior) v = -1.0f;
    r.prior[kRingSimple] = 100.0f;  // the table Fixture::call passes
    r.prior[kTreeSimple] = 150.0f;
    r.incumbent = kTreeSimple;
    // Measured there: Tree twice as fast as Ring, where the model said 1.5x slower.
    r.arms[kRingSimple] = {5, std::log(100.0), 0.001};
    r.arms[kTreeSimple] = {5, std::log(50.0), 0.001};
    return r;
  };
  const int fresh = contextIndex(abi::kFuncAllReduce, 1 << 20, 1);
  const int saved = contextIndex(abi::kFuncAllReduce, 4 << 20, 1);
  const int unseen = contextIndex(abi::kFuncAllReduce, 16 << 20, 1);
  // This scale's own file holds the 4 MiB context; another scale holds 1 and 4 MiB.
  f.learner.restore({record(4 << 20)}, 4);
  CHECK(f.learner.addOtherScale({record(1 << 20), record(4 << 20)}) == 2);
  f.call(abi::kFuncAllReduce, 1 << 20, 1);
  f.call(abi::kFuncAllReduce, 4 << 20, 1);
  f.call(abi::kFuncAllReduce, 16 << 20, 1);
  f.learner.step();
  const double expected = std::log(50.0 / 100.0) - std::log(150.0 / 100.0);
  CHECK(f.learner.policy().priorCorrection(fresh, kTreeSimple) == Approx(expected).margin(1e-5));
  CHECK(f.learner.policy().priorCorrection(fresh, kRingSimple) == 0);
  // Its own measurements say what the model gets wrong at this scale: no transfer there.
  CHECK(f.learner.policy().priorCorrection(saved, kTreeSimple) == 0);
  CHECK(f.learner.policy().priorCorrection(unseen, kTreeSimple) == 0);
  CHECK(f.learner.stats().restoredUsed == 1);
  CHECK(f.learner.stats().seededFromOtherScale == 1);
  // The decision is still NCCL's own until this context measures anything.
  CHECK(f.learner.desired().entries[fresh].untouched());
}

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

// A cost table with only the given cells enabled (-1 elsewhere: IGNORE).
void costTable(float (*table)[abi::kNumProtocols], float ringSimple, float other, int otherAlgo,
               int otherProto) {
  for (int a = 0; a < abi::kNumAlgorithms; ++a) {
    for (int p = 0; p < abi::kNumProtocols; ++p) table[a][p] = -1.0f;
  }
  table[abi::kAlgoRing][abi::kProtoSimple] = ringSimple;
  if (other > 0) table[otherAlgo][otherProto] = other;
}

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
    costTable(table, 100.0f, 150.0f, abi::kAlgoTree, abi::kProtoSimple);
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

TEST_CASE(
    "learner: a cell is offered at half the chunk size once measured, plays through "
    "getChunkSize, and its samples are learned under that arm",
    "[learner][chunk]") {
  bus::MeasurementBus& bus = bus::MeasurementBus::instance();
  bus.resetForTesting();
  REQUIRE(bus.attach(kComm));
  TunerComm comm{kComm, 0, 1000000000, nullptr};
  Learner learner{&comm, PolicyConfig{}, /*learnChannels=*/false, /*learnChunk=*/true};
  comm.setRecording(true);
  const uint64_t kBytes = 8 << 20;
  const int ctx = contextIndex(abi::kFuncAllReduce, kBytes, 1);
  const int chunkArm = halvedChunkArm(kRingSimple);
  uint64_t seq = 0;
  auto call = [&] {
    float table[abi::kNumAlgorithms][abi::kNumProtocols];
    costTable(table, 100.0f, 300.0f, abi::kAlgoRing, abi::kProtoLL);
    int nChannels = 0;
    comm.getCollInfo(abi::kFuncAllReduce, kBytes, 1, reinterpret_cast<float**>(table),
                     abi::kNumAlgorithms, abi::kNumProtocols, &nChannels);
    CHECK(nChannels == 0);  // a chunk arm keeps NCCL's channel count
  };
  auto sample = [&](uint64_t durationNs) {
    bus::CollectiveSample s;
    s.commId = kComm;
    s.func = abi::kFuncAllReduce;
    s.seqNumber = seq++;
    s.nBytes = kBytes;
    s.algo = abi::kAlgoRing;
    s.proto = abi::kProtoSimple;
    s.durationNs = durationNs;
    s.clock = bus::DurationClock::kGpu;
    REQUIRE(bus.publish(s));
  };
  auto chunkOf = [&](int func, int algo, int proto) {
    size_t chunk = 2u << 20;
    comm.getChunkSize(func, algo, proto, &chunk);
    return chunk;
  };

  // Three samples of Ring/Simple at NCCL's chunk: the cell becomes an arm at half of it.
  for (int i = 0; i < 3; ++i) {
    call();
    CHECK(chunkOf(abi::kFuncAllReduce, abi::kAlgoRing, abi::kProtoSimple) == 2u << 20);
    sample(100000);
  }
  learner.step();
  CHECK(learner.stats().halfChunkArms == 1);
  CHECK(learner.snapshot().at(0).prior[chunkArm] == 100.0f);
  CHECK(learner.snapshot().at(0).prior[halvedChunkArm(abi::kAlgoRing * abi::kNumProtocols +
                                                      abi::kProtoLL)] < 0);  // LL takes none

  // The agreed table plays that arm: from its switch point on, the task's chunk is halved.
  DecisionTable t;
  t.entries[ctx].primary = int8_t(chunkArm);
  uint64_t callsNow = 0;
  REQUIRE(comm.stage(1, comm.calls() + 1, 0, t, &callsNow) == TunerComm::StageResult::kStaged);
  comm.resolve(1, true);
  call();
  CHECK(comm.appliedVersion() == 1);
  CHECK(chunkOf(abi::kFuncAllReduce, abi::kAlgoRing, abi::kProtoSimple) == 1u << 20);
  // NCCL asks once per channel part of the task: every part gets the same answer.
  CHECK(chunkOf(abi::kFuncAllReduce, abi::kAlgoRing, abi::kProtoSimple) == 1u << 20);
  // Another cell (NCCL overrode the table), or another collective: NCCL's chunk.
  CHECK(chunkOf(abi::kFuncAllReduce, abi::kAlgoTree, abi::kProtoSimple) == 2u << 20);
  CHECK(chunkOf(abi::kFuncAllGather, abi::kAlgoRing, abi::kProtoSimple) == 2u << 20);
  CHECK(comm.chunkStats().halved == 2);
  // Already at the floor: NCCL's value stands (and is counted).
  size_t small = 96u << 10;
  comm.getChunkSize(abi::kFuncAllReduce, abi::kAlgoRing, abi::kProtoSimple, &small);
  CHECK(small == 96u << 10);
  CHECK(comm.chunkStats().kept == 1);
  // Bad arguments leave the value alone.
  size_t v = 12345;
  comm.getChunkSize(-1, abi::kAlgoRing, abi::kProtoSimple, &v);
  comm.getChunkSize(abi::kFuncAllReduce, 99, abi::kProtoSimple, &v);
  comm.getChunkSize(abi::kFuncAllReduce, abi::kAlgoRing, -5, &v);
  CHECK(v == 12345);

  // Its sample is learned under the chunk arm, not the cell.
  sample(50000);
  learner.step();
  const BanditPolicy::ArmStats* half = learner.policy().arm(ctx, chunkArm);
  REQUIRE(half != nullptr);
  CHECK(half->n == 1);
  CHECK(learner.policy().arm(ctx, kRingSimple)->n == 3);

  // A call of a context the table leaves alone resets the collective's chunk to NCCL's.
  float table[abi::kNumAlgorithms][abi::kNumProtocols];
  costTable(table, 10.0f, 0, 0, 0);
  int nChannels = 0;
  comm.getCollInfo(abi::kFuncAllReduce, 1024, 1, reinterpret_cast<float**>(table),
                   abi::kNumAlgorithms, abi::kNumProtocols, &nChannels);
  CHECK(chunkOf(abi::kFuncAllReduce, abi::kAlgoRing, abi::kProtoSimple) == 2u << 20);

  // A saved chunk arm comes back from the tuning file, except with chunk learning off.
  BanditPolicy::ContextRecord saved = learner.snapshot().at(0);
  REQUIRE(saved.prior[chunkArm] >= 0);
  bus.detach(kComm);
  for (bool learnChunk : {true, false}) {
    TunerComm next{kComm + 1, 0, 1000000000, nullptr};
    Learner l{&next, PolicyConfig{}, false, learnChunk};
    next.setRecording(true);
    l.restore({saved}, 4);
    float again[abi::kNumAlgorithms][abi::kNumProtocols];
    costTable(again, 100.0f, 300.0f, abi::kAlgoRing, abi::kProtoLL);
    next.getCollInfo(abi::kFuncAllReduce, kBytes, 1, reinterpret_cast<float**>(again),
                     abi::kNumAlgorithms, abi::kNumProtocols, &nChannels);
    l.step();
    REQUIRE(l.stats().restoredUsed == 1);
    INFO("chunk learning " << learnChunk);
    CHECK((l.snapshot().at(0).prior[chunkArm] >= 0) == learnChunk);
    CHECK((l.policy().arm(ctx, chunkArm)->n > 0) == learnChunk);
  }
}

// The measurement path's one rule book, per communicator: which samples count (one clock kind
// per communicator) and which tuner call a sample measured (by sequence number). The profiler
// uses the clock rule before it publishes; the tuner's learner uses both on what it drains.
// Why matching works this way, and what NCCL guarantees about its numbering:
// docs/measurement-matching.md.
//
// Threading: admitClock() and clock() are lock-free and may run on any thread (the profiler's
// completion path); addCall(), match(), stats() and reset() belong to one thread (the tuner's
// service thread), and reset() also excludes admitClock().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/abi/nccl_abi.h"
#include "common/measurement_bus.h"

namespace autopilot::bus {

class MeasurementMatcher {
 public:
  static constexpr int kFuncs = abi::kNumTunedFuncs;
  // How many recorded calls past the last one used a realignment looks at.
  static constexpr size_t kRealignWindow = 64;

  enum class Outcome : uint8_t {
    kMatched,        // the call at the sample's sequence position, same bytes: learn from it
    kAggregatePart,  // a task of a merged aggregate still being summed (not learned from)
    kAggregated,     // the last task of an aggregate: the call is used up (not learned from)
    kRealigned,      // the correspondence moved; re-anchored on this sample (not learned from)
    kNotRecorded,    // its call was made but not recorded (below the floor, log full)
    kNoCall,         // no call can be its own (none recorded near it, or already used)
    kOtherClock,     // timed with the other clock kind than the communicator's
    kBadSample,      // function, algorithm or protocol out of range, or no duration
  };

  struct Stats {
    uint64_t matched = 0;
    uint64_t repeatsSkipped = 0;  // matches past repeated calls that had no task (in matched)
    uint64_t aggregateParts = 0;  // samples summed into aggregates (complete or not)
    uint64_t aggregates = 0;      // aggregates recognised
    uint64_t realigned = 0;
    uint64_t notRecorded = 0;
    uint64_t noCall = 0;
    uint64_t otherClock = 0;
    uint64_t badSample = 0;
    uint64_t callsOverwritten = 0;  // recorded calls pushed out of the window unused
    uint64_t callsRejected = 0;     // addCall with a bad function or an ordinal going back
  };

  // `callsPerFunc` recorded calls are remembered per function (rounded up to a power of two;
  // the window is allocated with the first call); 0 makes a clock rule only (the profiler's
  // use), where every sample ends as kNoCall.
  explicit MeasurementMatcher(size_t callsPerFunc);
  MeasurementMatcher(const MeasurementMatcher&) = delete;
  MeasurementMatcher& operator=(const MeasurementMatcher&) = delete;

  // The clock rule: the first clock admitted becomes the communicator's; afterwards only that
  // one is admitted. Returns whether `clock` is admitted.
  bool admitClock(DurationClock clock) noexcept;
  // The communicator's clock as int(DurationClock), or -1 while undecided.
  int clock() const noexcept;

  // A recorded getCollInfo call: `ordinal` counts every call of `func` on this communicator
  // from 0 (recorded or not), in call order. `tag` is the caller's, handed back with a match
  // (the tuner's: the arm the call played).
  void addCall(int func, uint64_t ordinal, uint64_t nBytes, int ctx, int tag = -1);
  // Classifies a sample; *ctx (and *tag when given) are the call's when the result is kMatched
  // (else -1).
  Outcome match(const CollectiveSample& sample, int* ctx, int* tag = nullptr);

  const Stats& stats() const { return stats_; }
  // For a new communicator: clock undecided, no calls, zero counters.
  void reset();

 private:
  struct CallSlot {
    uint64_t ordinal = 0;
    uint64_t nBytes = 0;
    int32_t ctx = -1;
    int32_t tag = -1;
    bool valid = false;
    bool used = false;
  };
  struct FuncState {
    int64_t alignment = 0;      // NCCL's sequence number minus our ordinal, for the current run
    int64_t lastUsed = -1;      // ordinal of the last call matched, aggregated or re-anchored on
    int64_t newest = -1;        // newest recorded ordinal
    bool summing = false;       // an aggregate is being summed
    int64_t aggCall = 0;        // ordinal of the aggregate's call
    int64_t aggFirstSeq = 0;    // sequence number of its first task
    int64_t aggNextSeq = 0;     // the one its next task must carry
    uint64_t aggBytes = 0;      // bytes of its tasks so far
    uint64_t aggLastBytes = 0;  // bytes of its latest task
  };

  CallSlot* slot(int func, int64_t ordinal);      // the slot that ordinal maps to
  CallSlot* recorded(int func, int64_t ordinal);  // the call with that ordinal, if remembered
  CallSlot* afterRepeats(int func, int64_t ordinal, uint64_t nBytes);
  bool continueAggregate(FuncState& f, int func, int64_t seq, uint64_t nBytes, Outcome* out);
  Outcome realign(FuncState& f, int func, int64_t seq, uint64_t nBytes);
  Outcome realignNewest(FuncState& f, int func, int64_t seq, uint64_t nBytes);
  Outcome anchorOn(FuncState& f, CallSlot* call, int64_t q, int64_t seq);

  const size_t capacity_;  // per function, a power of two (0: clock rule only)
  std::unique_ptr<CallSlot[]> calls_;
  FuncState funcs_[kFuncs];
  std::atomic<uint8_t> clock_{0};  // 0 undecided, else 1 + DurationClock
  Stats stats_;
};

}  // namespace autopilot::bus

// In-process measurement bus, keyed by communicator: the profiler publishes one sample per
// completed collective; the tuner's learner drains them. Change points (a persistent shift in a
// context's latency, or in a rail's bandwidth) are queued per communicator as notices, which the
// learner drains with the samples and hands to the bandit one by one; a full notice queue
// counts the drop, and the learner then re-opens every context (nothing is lost silently).
//
// Threading: publish() runs on NCCL's proxy progress thread or the application thread and is
// lock-free and allocation-free (a bounded ring per communicator, common/ring.h; a full ring
// drops the sample and counts it). attach()/detach() run at plugin init/finalize and may take
// a mutex.
// Per-rail bandwidth lives in common/rail_telemetry.h, which the net plugin (or the profiler,
// for NCCL's own net plugins) feeds.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "common/ring.h"

namespace autopilot::bus {

// Which clock a duration was measured with. Host and GPU durations are never mixed: a sample
// carries exactly one, and consumers compare samples only within one clock.
enum class DurationClock : uint8_t { kHost = 0, kGpu = 1 };

struct CollectiveSample {
  uint64_t commId = 0;
  uint64_t seqNumber = 0;  // NCCL's per-communicator, per-function sequence number
  int32_t func = -1;       // abi::Func
  int32_t algo = -1;       // abi::Algo index, -1 when unknown
  int32_t proto = -1;      // abi::Proto index, -1 when unknown
  int32_t nChannels = 0;
  uint64_t nBytes = 0;  // the size getCollInfo saw for this collective (tuner semantics)
  uint64_t durationNs = 0;
  DurationClock clock = DurationClock::kHost;
  uint64_t completedAtNs = 0;  // host monotonic time of completion
};

struct ShiftNotice {
  uint64_t commId = 0;  // filled by the bus
  uint64_t atNs = 0;
  int32_t func = -1;  // -1: not tied to a collective context (e.g. a rail shift)
  uint64_t nBytes = 0;
  int32_t algo = -1, proto = -1;
  int rail = -1;       // telemetry rail id for rail shifts
  double ratio = 1.0;  // new level / old level
};

class MeasurementBus {
 public:
  static constexpr int kMaxComms = 64;
  static constexpr size_t kRingCapacity = 1024;  // power of two
  // Shifts are rare (a detector re-learns its baseline after each), so a few dozen pending
  // notices mean the consumer stopped draining.
  static constexpr size_t kShiftCapacity = 64;
  static MeasurementBus& instance();

  // Reference-counted per communicator; false when every slot is in use.
  bool attach(uint64_t commId);
  void detach(uint64_t commId);
  bool attached(uint64_t commId) const;

  bool publish(const CollectiveSample& sample);
  // Pops up to `max` samples of `commId` (oldest first).
  size_t drain(uint64_t commId, CollectiveSample* out, size_t max);
  uint64_t published(uint64_t commId) const;
  uint64_t dropped(uint64_t commId) const;

  // Queues a change point for the communicator's consumer; false (and counted) when the queue
  // is full or the communicator is not attached.
  bool reportShift(uint64_t commId, const ShiftNotice& notice);
  // Pops up to `max` notices of `commId` (oldest first).
  size_t drainShifts(uint64_t commId, ShiftNotice* out, size_t max);
  uint64_t shiftsReported(uint64_t commId) const;  // queued since attach
  uint64_t shiftsDropped(uint64_t commId) const;   // rejected by a full queue since attach

  void resetForTesting();

 private:
  struct Slot {
    std::atomic<uint64_t> commId{0};
    int refs = 0;  // guarded by mu_
    // Made at the slot's first attach and kept: most processes use a few of the 64 slots.
    std::unique_ptr<Ring<CollectiveSample>> ring;
    std::atomic<uint64_t> published{0};
    std::atomic<uint64_t> dropped{0};
    std::unique_ptr<Ring<ShiftNotice>> shifts;
    std::atomic<uint64_t> shiftsReported{0};
    std::atomic<uint64_t> shiftsDropped{0};
  };
  Slot* find(uint64_t commId) const;

  mutable std::mutex mu_;
  Slot slots_[kMaxComms];
};

}  // namespace autopilot::bus

// LatenessMeter: how late this process's own progress passes run. NCCL's proxy thread polls a
// comm that has work outstanding without pause, so a long gap between two passes of such a comm
// means that the thread did not run: the host's CPUs were taken (other ranks, a CPU hog, the
// kernel) or the proxy was busy elsewhere. A peer on an equally loaded host is as late, and its
// silence during such gaps says nothing about the link; the failure detectors stretch their
// silence allowance by a multiple of the recent lateness, up to a cap
// (FailureDetector::setLateness), so that a loaded host does not take its own starvation for a
// dead rail.
//
// Process-wide, lock-free: one word holds the largest recent gap and when it was seen. The
// figure halves every kHalfLifeNs, so a load that went away stops stretching within seconds.
// Time is an argument: the class is pure apart from its one atomic word.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/clock.h"

namespace autopilot::net::core {

class LatenessMeter {
 public:
  static constexpr uint64_t kHalfLifeNs = 2'000'000'000;

  // The process's meter.
  static LatenessMeter& process();

  // A pass of a comm that had work outstanding since its previous pass, `gapNs` after it.
  void onGap(uint64_t gapNs, uint64_t nowNs) noexcept;
  // The largest recent gap, decayed to `nowNs`.
  uint64_t recentNs(uint64_t nowNs) const noexcept;

 private:
  // Microseconds of the largest recent gap (high 32 bits) and the millisecond (mod 2^32) it was
  // seen at (low 32 bits).
  std::atomic<uint64_t> word_{0};
};

// One comm's progress passes: feeds the meter with the gaps that count and returns the
// process's recent lateness. A gap is the time from the end of one pass to the start of the
// next (time spent inside a pass is the comm at work, watching its rails), and it counts only
// when the comm had work outstanding in between. The comm calls idle() when its last
// outstanding request goes back to NCCL: from then on NCCL has no reason to call it.
class PassClock {
 public:
  // Ends the pass when it goes out of scope, whichever way the pass returns.
  class [[nodiscard]] Scope {
   public:
    explicit Scope(PassClock& clock) : clock_(clock) {}
    ~Scope() { clock_.lastEndNs_ = monotonicNs(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    PassClock& clock_;
  };

  // The start of a pass at `nowNs`; `busy`: the comm has work outstanding now.
  uint64_t begin(uint64_t nowNs, bool busy, LatenessMeter& meter = LatenessMeter::process()) {
    if (busy_ && lastEndNs_ != 0 && nowNs > lastEndNs_) meter.onGap(nowNs - lastEndNs_, nowNs);
    busy_ = busy;
    return meter.recentNs(nowNs);
  }
  void idle() { busy_ = false; }

 private:
  uint64_t lastEndNs_ = 0;
  bool busy_ = false;
};

}  // namespace autopilot::net::core

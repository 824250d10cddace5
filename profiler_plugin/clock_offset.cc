#include "profiler_plugin/clock_offset.h"

namespace autopilot::profiler {

bool ClockOffsetEstimator::add(const ClockSample& s) {
  if (s.t4 < s.t1 || s.t3 < s.t2 || s.t3 - s.t2 > s.t4 - s.t1) {
    ++rejected_;
    return false;
  }
  window_[next_] = s;
  next_ = (next_ + 1) % kWindow;
  if (count_ < kWindow) ++count_;
  ++total_;
  choose();
  return true;
}

void ClockOffsetEstimator::choose() {
  bool first = true;
  for (size_t i = 0; i < count_; ++i) {
    const ClockSample& s = window_[i];
    uint64_t delay = (s.t4 - s.t1) - (s.t3 - s.t2);
    // Differences of unsigned clocks as signed: the two hosts' clocks may be far apart.
    int64_t sum = int64_t(s.t2 - s.t1) + int64_t(s.t3 - s.t4);
    int64_t offset = sum / 2;
    // Equal delays: the newer sample, whose bound has drifted less.
    if (first || delay < bestDelay_ || (delay == bestDelay_ && s.t4 > bestAt_)) {
      bestDelay_ = delay;
      bestOffset_ = offset;
      bestAt_ = s.t4;
      first = false;
    }
  }
}

uint64_t ClockOffsetEstimator::errorNs(uint64_t nowNs) const {
  if (!valid()) return UINT64_MAX;
  uint64_t age = nowNs > bestAt_ ? nowNs - bestAt_ : 0;
  // +1: the halving of an odd delay rounds down.
  return bestDelay_ / 2 + 1 + age / 1'000'000 * kDriftPpm;
}

}  // namespace autopilot::profiler

// How far another host's monotonic clock is from ours, from timestamp exchanges over the arrival
// exchange's channel (the method of NTP's on-wire protocol and its clock filter, in our words in
// docs/stragglers.md). Pure class: the timestamps come in as arguments.
//
// One exchange: we send at t1 (our clock), the peer receives at t2 and answers at t3 (its
// clock), we receive at t4 (ours). With d = (t4 - t1) - (t3 - t2), the time the two messages
// spent on the way, the peer's offset is theta = ((t2 - t1) + (t3 - t4)) / 2, and the true
// offset lies within theta +- d/2 whatever the split of d between the two directions. Of the
// last kWindow exchanges the one with the smallest d is used (queueing only ever adds delay), and
// the bound grows with its age by kDriftPpm, what two free-running or slewed oscillators may
// drift apart.
#pragma once

#include <cstddef>
#include <cstdint>

namespace autopilot::profiler {

struct ClockSample {
  uint64_t t1 = 0, t2 = 0, t3 = 0, t4 = 0;
};

class ClockOffsetEstimator {
 public:
  static constexpr size_t kWindow = 8;
  static constexpr uint64_t kDriftPpm = 100;

  // False (and ignored) when the timestamps cannot come from one exchange: an answer received
  // before it was asked for, or a peer that held it longer than the whole round trip.
  bool add(const ClockSample& s);
  bool valid() const { return count_ > 0; }
  // The peer's clock minus ours, in ns: a peer time p is p - offsetNs() on our clock.
  int64_t offsetNs() const { return bestOffset_; }
  // Bound on the error of offsetNs() at `nowNs` (our clock).
  uint64_t errorNs(uint64_t nowNs) const;
  // Round-trip delay of the sample in use.
  uint64_t delayNs() const { return bestDelay_; }
  uint64_t samples() const { return total_; }
  uint64_t rejected() const { return rejected_; }
  void reset() { *this = ClockOffsetEstimator(); }

 private:
  void choose();
  ClockSample window_[kWindow];
  size_t count_ = 0, next_ = 0;
  uint64_t total_ = 0, rejected_ = 0;
  int64_t bestOffset_ = 0;
  uint64_t bestDelay_ = 0;
  uint64_t bestAt_ = 0;  // t4 of the sample in use
};

}  // namespace autopilot::profiler

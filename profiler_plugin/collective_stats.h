// Per-communicator aggregates of completed collectives, keyed by (function, power-of-two size
// bucket, algorithm, protocol), the "(context, arm)" of the tuner, each with its own
// change-point detector on latency. Pure class: durations and times come in as arguments.
// Bounded: at most `maxArms` keys are tracked; samples of further keys are counted only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/shift_detector.h"

namespace autopilot::profiler {

struct ArmKey {
  int8_t func = -1, algo = -1, proto = -1;
  uint8_t bucket = 0;  // floor(log2(nBytes))
  uint32_t packed() const {
    return uint32_t(uint8_t(func)) | uint32_t(uint8_t(algo)) << 8 | uint32_t(uint8_t(proto)) << 16 |
           uint32_t(bucket) << 24;
  }
  uint64_t bucketBytes() const { return uint64_t(1) << bucket; }
};

struct ArmStats {
  ArmKey key;
  uint64_t count = 0;
  uint64_t bytes = 0;  // sum of nBytes
  double sumUs = 0, minUs = 0, maxUs = 0, lastUs = 0;
  double busBwFactor = 1.0;  // busbw = algbw × factor
  ShiftDetector detector;
  uint64_t shifts = 0;
  double lastShiftRatio = 1.0;
  uint64_t lastShiftAtNs = 0;
  double meanUs() const { return count ? sumUs / double(count) : 0.0; }
  // Bandwidths over all samples, GB/s (bytes per ns).
  double algBwGbs() const { return sumUs > 0 ? double(bytes) / (sumUs * 1e3) : 0.0; }
  double busBwGbs() const { return algBwGbs() * busBwFactor; }
};

struct ArmShift {
  ArmKey key;
  Shift shift;
  uint64_t atNs = 0;
};

class CollectiveStats {
 public:
  explicit CollectiveStats(int nRanks, size_t maxArms = 1024, ShiftDetectorConfig detector = {});

  // Adds one collective; returns true and fills *shift when its arm's latency shifted.
  bool add(int func, int algo, int proto, uint64_t nBytes, uint64_t durationNs, uint64_t atNs,
           ArmShift* shift);

  // Arms ordered by total time spent, largest first.
  std::vector<const ArmStats*> byTotalTime() const;
  const std::unordered_map<uint32_t, ArmStats>& arms() const { return arms_; }
  uint64_t samples() const { return samples_; }
  uint64_t untracked() const { return untracked_; }

 private:
  int nRanks_;
  size_t maxArms_;
  ShiftDetectorConfig detectorConfig_;
  std::unordered_map<uint32_t, ArmStats> arms_;
  uint64_t samples_ = 0;
  uint64_t untracked_ = 0;
};

}  // namespace autopilot::profiler

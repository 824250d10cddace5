// Per-rail bandwidth tracking for the profiler's service thread: turns successive snapshots of
// the rail telemetry registry into bandwidth samples and runs one change-point detector per
// rail. Pure class: snapshots and times come in as arguments.
//
// A rail yields a sample for an interval only when it moved at least `minBytes` in it (an idle
// rail says nothing about its capacity). The sample is the telemetry's own bandwidth estimate
// when the writer keeps one (our net plugin measures transfer rates), else bytes / interval.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/rail_telemetry.h"
#include "common/shift_detector.h"

namespace autopilot::profiler {

struct RailSample {
  int rail = -1;
  double bytesPerSec = 0;            // the sample fed to the detector (0: no sample this interval)
  double throughputBytesPerSec = 0;  // bytes moved / interval, always
  bool stateChanged = false;
  telemetry::RailState state = telemetry::RailState::kHealthy;
  Shift shift;
};

class RailMonitor {
 public:
  explicit RailMonitor(uint64_t minBytes = 1 << 20, ShiftDetectorConfig detector = {});
  // Compares with the previous snapshot; one entry per rail in `out`.
  void update(const telemetry::RailSnapshot* rails, size_t n, uint64_t nowNs,
              std::vector<RailSample>* out);
  uint64_t shifts(int rail) const;

 private:
  struct Track {
    bool seen = false;
    uint64_t bytes = 0;
    uint64_t atNs = 0;
    telemetry::RailState state = telemetry::RailState::kHealthy;
    ShiftDetector detector;
  };
  uint64_t minBytes_;
  ShiftDetectorConfig detectorConfig_;
  std::vector<Track> tracks_;
};

}  // namespace autopilot::profiler

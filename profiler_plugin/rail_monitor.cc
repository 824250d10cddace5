#include "profiler_plugin/rail_monitor.h"

namespace autopilot::profiler {

RailMonitor::RailMonitor(uint64_t minBytes, ShiftDetectorConfig detector)
    : minBytes_(minBytes), detectorConfig_(detector) {}

void RailMonitor::update(const telemetry::RailSnapshot* rails, size_t n, uint64_t nowNs,
                         std::vector<RailSample>* out) {
  out->clear();
  for (size_t i = 0; i < n; ++i) {
    const telemetry::RailSnapshot& r = rails[i];
    if (r.id < 0 || r.id >= telemetry::kMaxRails) continue;
    if (size_t(r.id) >= tracks_.size()) tracks_.resize(size_t(r.id) + 1);
    Track& t = tracks_[size_t(r.id)];
    uint64_t bytes = r.bytesSent + r.bytesReceived;
    RailSample s;
    s.rail = r.id;
    s.state = r.state;
    if (!t.seen) {
      t.seen = true;
      t.detector = ShiftDetector(detectorConfig_);
    } else {
      s.stateChanged = r.state != t.state;
      uint64_t moved = bytes >= t.bytes ? bytes - t.bytes : 0;
      uint64_t dt = nowNs > t.atNs ? nowNs - t.atNs : 0;
      if (dt > 0) s.throughputBytesPerSec = double(moved) * 1e9 / double(dt);
      if (moved >= minBytes_ && dt > 0) {
        s.bytesPerSec =
            r.bandwidthBytesPerSec > 0 ? double(r.bandwidthBytesPerSec) : s.throughputBytesPerSec;
        s.shift = t.detector.update(s.bytesPerSec);
      }
    }
    t.bytes = bytes;
    t.atNs = nowNs;
    t.state = r.state;
    out->push_back(s);
  }
}

uint64_t RailMonitor::shifts(int rail) const {
  return rail >= 0 && size_t(rail) < tracks_.size() ? tracks_[size_t(rail)].detector.shifts() : 0;
}

}  // namespace autopilot::profiler

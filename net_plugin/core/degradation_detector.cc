#include "net_plugin/core/degradation_detector.h"

namespace autopilot::net::core {

void DegradationDetector::reset() {
  degraded_ = false;
  pending_ = false;
  pendingSinceNs_ = 0;
  pendingSamples_ = 0;
  lastSamples_ = 0;
}

bool DegradationDetector::update(double railBandwidth, double referenceBandwidth, uint64_t nowNs,
                                 uint64_t samples) {
  // The count before this update's measurements (0 after the estimate was set afresh).
  const uint64_t before = samples < lastSamples_ ? 0 : lastSamples_;
  lastSamples_ = samples;
  if (!(referenceBandwidth > 0)) {
    pending_ = false;
    if (degraded_) {
      degraded_ = false;
      return true;
    }
    return false;
  }
  double ratio = railBandwidth / referenceBandwidth;
  bool crossing = degraded_ ? ratio > config_.recoverAbove : ratio < config_.degradeBelow;
  if (!crossing) {
    pending_ = false;
    return false;
  }
  if (!pending_ || samples < pendingSamples_) {
    pending_ = true;
    pendingSinceNs_ = nowNs;
    pendingSamples_ = before;
  }
  if (nowNs - pendingSinceNs_ < config_.holdNs) return false;
  if (samples - pendingSamples_ < config_.minSamples) return false;
  degraded_ = !degraded_;
  pending_ = false;
  return true;
}

}  // namespace autopilot::net::core

#include "net_plugin/core/degradation_detector.h"

namespace autopilot::net::core {

void DegradationDetector::reset() {
  degraded_ = false;
  pending_ = false;
  pendingSinceNs_ = 0;
}

bool DegradationDetector::update(double railBandwidth, double referenceBandwidth, uint64_t nowNs) {
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
  if (!pending_) {
    pending_ = true;
    pendingSinceNs_ = nowNs;
  }
  if (nowNs - pendingSinceNs_ < config_.holdNs) return false;
  degraded_ = !degraded_;
  pending_ = false;
  return true;
}

}  // namespace autopilot::net::core

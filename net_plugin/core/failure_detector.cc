#include "net_plugin/core/failure_detector.h"

#include <algorithm>

namespace autopilot::net::core {

void FailureDetector::reset(uint64_t nowNs) {
  error_ = false;
  outstanding_ = false;
  lastProgressNs_ = nowNs;
}

void FailureDetector::setOutstanding(bool outstanding, uint64_t nowNs) {
  // Idle time is not stall time: the clock starts when data becomes outstanding.
  if (outstanding && !outstanding_) lastProgressNs_ = nowNs;
  outstanding_ = outstanding;
}

uint64_t FailureDetector::timeoutNs(uint64_t outstandingBytes, double bandwidthBytesPerSec) const {
  double drainNs = 0;
  if (bandwidthBytesPerSec > 0) {
    drainNs = config_.drainFactor * double(outstandingBytes) * 1e9 / bandwidthBytesPerSec;
  }
  double total = double(config_.stallTimeoutNs) + drainNs;
  if (retransmitNs_ > 0) {
    double timer = double(std::min(retransmitNs_, config_.maxRetransmitGraceNs));
    total = std::max(total, timer + double(config_.stallTimeoutNs) / 2);
  }
  const double cap = double(std::max(config_.maxTimeoutNs, config_.stallTimeoutNs));
  if (locallyQueued_) total = cap;
  return uint64_t(std::min(total, cap)) + stretchNs_;
}

void FailureDetector::setLateness(uint64_t latenessNs) {
  double beyond = latenessNs > config_.latenessFloorNs
                      ? double(latenessNs - config_.latenessFloorNs) * config_.latenessFactor
                      : 0.0;
  stretchNs_ = uint64_t(std::min(beyond, double(config_.latenessCapNs)));
}

uint64_t FailureDetector::stalledForNs(uint64_t nowNs) const {
  if (!outstanding_ || nowNs <= lastProgressNs_) return 0;
  return nowNs - lastProgressNs_;
}

bool FailureDetector::failed(uint64_t nowNs, uint64_t outstandingBytes,
                             double bandwidthBytesPerSec) const {
  if (error_) return true;
  return stalledForNs(nowNs) > timeoutNs(outstandingBytes, bandwidthBytesPerSec);
}

}  // namespace autopilot::net::core

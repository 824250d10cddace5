#include "net_plugin/core/failback_scheduler.h"

#include <algorithm>

namespace autopilot::net::core {

FailbackScheduler::FailbackScheduler(const Config& config) : config_(config) {
  config_.initialBackoffNs = std::max<uint64_t>(config_.initialBackoffNs, 1);
  config_.maxBackoffNs = std::max(config_.maxBackoffNs, config_.initialBackoffNs);
  backoffNs_ = config_.initialBackoffNs;
}

void FailbackScheduler::grow() { backoffNs_ = std::min(backoffNs_ * 2, config_.maxBackoffNs); }

void FailbackScheduler::onFailed(uint64_t nowNs) {
  bool flapping = everRejoined_ && nowNs - rejoinedAtNs_ < config_.stableNs;
  if (flapping) {
    grow();
  } else {
    backoffNs_ = config_.initialBackoffNs;
  }
  waiting_ = true;
  nextAttemptNs_ = nowNs + backoffNs_;
}

void FailbackScheduler::onAttemptFailed(uint64_t nowNs) {
  ++attempts_;
  grow();
  waiting_ = true;
  nextAttemptNs_ = nowNs + backoffNs_;
}

void FailbackScheduler::onRejoined(uint64_t nowNs) {
  ++attempts_;
  waiting_ = false;
  everRejoined_ = true;
  rejoinedAtNs_ = nowNs;
}

void FailbackScheduler::retryNow(uint64_t nowNs) {
  if (waiting_ && nextAttemptNs_ > nowNs) nextAttemptNs_ = nowNs;
}

void FailbackScheduler::expedite(uint64_t nowNs) {
  if (!waiting_) return;
  uint64_t soon = nowNs + config_.initialBackoffNs;
  if (nextAttemptNs_ > soon) nextAttemptNs_ = soon;
}

}  // namespace autopilot::net::core

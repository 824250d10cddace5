#include "net_plugin/core/rail_metrics.h"

#include <algorithm>

namespace autopilot::net::core {

void RailMetrics::init(const std::vector<int>& telemetryIds) {
  auto& registry = telemetry::RailRegistry::instance();
  counters_.clear();
  for (int id : telemetryIds) counters_.push_back(registry.counters(id));
  lastAssigned_.assign(telemetryIds.size(), 0);
  nextPublishNs_ = 0;
}

void RailMetrics::publish(uint64_t nowNs, const RailStriper& striper) {
  if (nowNs < nextPublishNs_) return;
  nextPublishNs_ = nowNs + kPeriodNs;
  int n = std::min(int(counters_.size()), striper.railCount());
  uint64_t total = 0;
  uint64_t delta[RailStriper::kMaxRails] = {};
  for (int r = 0; r < n; ++r) {
    delta[r] = striper.assignedBytes(r) - lastAssigned_[size_t(r)];
    lastAssigned_[size_t(r)] = striper.assignedBytes(r);
    total += delta[r];
  }
  for (int r = 0; r < n; ++r) {
    telemetry::RailCounters* c = counters_[size_t(r)];
    if (c == nullptr) continue;
    c->bandwidthBytesPerSec.store(uint64_t(striper.bandwidth(r)), std::memory_order_relaxed);
    // An idle period keeps the last share instead of reporting zero everywhere.
    if (total > 0) {
      c->sharePermille.store(delta[r] * 1000 / total, std::memory_order_relaxed);
    } else if (striper.mode(r) == RailMode::kDown) {
      c->sharePermille.store(0, std::memory_order_relaxed);
    }
  }
}

}  // namespace autopilot::net::core

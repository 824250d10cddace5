// RailMetrics: one comm's link to the process-wide rail telemetry (common/rail_telemetry.h),
// shared by every transport. Counters are updated on the data path with relaxed atomics (no
// lock, no allocation); bandwidth estimates and shares are published every kPeriodNs from the
// striper's state (share = fraction of the bytes placed since the last publication).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "common/rail_telemetry.h"
#include "net_plugin/core/rail_striper.h"

namespace autopilot::net::core {

class RailMetrics {
 public:
  static constexpr uint64_t kPeriodNs = 50'000'000;

  void init(const std::vector<int>& telemetryIds);
  // NULL for a rail without a telemetry slot (the registry was full).
  telemetry::RailCounters* at(int r) const {
    return r >= 0 && r < int(counters_.size()) ? counters_[size_t(r)] : nullptr;
  }
  static void add(std::atomic<uint64_t>& counter, uint64_t v) {
    counter.fetch_add(v, std::memory_order_relaxed);
  }
  void publish(uint64_t nowNs, const RailStriper& striper);

 private:
  std::vector<telemetry::RailCounters*> counters_;
  std::vector<uint64_t> lastAssigned_;
  uint64_t nextPublishNs_ = 0;
};

}  // namespace autopilot::net::core

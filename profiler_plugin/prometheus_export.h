// Prometheus text exposition (version 0.0.4) for node_exporter's textfile collector: one file
// per process, rewritten atomically by the service thread every NCCL_AUTOPILOT_PROM_INTERVAL_MS
// and at each finalize. Collective metrics are labelled by communicator, rank, collective,
// power-of-two size bucket, algorithm and protocol (what NCCL Inspector exports, plus the arm);
// rail metrics (bytes, bandwidth, state, failovers) are what Inspector lacks. Base units only
// (seconds, bytes), counters end in _total.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/rail_telemetry.h"
#include "profiler_plugin/context.h"

namespace autopilot::profiler {

struct PrometheusInput {
  std::string hostname;
  int pid = 0;
  std::vector<const ProfilerContext*> contexts;  // each with its service state
  const telemetry::RailSnapshot* rails = nullptr;
  size_t nRails = 0;
  const double* railThroughput = nullptr;  // bytes/s over the last interval, per rail id
  size_t nRailThroughput = 0;
};

std::string renderPrometheus(const PrometheusInput& in);

}  // namespace autopilot::profiler

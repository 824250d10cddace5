// Prometheus text exposition (version 0.0.4) for node_exporter's textfile collector: one file
// per process, rewritten atomically by the service thread every NCCL_AUTOPILOT_PROM_INTERVAL_MS
// and at each finalize. Collective metrics are labelled by communicator, rank, collective,
// power-of-two size bucket, algorithm and protocol (what NCCL Inspector exports, plus the arm);
// rail metrics (bytes, bandwidth, state, failovers) are what Inspector lacks. Base units only
// (seconds, bytes), counters end in _total.
//
// Labels are stable across restarts of a job (docs/prometheus.md): a communicator is named by
// its commName or its creation order in the process, never by its commId, and process-level
// series by the process's rank in its first communicator, never by the pid; the host is the
// scrape's `instance` and appears only in the one info series. NCCL_AUTOPILOT_JOB_NAME, when set,
// adds `job_name` to every series, so that jobs sharing a node keep apart.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/rail_telemetry.h"
#include "profiler_plugin/context.h"

namespace autopilot::profiler {

// Records the profiler could not export, for the process (per-communicator losses are in the
// contexts' counters and writers).
struct ExportLosses {
  uint64_t prometheusWriteErrors = 0;  // rewrites of this file that failed
  uint64_t traceFilesFailed = 0;       // trace files removed after a failed write, ever
  uint64_t inspectorFilesFailed = 0;   // Inspector files cut after a failed write, ever
  uint64_t journalOverwritten = 0;     // journal events overwritten before being read
};

// How many times a plugin journalled one kind of event (rail failed, tuner choice changed, ...):
// the kinds are a small fixed set of tags in the code, so the series stay few.
struct EventCount {
  const char* source;  // journal::sourceName
  std::string kind;
  uint64_t count;
};

struct PrometheusInput {
  std::string hostname;
  std::string version;
  std::string jobName;          // the job_name label of every series when not empty
  int processRank = 0;          // the process's rank in its first communicator
  double startTimeSeconds = 0;  // wall clock (Unix seconds) when the process loaded the profiler
  std::vector<const ProfilerContext*> contexts;  // each with its service state (and its label)
  const telemetry::RailSnapshot* rails = nullptr;
  size_t nRails = 0;
  const double* railThroughput = nullptr;  // bytes/s over the last interval, per rail id
  size_t nRailThroughput = 0;
  ExportLosses losses;
  std::vector<EventCount> events;
};

std::string renderPrometheus(const PrometheusInput& in);

}  // namespace autopilot::profiler

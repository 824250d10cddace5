#include "profiler_plugin/prometheus_export.h"

#include <cstdio>

#include "profiler_plugin/export_util.h"
#include "profiler_plugin/nccl_names.h"
#include "profiler_plugin/service.h"

namespace autopilot::profiler {
namespace {

class Exposition {
 public:
  explicit Exposition(const std::string& jobName) {
    if (jobName.empty()) return;
    common_ = "job_name=\"";
    appendLabelEscaped(&common_, jobName.c_str());
    common_ += "\",";
  }
  // Every sample of a family must follow its HELP and TYPE lines, contiguously.
  void family(const char* name, const char* type, const char* help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void sample(const char* name, const std::string& labels, double value) {
    out_ += name;
    out_ += '{';
    out_ += common_;  // every sample has labels of its own after it
    out_ += labels;
    char buf[40];
    std::snprintf(buf, sizeof(buf), "} %.17g\n", value);
    out_ += buf;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string common_;  // `job_name="...",` or nothing
  std::string out_;
};

std::string label(const char* key, const char* value) {
  std::string s = key;
  s += "=\"";
  appendLabelEscaped(&s, value);
  s += '"';
  return s;
}

std::string commLabels(const ProfilerContext& ctx) {
  return label("comm", ctx.state->label.c_str()) + "," +
         label("rank", std::to_string(ctx.rank).c_str()) + "," +
         label("n_ranks", std::to_string(ctx.nRanks).c_str());
}

std::string armLabels(const ProfilerContext& ctx, const ArmStats& a) {
  return commLabels(ctx) + "," + label("collective", funcName(a.key.func)) + "," +
         label("size_bucket", std::to_string(a.key.bucketBytes()).c_str()) + "," +
         label("algo", algoName(a.key.algo)) + "," + label("proto", protoName(a.key.proto));
}

std::string railLabels(const std::string& process, const telemetry::RailSnapshot& r) {
  return process + "," + label("rail", r.identity.name) + "," +
         label("transport", r.identity.transport) + "," +
         label("device", std::to_string(r.identity.device).c_str());
}

}  // namespace

std::string renderPrometheus(const PrometheusInput& in) {
  Exposition x(in.jobName);
  const std::string process = label("process_rank", std::to_string(in.processRank).c_str());
  x.family("nccl_autopilot_process_info", "gauge",
           "Always 1: the host and library version of the process writing this file.");
  x.sample("nccl_autopilot_process_info",
           process + "," + label("hostname", in.hostname.c_str()) + "," +
               label("version", in.version.c_str()),
           1.0);
  x.family("nccl_autopilot_process_start_time_seconds", "gauge",
           "When the process loaded the profiler (Unix time): a change means a restart.");
  x.sample("nccl_autopilot_process_start_time_seconds", process, in.startTimeSeconds);

  struct ArmMetric {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const ArmStats&);
  };
  static const ArmMetric kArmMetrics[] = {
      {"nccl_autopilot_collective_count_total", "counter", "Completed collectives.",
       [](const ArmStats& a) { return double(a.count); }},
      {"nccl_autopilot_collective_bytes_total", "counter",
       "Bytes of completed collectives (the size NCCL's tuner sees).",
       [](const ArmStats& a) { return double(a.bytes); }},
      {"nccl_autopilot_collective_exec_time_seconds_total", "counter",
       "Total execution time of completed collectives (GPU clock when kernel timers exist).",
       [](const ArmStats& a) { return a.sumUs / 1e6; }},
      {"nccl_autopilot_collective_exec_time_seconds", "gauge",
       "Mean execution time of a collective.", [](const ArmStats& a) { return a.meanUs() / 1e6; }},
      {"nccl_autopilot_collective_last_exec_time_seconds", "gauge",
       "Execution time of the latest collective.",
       [](const ArmStats& a) { return a.lastUs / 1e6; }},
      {"nccl_autopilot_collective_algo_bandwidth_bytes_per_second", "gauge",
       "Algorithm bandwidth (bytes / time) over all samples.",
       [](const ArmStats& a) { return a.algBwGbs() * 1e9; }},
      {"nccl_autopilot_collective_bus_bandwidth_bytes_per_second", "gauge",
       "Bus bandwidth (algorithm bandwidth times the nccl-tests factor) over all samples.",
       [](const ArmStats& a) { return a.busBwGbs() * 1e9; }},
      {"nccl_autopilot_collective_latency_shifts_total", "counter",
       "Persistent latency shifts detected (change-point detection).",
       [](const ArmStats& a) { return double(a.shifts); }},
  };
  for (const ArmMetric& m : kArmMetrics) {
    x.family(m.name, m.type, m.help);
    for (const ProfilerContext* ctx : in.contexts) {
      if (!ctx->state) continue;  // no service state: no stats, no label
      for (const ArmStats* a : ctx->state->stats.byTotalTime()) {
        x.sample(m.name, armLabels(*ctx, *a), m.value(*a));
      }
    }
  }

  x.family("nccl_autopilot_profiler_events_dropped_total", "counter",
           "Profiler events or samples dropped because a bounded pool or queue was full.");
  for (const ProfilerContext* ctx : in.contexts) {
    if (!ctx->state) continue;
    const ContextCounters& c = ctx->counters;
    std::pair<const char*, uint64_t> reasons[] = {
        {"coll_pool_full", c.collPoolFull.load()},
        {"child_pool_full", c.childPoolFull.load()},
        {"completion_queue_full", c.completedQueueFull.load()},
        {"trace_queue_full", c.traceQueueFull.load()},
        {"bus_full", c.busRejected.load()},
        {"stale_reclaimed", c.reclaimed.load()}};
    for (const auto& [reason, value] : reasons) {
      x.sample("nccl_autopilot_profiler_events_dropped_total",
               commLabels(*ctx) + "," + label("reason", reason), double(value));
    }
  }
  x.family("nccl_autopilot_export_records_dropped_total", "counter",
           "Records missing from a trace or Inspector file: past its bound, or lost to a failed "
           "write.");
  for (const ProfilerContext* ctx : in.contexts) {
    if (!ctx->state) continue;
    const ContextState& st = *ctx->state;
    if (st.trace) {
      x.sample("nccl_autopilot_export_records_dropped_total",
               commLabels(*ctx) + "," + label("export", "trace"), double(st.trace->dropped()));
    }
    if (st.inspector) {
      x.sample("nccl_autopilot_export_records_dropped_total",
               commLabels(*ctx) + "," + label("export", "inspector"),
               double(st.inspector->dropped()));
    }
  }
  x.family("nccl_autopilot_export_write_errors_total", "counter",
           "Failed writes: rewrites of this Prometheus file, trace and Inspector files given up.");
  std::pair<const char*, uint64_t> failures[] = {{"prometheus", in.losses.prometheusWriteErrors},
                                                 {"trace", in.losses.traceFilesFailed},
                                                 {"inspector", in.losses.inspectorFilesFailed}};
  for (const auto& [what, value] : failures) {
    x.sample("nccl_autopilot_export_write_errors_total", process + "," + label("export", what),
             double(value));
  }
  x.family("nccl_autopilot_plugin_events_total", "counter",
           "Decisions and state changes our plugins recorded (e.g. source net, kind rail_failed; "
           "source tuner, kind tuner_choice).");
  for (const EventCount& e : in.events) {
    x.sample("nccl_autopilot_plugin_events_total",
             process + "," + label("source", e.source) + "," + label("kind", e.kind.c_str()),
             double(e.count));
  }
  x.family("nccl_autopilot_journal_events_overwritten_total", "counter",
           "Plugin events (failovers, decisions) overwritten in the bounded journal before the "
           "profiler read them (missing from the trace and the summary).");
  x.sample("nccl_autopilot_journal_events_overwritten_total", process,
           double(in.losses.journalOverwritten));

  // The arrival exchange: rank 0's view (every rank's with NCCL_AUTOPILOT_STRAGGLER_REPORT=all).
  // `rank` is the rank described, `reporter` the rank whose file this is.
  struct ArrivalMetric {
    const char* name;
    const char* type;
    const char* help;
    bool (*has)(const ArrivalReport::Rank&);
    double (*value)(const ArrivalReport::Rank&);
  };
  using R = ArrivalReport::Rank;
  static const ArrivalMetric kArrivalMetrics[] = {
      {"nccl_autopilot_arrival_lag_seconds", "gauge",
       "Mean lag of the rank's arrival behind the communicator's median arrival, last window.",
       [](const R&) { return true; }, [](const R& e) { return e.windowLagNs / 1e9; }},
      {"nccl_autopilot_arrival_lag_max_seconds", "gauge", "Largest arrival lag, last window.",
       [](const R&) { return true; }, [](const R& e) { return e.windowMaxLagNs / 1e9; }},
      {"nccl_autopilot_arrival_late_ratio", "gauge",
       "Share of the last window's collectives in which the rank arrived late.",
       [](const R&) { return true; }, [](const R& e) { return e.windowLateFraction; }},
      {"nccl_autopilot_arrival_late_collectives_total", "counter",
       "Collectives in which the rank arrived late.", [](const R&) { return true; },
       [](const R& e) { return double(e.late); }},
      {"nccl_autopilot_arrival_compared_collectives_total", "counter",
       "Collectives whose arrivals were compared across all present ranks.",
       [](const R&) { return true; }, [](const R& e) { return double(e.compared); }},
      {"nccl_autopilot_straggler", "gauge",
       "1 while the rank is named a straggler (late windows in a row), else 0.",
       [](const R&) { return true; }, [](const R& e) { return e.named ? 1.0 : 0.0; }},
      {"nccl_autopilot_straggler_since_seconds", "gauge",
       "Start (Unix time) of the rank's current run of late windows; 0 when none.",
       [](const R&) { return true; }, [](const R& e) { return e.sinceWallSeconds; }},
      {"nccl_autopilot_clock_offset_seconds", "gauge",
       "Estimated offset of the rank's host clock from the reporter's.",
       [](const R& e) { return e.clockKnown; }, [](const R& e) { return e.clockOffsetNs / 1e9; }},
      {"nccl_autopilot_clock_offset_error_seconds", "gauge",
       "Bound on the error of that estimate (half the best round trip, plus drift).",
       [](const R& e) { return e.clockKnown; }, [](const R& e) { return e.clockErrorNs / 1e9; }},
      {"nccl_autopilot_rank_rails_unhealthy", "gauge",
       "Rails of the rank's process that are degraded, failed or probing.",
       [](const R& e) { return e.railsUnhealthy >= 0; },
       [](const R& e) { return double(e.railsUnhealthy); }},
  };
  for (const ArrivalMetric& m : kArrivalMetrics) {
    x.family(m.name, m.type, m.help);
    for (const ProfilerContext* ctx : in.contexts) {
      if (!ctx->state || !ctx->state->arrivalReport.valid) continue;
      const std::string base = label("comm", ctx->state->label.c_str()) + "," +
                               label("n_ranks", std::to_string(ctx->nRanks).c_str()) + "," +
                               label("reporter", std::to_string(ctx->rank).c_str()) + ",";
      for (const R& e : ctx->state->arrivalReport.ranks) {
        if (!m.has(e)) continue;
        x.sample(m.name, base + label("rank", std::to_string(e.rank).c_str()), m.value(e));
      }
    }
  }
  x.family("nccl_autopilot_arrival_records_dropped_total", "counter",
           "Arrivals left out of the exchange: buffer_full (never sent), awaiting_clock (rank 0: "
           "before the sender's clock offset was known), unmatched (rank 0: some rank never "
           "reported the collective).");
  for (const ProfilerContext* ctx : in.contexts) {
    if (!ctx->state || !ctx->state->arrivals) continue;
    const ExchangeCounters& c = ctx->state->arrivalCounters;
    std::pair<const char*, uint64_t> reasons[] = {
        {"buffer_full", c.dropped},
        {"awaiting_clock", c.awaitingClock},
        {"unmatched", ctx->rank == 0 ? ctx->state->arrivalReport.unmatched : 0}};
    for (const auto& [reason, value] : reasons) {
      x.sample("nccl_autopilot_arrival_records_dropped_total",
               commLabels(*ctx) + "," + label("reason", reason), double(value));
    }
  }

  struct RailMetric {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const telemetry::RailSnapshot&);
  };
  static const RailMetric kRailMetrics[] = {
      {"nccl_autopilot_rail_sent_bytes_total", "counter", "Bytes sent on the rail.",
       [](const telemetry::RailSnapshot& r) { return double(r.bytesSent); }},
      {"nccl_autopilot_rail_received_bytes_total", "counter", "Bytes received on the rail.",
       [](const telemetry::RailSnapshot& r) { return double(r.bytesReceived); }},
      {"nccl_autopilot_rail_retransmitted_bytes_total", "counter",
       "Bytes re-sent on the rail after another rail failed, or copied from a late one.",
       [](const telemetry::RailSnapshot& r) { return double(r.retransmittedBytes); }},
      {"nccl_autopilot_rail_probe_copy_bytes_total", "counter",
       "Bytes given to the rail only to measure it: copies of chunks another rail carries.",
       [](const telemetry::RailSnapshot& r) { return double(r.probeCopyBytes); }},
      {"nccl_autopilot_rail_failovers_total", "counter", "Times the rail was declared failed.",
       [](const telemetry::RailSnapshot& r) { return double(r.failovers); }},
      {"nccl_autopilot_rail_recoveries_total", "counter", "Times the rail re-joined.",
       [](const telemetry::RailSnapshot& r) { return double(r.recoveries); }},
      {"nccl_autopilot_rail_bandwidth_bytes_per_second", "gauge",
       "Measured transfer bandwidth of the rail (estimate kept by its writer).",
       [](const telemetry::RailSnapshot& r) { return double(r.bandwidthBytesPerSec); }},
      {"nccl_autopilot_rail_share_ratio", "gauge", "Share of striped bytes given to the rail.",
       [](const telemetry::RailSnapshot& r) { return double(r.sharePermille) / 1000.0; }},
  };
  for (const RailMetric& m : kRailMetrics) {
    x.family(m.name, m.type, m.help);
    for (size_t i = 0; i < in.nRails; ++i)
      x.sample(m.name, railLabels(process, in.rails[i]), m.value(in.rails[i]));
  }
  x.family("nccl_autopilot_rail_throughput_bytes_per_second", "gauge",
           "Bytes moved on the rail per second over the profiler's last interval.");
  for (size_t i = 0; i < in.nRails; ++i) {
    const telemetry::RailSnapshot& r = in.rails[i];
    double v = size_t(r.id) < in.nRailThroughput ? in.railThroughput[r.id] : 0.0;
    x.sample("nccl_autopilot_rail_throughput_bytes_per_second", railLabels(process, r), v);
  }
  x.family("nccl_autopilot_rail_state", "gauge", "Rail state (1 for the current state).");
  for (size_t i = 0; i < in.nRails; ++i) {
    const telemetry::RailSnapshot& r = in.rails[i];
    for (int s = 0; s < telemetry::kNumRailStates; ++s) {
      auto state = telemetry::RailState(s);
      x.sample("nccl_autopilot_rail_state",
               railLabels(process, r) + "," + label("state", telemetry::railStateName(state)),
               r.state == state ? 1.0 : 0.0);
    }
  }
  return x.take();
}

}  // namespace autopilot::profiler

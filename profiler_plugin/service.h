// The profiler's service thread ("ap-profiler"): everything that is not the hot path.
//
// Every NCCL_AUTOPILOT_PROFILER_INTERVAL_MS it drains each live communicator's queue of
// completed collectives into per-(context, arm) statistics and change-point detectors (a shift
// is announced on the measurement bus and journalled), samples the rail telemetry (bandwidth
// and its own change-point detector per rail), reads the event journal, frees collectives
// that never completed, streams the trace and the Inspector JSON lines, and rewrites the
// Prometheus file every NCCL_AUTOPILOT_PROM_INTERVAL_MS.
//
// The thread exists while at least one communicator is attached: started by the first attach,
// joined by the last detach, or at exit() or dlclose() when NCCL never finalized (the
// destructor; exports are completed then). It takes one mutex (mu_), never touched by the event
// callbacks; attach/detach also hold lifecycleMu_ (taken first) so that joining the thread never
// races with starting a new one. A forked child inherits neither the thread nor the parent's
// communicators: it never writes their exports (common/service_thread.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/event_journal.h"
#include "common/rail_telemetry.h"
#include "common/service_thread.h"
#include "profiler_plugin/arrival_exchange.h"
#include "profiler_plugin/collective_stats.h"
#include "profiler_plugin/context.h"
#include "profiler_plugin/inspector_writer.h"
#include "profiler_plugin/rail_monitor.h"
#include "profiler_plugin/trace_writer.h"

namespace autopilot::profiler {

struct LatencyShiftEvent {
  uint64_t atNs = 0;
  ArmKey key;
  double ratio = 1.0;
  double baselineUs = 0.0;
};

// Service-side state of one communicator.
struct ContextState {
  explicit ContextState(int nRanks) : stats(nRanks) {}
  CollectiveStats stats;
  std::unique_ptr<TraceWriter> trace;
  std::unique_ptr<InspectorWriter> inspector;
  std::deque<LatencyShiftEvent> shifts;  // the latest kMaxShifts, for the summary
  uint64_t attachedAtNs = 0;
  // The communicator's `comm` label in the Prometheus file: its commName, or "comm<k>" for the
  // k-th communicator this process attached (stable across restarts of the same job).
  std::string label;
  // The arrival exchange (nullptr when off or impossible) and what the exports show of it,
  // refreshed at each Prometheus rewrite.
  std::unique_ptr<ArrivalExchange> arrivals;
  ArrivalReport arrivalReport;
  ExchangeCounters arrivalCounters;
  static constexpr size_t kMaxShifts = 64;
};

class ProfilerService {
 public:
  static ProfilerService& instance();
  ~ProfilerService();

  // init: opens the context's exports and starts the thread if it is the first.
  void attach(ProfilerContext* ctx);
  // finalize: last drain, Prometheus rewrite, exports closed, summary logged; joins the thread
  // after the last communicator.
  void detach(ProfilerContext* ctx);
  // Runs one service round now, on the calling thread (tests and benchmarks).
  void runOnce();
  bool threadRunning();

 private:
  ProfilerService();
  static void prepareFork();
  static void parentAfterFork();
  static void childAfterFork();
  void threadMain();
  void roundLocked(uint64_t nowNs, bool forcePrometheus);
  void drainLocked(ProfilerContext* ctx, uint64_t nowNs);
  void railsLocked(uint64_t nowNs);
  void journalLocked();
  void writePrometheusLocked();
  // The last communicator left (or the process exits): the file goes, unless
  // NCCL_AUTOPILOT_PROM_KEEP asks to keep it.
  void retirePrometheusLocked();
  std::string labelFor(const ProfilerContext& ctx) const;
  void summaryLocked(const ProfilerContext& ctx, uint64_t nowNs);
  void stopThread(std::unique_lock<std::mutex>& lifecycle);

  std::mutex lifecycleMu_;  // taken before mu_
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopRequested_ = false;
  ServiceThread thread_;

  std::vector<ProfilerContext*> live_;
  RailMonitor rails_;
  std::vector<RailSample> railSamples_;
  std::vector<double> railThroughput_;  // per rail id
  uint64_t journalCursor_ = 0;
  std::deque<journal::Event> recentJournal_;  // for the summary's "what happened around then"
  static constexpr size_t kRecentJournal = 512;
  uint64_t lastPrometheusNs_ = 0;
  uint64_t promWriteErrors_ = 0;
  uint64_t journalMissed_ = 0;  // events overwritten before this thread read them
  // Journal events read, per (source, kind): a few dozen kinds exist, so this stays small.
  std::map<std::pair<int, std::string>, uint64_t> eventCounts_;
  uint64_t traceFilesFailed_ = 0;      // of communicators that left
  uint64_t inspectorFilesFailed_ = 0;  // of communicators that left
  uint64_t attached_ = 0;              // communicators attached since the library loaded
  int processRank_ = 0;                // the rank of the communicator that opened the file
  double startTimeSeconds_ = 0;        // wall clock at load
  std::string prometheusPath_;
};

}  // namespace autopilot::profiler

#include "profiler_plugin/service.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <set>

#include "autopilot_version.h"
#include "common/clock.h"
#include "common/comm_tag.h"
#include "common/log.h"
#include "common/measurement_bus.h"
#include "common/params.h"
#include "common/safe_file.h"
#include "profiler_plugin/events.h"
#include "profiler_plugin/export_util.h"
#include "profiler_plugin/nccl_names.h"
#include "profiler_plugin/prometheus_export.h"
#include "tuner_plugin/tuner_service.h"

namespace autopilot::profiler {
namespace {

constexpr unsigned long kFlags = abi::subsys::kProfile;

params::IntParam gIntervalMs(
    "NCCL_AUTOPILOT_PROFILER_INTERVAL_MS", 50, 1, 60000,
    "Period of the profiler's service thread: aggregation, change-point detection, rail "
    "sampling, streaming of the trace and Inspector exports.");
params::IntParam gStaleMs(
    "NCCL_AUTOPILOT_PROFILER_STALE_MS", 30000, 100, 86400000,
    "A collective still waiting for kernel-channel or proxy events this long after NCCL stopped "
    "it is freed and counted as reclaimed.");
params::BoolParam gSummary(
    "NCCL_AUTOPILOT_PROFILER_SUMMARY", true,
    "Log a summary at each communicator's finalize (INFO, PROFILE subsystem): slowest "
    "contexts, rail health, latency shifts and what coincided with them.");
params::StringParam gTraceFile(
    "NCCL_AUTOPILOT_TRACE_FILE", "",
    "Chrome/Perfetto trace (JSON) per communicator; empty = off. %r rank, %c communicator tag "
    "(a hash of its commId), %p pid, %h host name, %j job name.");
params::IntParam gTraceMaxEvents("NCCL_AUTOPILOT_TRACE_MAX_EVENTS", 1000000, 1000, 1000000000,
                                 "Events written per trace file; later ones are counted only.");
params::StringParam gInspectorFile(
    "NCCL_AUTOPILOT_INSPECTOR_FILE", "",
    "NCCL Inspector-compatible JSON lines, one per collective, per communicator; empty = off. "
    "Same % fields as the trace.");
params::IntParam gInspectorMaxRecords(
    "NCCL_AUTOPILOT_INSPECTOR_MAX_RECORDS", 1000000, 1000, 1000000000,
    "Collectives written per Inspector JSON file; later ones are counted only.");
params::StringParam gPromFile(
    "NCCL_AUTOPILOT_PROM_FILE", "",
    "Prometheus text file for node_exporter's textfile collector, one per process (use %r, the "
    "process's rank in its first communicator, so that a restarted job rewrites its own file, "
    "%j where several jobs share a node, and the .prom extension); empty = off.");
params::IntParam gPromIntervalMs("NCCL_AUTOPILOT_PROM_INTERVAL_MS", 10000, 100, 3600000,
                                 "Rewrite period of the Prometheus file.");
params::StringParam gJobName(
    "NCCL_AUTOPILOT_JOB_NAME", "",
    "A name for the job, the same in each of its runs: the job_name label of every Prometheus "
    "series, and %j in export paths. Set it, with %j in NCCL_AUTOPILOT_PROM_FILE, where several "
    "jobs share a node (their ranks would otherwise share file names and series). Empty: no "
    "label, and %j is 'job'.");
params::BoolParam gPromKeep(
    "NCCL_AUTOPILOT_PROM_KEEP", false,
    "Keep the Prometheus file after the process's last communicator is finalized (to read the "
    "final values after the job). 0 removes it then: a stale file would duplicate the series of "
    "the job's next run.");

std::string hexId(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(id));
  return buf;
}

std::string armName(const ArmKey& k) {
  return std::string(funcName(k.func)) + " " + humanBytes(k.bucketBytes()) + "+ " +
         algoName(k.algo) + "/" + protoName(k.proto);
}

uint64_t wallClockUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000ull + uint64_t(ts.tv_nsec) / 1000;
}

// A path already used by another live communicator of this process gets the communicator id
// inserted before its extension, so two communicators never write into one file.
std::string uniquePath(std::string path, uint64_t commId, std::set<std::string>* used) {
  if (used->count(path)) {
    size_t slash = path.rfind('/');
    size_t dot = path.rfind('.');
    size_t at =
        dot != std::string::npos && (slash == std::string::npos || dot > slash) ? dot : path.size();
    path.insert(at, "-" + commTag(commId));
  }
  used->insert(path);
  return path;
}

bool gpuClockOf(const ProfilerContext& ctx) {
  return ctx.clockRule.clock() == int(bus::DurationClock::kGpu);
}

}  // namespace

ProfilerService& ProfilerService::instance() {
  static ProfilerService service;
  return service;
}

ProfilerService::ProfilerService() {
  // What the thread and the destructor use is built first, so it is destroyed after this object
  // (statics are destroyed in reverse order of construction), i.e. after the join.
  ContextRegistry::instance();
  // Also the channel thread of the arrival exchange; and built first, its fork handlers run after
  // ours, which takes the locks in the order attach/detach do (ours, then the channel's).
  tuner::TunerService::construct();
  bus::MeasurementBus::instance();
  journal::EventJournal::instance();
  telemetry::RailRegistry::instance();
  registerForkHandlers({&prepareFork, &parentAfterFork, &childAfterFork});
  for (const journal::KnownKind& k : journal::kKnownKinds)
    eventCounts_[{int(k.source), k.kind}] = 0;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  startTimeSeconds_ = double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

ProfilerService::~ProfilerService() {
  // exit() or dlclose() with communicators NCCL never finalized: stop the thread and close the
  // exports so the files are complete.
  std::unique_lock<std::mutex> lifecycle(lifecycleMu_);
  stopThread(lifecycle);
  std::lock_guard<std::mutex> lock(mu_);
  for (ProfilerContext* ctx : live_) {
    if (!ctx->state) continue;
    ctx->state->arrivals.reset();
    drainLocked(ctx, monotonicNs());
    if (ctx->state->trace) ctx->state->trace->close();
    if (ctx->state->inspector) ctx->state->inspector->close();
  }
  if (!live_.empty()) {
    writePrometheusLocked();
    retirePrometheusLocked();
  }
  live_.clear();
}

// fork(): the locks are taken so none is copied into the child held, and the exports' buffers
// are flushed so that the child's exit() (which flushes every stdio stream) writes nothing of
// the parent's into the parent's files.
void ProfilerService::prepareFork() {
  ProfilerService& s = instance();
  s.lifecycleMu_.lock();
  s.mu_.lock();
  for (ProfilerContext* ctx : s.live_) {
    if (!ctx->state) continue;
    if (ctx->state->trace) ctx->state->trace->flush();
    if (ctx->state->inspector) ctx->state->inspector->flush();
  }
}

void ProfilerService::parentAfterFork() {
  ProfilerService& s = instance();
  s.mu_.unlock();
  s.lifecycleMu_.unlock();
}

void ProfilerService::childAfterFork() {
  ProfilerService& s = instance();
  s.thread_.forgetAfterFork();
  s.stopRequested_ = false;
  // The copied condition variable still counts the parent's thread as a waiter, and destroying
  // it (at the child's exit) would wait for that thread forever: start from a fresh one.
  new (&s.wake_) std::condition_variable();
  for (ProfilerContext* ctx : s.live_) {
    if (!ctx->state) continue;
    if (ctx->state->trace) ctx->state->trace->abandon();
    if (ctx->state->inspector) ctx->state->inspector->abandon();
    if (ctx->state->arrivals) ctx->state->arrivals->abandon();
  }
  s.live_.clear();  // a finalize of an inherited communicator in the child then does nothing
  s.prometheusPath_.clear();
  s.mu_.unlock();
  s.lifecycleMu_.unlock();
}

void ProfilerService::attach(ProfilerContext* ctx) {
  std::unique_lock<std::mutex> lifecycle(lifecycleMu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto state = std::make_unique<ContextState>(ctx->nRanks);
    state->attachedAtNs = monotonicNs();
    std::set<std::string> used;
    for (ProfilerContext* other : live_) {
      if (other->state && other->state->trace) used.insert(other->state->trace->path());
      if (other->state && other->state->inspector) used.insert(other->state->inspector->path());
    }
    PathFields fields{ctx->rank, ctx->commId, gJobName.get()};
    if (!gTraceFile.get().empty()) {
      std::string path =
          uniquePath(expandPathPattern(gTraceFile.get(), fields), ctx->commId, &used);
      state->trace = TraceWriter::open(path, uint64_t(gTraceMaxEvents.get()), *ctx);
      if (state->trace)
        AP_INFO(kFlags, "profiler: trace of comm %s -> %s", hexId(ctx->commId).c_str(),
                path.c_str());
    }
    if (!gInspectorFile.get().empty()) {
      std::string path =
          uniquePath(expandPathPattern(gInspectorFile.get(), fields), ctx->commId, &used);
      state->inspector = InspectorWriter::open(path, uint64_t(gInspectorMaxRecords.get()), *ctx);
      if (state->inspector)
        AP_INFO(kFlags, "profiler: Inspector JSON lines of comm %s -> %s",
                hexId(ctx->commId).c_str(), path.c_str());
    }
    state->label = labelFor(*ctx);
    state->arrivals =
        makeArrivalExchange(ctx->commId, state->label, ctx->rank, ctx->nRanks, ctx->nNodes);
    ++attached_;
    if (prometheusPath_.empty() && !gPromFile.get().empty()) {
      prometheusPath_ = expandPathPattern(gPromFile.get(), fields);
      processRank_ = ctx->rank;  // what %r gave the path
      AP_INFO(kFlags, "profiler: Prometheus metrics -> %s every %lld ms", prometheusPath_.c_str(),
              static_cast<long long>(gPromIntervalMs.get()));
    }
    ctx->state = std::move(state);
    if (live_.empty()) journalCursor_ = journal::EventJournal::instance().lastSeq();
    live_.push_back(ctx);
    if (thread_.running()) return;
    stopRequested_ = false;
  }
  if (!thread_.start("ap-profiler", [this] { threadMain(); })) {
    AP_WARN(kFlags,
            "profiler: no service thread: collectives are measured but exports and "
            "aggregation wait for finalize");
  }
}

void ProfilerService::detach(ProfilerContext* ctx) {
  std::unique_lock<std::mutex> lifecycle(lifecycleMu_);
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(live_.begin(), live_.end(), ctx);
    if (it == live_.end()) return;
    uint64_t now = monotonicNs();
    // Copy-engine collectives still copying at finalize are exported untimed.
    pollCopyEngine(ctx, now, 0);
    drainLocked(ctx, now);
    journalLocked();
    writePrometheusLocked();  // the communicator's final values, before it leaves the file
    live_.erase(it);
    if (ctx->state) ctx->state->arrivals.reset();
    if (ctx->state) {
      if (gSummary.get()) summaryLocked(*ctx, now);
      if (ctx->state->trace) {
        ctx->state->trace->close();
        if (ctx->state->trace->dropped() > 0) {
          AP_INFO(kFlags,
                  "profiler: trace %s reached NCCL_AUTOPILOT_TRACE_MAX_EVENTS; %llu later "
                  "events were not written",
                  ctx->state->trace->path().c_str(),
                  static_cast<unsigned long long>(ctx->state->trace->dropped()));
        }
      }
      if (ctx->state->inspector) ctx->state->inspector->close();
      if (ctx->state->trace && ctx->state->trace->failed()) ++traceFilesFailed_;
      if (ctx->state->inspector && ctx->state->inspector->failed()) ++inspectorFilesFailed_;
    }
    last = live_.empty();
    if (last) retirePrometheusLocked();
  }
  if (last) stopThread(lifecycle);
}

std::string ProfilerService::labelFor(const ProfilerContext& ctx) const {
  std::string label = ctx.name.empty() ? "comm" + std::to_string(attached_) : ctx.name;
  // Two live communicators of this process under one name (and rank) would give one series
  // two values: the later one is told apart by its creation order.
  for (const ProfilerContext* other : live_) {
    if (other->state && other->state->label == label && other->rank == ctx.rank) {
      return label + "#" + std::to_string(attached_);
    }
  }
  return label;
}

void ProfilerService::retirePrometheusLocked() {
  if (prometheusPath_.empty()) return;
  if (!gPromKeep.get() && ::unlink(prometheusPath_.c_str()) != 0 && errno != ENOENT) {
    AP_WARN(kFlags, "profiler: cannot remove the Prometheus file %s: %s", prometheusPath_.c_str(),
            std::strerror(errno));
  }
  prometheusPath_.clear();
}

void ProfilerService::stopThread(std::unique_lock<std::mutex>& lifecycle) {
  (void)lifecycle;  // held by the caller: no attach can start a thread meanwhile
  if (!thread_.running()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopRequested_ = true;
  }
  wake_.notify_all();
  // A round is bounded (one queue's worth per communicator); a thread that has not returned
  // after this long is stuck, and finalize, exit or dlclose must not wait on it any longer.
  thread_.join(std::chrono::milliseconds(2000));
}

bool ProfilerService::threadRunning() {
  std::lock_guard<std::mutex> lifecycle(lifecycleMu_);
  return thread_.running();
}

void ProfilerService::runOnce() {
  std::lock_guard<std::mutex> lock(mu_);
  roundLocked(monotonicNs(), true);
}

void ProfilerService::threadMain() {
  std::unique_lock<std::mutex> lock(mu_);
  auto period = std::chrono::milliseconds(gIntervalMs.get());
  while (!stopRequested_) {
    wake_.wait_for(lock, period, [this] { return stopRequested_; });
    if (stopRequested_) break;
    try {
      roundLocked(monotonicNs(), false);
    } catch (const std::exception& e) {
      AP_WARN_ONCE(kFlags, "profiler service round failed: %s (measurements continue)", e.what());
    } catch (...) {
      AP_WARN_ONCE(kFlags, "profiler service round failed (measurements continue)");
    }
  }
}

void ProfilerService::roundLocked(uint64_t nowNs, bool forcePrometheus) {
  for (ProfilerContext* ctx : live_) {
    // Copy-engine collectives first, so the ones that finished are exported this round.
    pollCopyEngine(ctx, nowNs, uint64_t(gStaleMs.get()) * 1000000ull);
    drainLocked(ctx, nowNs);
    size_t reclaimed = reclaimStale(ctx, nowNs, uint64_t(gStaleMs.get()) * 1000000ull);
    if (reclaimed > 0) {
      AP_WARN_ONCE(kFlags,
                   "profiler: comm %s: %zu collective(s) never received all their kernel-channel "
                   "events and were freed after %lld ms (their durations are lost)",
                   hexId(ctx->commId).c_str(), reclaimed, static_cast<long long>(gStaleMs.get()));
    }
  }
  railsLocked(nowNs);
  journalLocked();
  for (ProfilerContext* ctx : live_) {
    if (!ctx->state) continue;
    if (ctx->state->trace) ctx->state->trace->flush();
    if (ctx->state->inspector) ctx->state->inspector->flush();
  }
  if (!prometheusPath_.empty() &&
      (forcePrometheus ||
       nowNs - lastPrometheusNs_ >= uint64_t(gPromIntervalMs.get()) * 1000000ull)) {
    writePrometheusLocked();
    lastPrometheusNs_ = nowNs;
  }
}

void ProfilerService::drainLocked(ProfilerContext* ctx, uint64_t nowNs) {
  ContextState* st = ctx->state.get();
  if (st == nullptr) return;
  bool gpu = gpuClockOf(*ctx);
  uint64_t wallUs = wallClockUs();
  CompletedColl c;
  // At most one queue's worth per round, so a flood cannot keep the thread here.
  for (size_t n = ctx->completed.capacity(); n > 0 && ctx->completed.pop(&c); --n) {
    if (st->trace) st->trace->collective(c, gpu && c.gpuTimed);
    if (st->inspector) st->inspector->record(c, gpu, wallUs);
    if (gpu && !c.gpuTimed) continue;  // the communicator's clock is the GPU's; this has none
    uint64_t durationNs = gpu ? c.gpuEndNs - c.gpuStartNs : c.hostEndNs - c.hostStartNs;
    if (st->arrivals) st->arrivals->recordArrival(c.func, c.seqNumber, c.hostStartNs, durationNs);
    ArmShift shift;
    if (!st->stats.add(c.func, c.algo, c.proto, c.nBytes, durationNs, c.hostEndNs, &shift)) {
      continue;
    }
    LatencyShiftEvent e;
    e.atNs = shift.atNs;
    e.key = shift.key;
    e.ratio = shift.shift.ratio;
    e.baselineUs = shift.shift.baseline / 1e3;
    st->shifts.push_back(e);
    if (st->shifts.size() > ContextState::kMaxShifts) st->shifts.pop_front();
    bus::ShiftNotice notice;
    notice.atNs = shift.atNs;
    notice.func = shift.key.func;
    notice.nBytes = shift.key.bucketBytes();
    notice.algo = shift.key.algo;
    notice.proto = shift.key.proto;
    notice.ratio = shift.shift.ratio;
    bus::MeasurementBus::instance().reportShift(ctx->commId, notice);
    journal::EventJournal::instance().record(
        journal::Source::kProfiler, ctx->commId, -1, "latency_shift",
        "rank %d %s x%.2f (%.1f us -> %.1f us)", ctx->rank, armName(shift.key).c_str(),
        shift.shift.ratio, e.baselineUs, e.baselineUs * shift.shift.ratio);
  }
  TraceSpan s;
  for (size_t n = ctx->spans.capacity(); n > 0 && ctx->spans.pop(&s); --n) {
    if (st->trace) st->trace->span(s);
  }
  (void)nowNs;
}

void ProfilerService::railsLocked(uint64_t nowNs) {
  telemetry::RailSnapshot snap[telemetry::kMaxRails];
  size_t n = telemetry::RailRegistry::instance().snapshot(snap, telemetry::kMaxRails, nowNs);
  rails_.update(snap, n, nowNs, &railSamples_);
  for (const RailSample& s : railSamples_) {
    if (size_t(s.rail) >= railThroughput_.size()) railThroughput_.resize(size_t(s.rail) + 1, 0.0);
    railThroughput_[size_t(s.rail)] = s.throughputBytesPerSec;
    const char* name = snap[0].identity.name;
    for (size_t i = 0; i < n; ++i) {
      if (snap[i].id == s.rail) name = snap[i].identity.name;
    }
    for (ProfilerContext* ctx : live_) {
      if (ctx->state && ctx->state->trace && (s.throughputBytesPerSec > 0 || s.stateChanged)) {
        ctx->state->trace->railCounter(name, s.throughputBytesPerSec / 1e6, nowNs);
      }
    }
    if (!s.shift.fired) continue;
    journal::EventJournal::instance().record(journal::Source::kProfiler, 0, s.rail, "rail_bw_shift",
                                             "rail %s bandwidth x%.2f (%.0f -> %.0f MB/s)", name,
                                             s.shift.ratio, s.shift.baseline / 1e6,
                                             s.shift.baseline * s.shift.ratio / 1e6);
    bus::ShiftNotice notice;
    notice.atNs = nowNs;
    notice.rail = s.rail;
    notice.ratio = s.shift.ratio;
    for (ProfilerContext* ctx : live_)
      bus::MeasurementBus::instance().reportShift(ctx->commId, notice);
  }
}

void ProfilerService::journalLocked() {
  journal::Event events[64];
  size_t n;
  uint64_t expected = journalCursor_ + 1;
  while ((n = journal::EventJournal::instance().readSince(&journalCursor_, events, 64)) > 0) {
    if (events[0].seq > expected) journalMissed_ += events[0].seq - expected;
    expected = journalCursor_ + 1;
    for (size_t i = 0; i < n; ++i) {
      const journal::Event& e = events[i];
      ++eventCounts_[{int(e.source), std::string(e.kind, strnlen(e.kind, sizeof(e.kind)))}];
      recentJournal_.push_back(e);
      if (recentJournal_.size() > kRecentJournal) recentJournal_.pop_front();
      for (ProfilerContext* ctx : live_) {
        if (!ctx->state || !ctx->state->trace || (e.commId != 0 && e.commId != ctx->commId)) {
          continue;
        }
        std::string category = std::string("autopilot.") + journal::sourceName(e.source);
        ctx->state->trace->instant(category.c_str(), e.kind, e.detail, e.timeNs);
      }
    }
  }
}

void ProfilerService::writePrometheusLocked() {
  if (prometheusPath_.empty()) return;
  telemetry::RailSnapshot snap[telemetry::kMaxRails];
  PrometheusInput in;
  in.hostname = hostName();
  in.version = AUTOPILOT_VERSION_STRING;
  in.jobName = gJobName.get();
  in.processRank = processRank_;
  in.startTimeSeconds = startTimeSeconds_;
  in.losses.prometheusWriteErrors = promWriteErrors_;
  in.losses.traceFilesFailed = traceFilesFailed_;
  in.losses.inspectorFilesFailed = inspectorFilesFailed_;
  in.losses.journalOverwritten = journalMissed_;
  for (const auto& [key, count] : eventCounts_) {
    in.events.push_back({journal::sourceName(journal::Source(key.first)), key.second, count});
  }
  for (ProfilerContext* ctx : live_) {
    in.contexts.push_back(ctx);
    if (!ctx->state) continue;
    if (ctx->state->arrivals) {
      ctx->state->arrivalReport = ctx->state->arrivals->report();
      ctx->state->arrivalCounters = ctx->state->arrivals->counters();
    }
    if (ctx->state->trace && ctx->state->trace->failed()) ++in.losses.traceFilesFailed;
    if (ctx->state->inspector && ctx->state->inspector->failed()) ++in.losses.inspectorFilesFailed;
  }
  in.nRails =
      telemetry::RailRegistry::instance().snapshot(snap, telemetry::kMaxRails, monotonicNs());
  in.rails = snap;
  in.railThroughput = railThroughput_.data();
  in.nRailThroughput = railThroughput_.size();
  std::string error;
  if (!writeFileAtomically(prometheusPath_, renderPrometheus(in), &error)) {
    ++promWriteErrors_;
    AP_WARN_ONCE(kFlags,
                 "profiler: cannot write the Prometheus file: %s (later failures are "
                 "counted, not logged)",
                 error.c_str());
  }
}

void ProfilerService::summaryLocked(const ProfilerContext& ctx, uint64_t nowNs) {
  const ContextState& st = *ctx.state;
  const ContextCounters& c = ctx.counters;
  auto rel = [&](uint64_t t) { return (double(t) - double(st.attachedAtNs)) / 1e9; };
  const int clock = ctx.clockRule.clock();
  AP_INFO(kFlags,
          "profiler summary: comm %s '%s' rank %d/%d: %llu collectives completed in %.1f s, "
          "%llu published to the tuner (%s clock); dropped: %llu pool-full, %llu queue-full, "
          "%llu bus-full, %llu other-clock, %llu reclaimed",
          hexId(ctx.commId).c_str(), ctx.name.c_str(), ctx.rank, ctx.nRanks,
          static_cast<unsigned long long>(c.collCompleted.load()), rel(nowNs),
          static_cast<unsigned long long>(c.busPublished.load()),
          clock < 0                                ? "no"
          : clock == int(bus::DurationClock::kGpu) ? "GPU"
                                                   : "host",
          static_cast<unsigned long long>(c.collPoolFull.load() + c.childPoolFull.load()),
          static_cast<unsigned long long>(c.completedQueueFull.load() + c.traceQueueFull.load()),
          static_cast<unsigned long long>(c.busRejected.load()),
          static_cast<unsigned long long>(c.otherClock.load()),
          static_cast<unsigned long long>(c.reclaimed.load()));
  auto arms = st.stats.byTotalTime();
  for (size_t i = 0; i < arms.size() && i < 5; ++i) {
    const ArmStats& a = *arms[i];
    AP_INFO(kFlags,
            "profiler summary:   slowest #%zu %s: %llu calls, %.3f s total, mean %.1f us "
            "(min %.1f, max %.1f), busbw %.2f GB/s, %llu latency shift(s)",
            i + 1, armName(a.key).c_str(), static_cast<unsigned long long>(a.count), a.sumUs / 1e6,
            a.meanUs(), a.minUs, a.maxUs, a.busBwGbs(), static_cast<unsigned long long>(a.shifts));
  }
  telemetry::RailSnapshot snap[telemetry::kMaxRails];
  size_t n = telemetry::RailRegistry::instance().snapshot(snap, telemetry::kMaxRails, nowNs);
  for (size_t i = 0; i < n; ++i) {
    const telemetry::RailSnapshot& r = snap[i];
    AP_INFO(kFlags,
            "profiler summary:   rail %s (%s): %s, sent %s, received %s, bandwidth %.0f MB/s, "
            "failovers %llu, recoveries %llu, bandwidth shifts %llu",
            r.identity.name, r.identity.transport, telemetry::railStateName(r.state),
            humanBytes(r.bytesSent).c_str(), humanBytes(r.bytesReceived).c_str(),
            double(r.bandwidthBytesPerSec) / 1e6, static_cast<unsigned long long>(r.failovers),
            static_cast<unsigned long long>(r.recoveries),
            static_cast<unsigned long long>(rails_.shifts(r.id)));
  }
  // For each latency jump: what this rank saw around it. A collective is as slow as its
  // slowest participant, so when none of this rank's rails changed, the cause is elsewhere.
  constexpr uint64_t kWindowNs = 5000000000ull;
  for (const LatencyShiftEvent& e : st.shifts) {
    std::string around;
    for (const journal::Event& j : recentJournal_) {
      bool near = j.timeNs + kWindowNs >= e.atNs && j.timeNs <= e.atNs + kWindowNs;
      if (!near || std::strcmp(j.kind, "latency_shift") == 0) continue;
      if (j.commId != 0 && j.commId != ctx.commId) continue;
      char buf[200];
      std::snprintf(buf, sizeof(buf), "%s%s %s '%s' at %+.1f s", around.empty() ? "" : "; ",
                    journal::sourceName(j.source), j.kind, j.detail, rel(j.timeNs));
      around += buf;
    }
    if (around.empty()) {
      around =
          "no rail or plugin event on this rank within 5 s: the slow part is likely another "
          "rank or the fabric beyond this host";
    }
    AP_INFO(kFlags,
            "profiler summary:   latency %s %s x%.2f (%.1f us -> %.1f us) at %+.1f s "
            "on rank %d: %s",
            e.ratio >= 1 ? "jump" : "drop", armName(e.key).c_str(), e.ratio, e.baselineUs,
            e.baselineUs * e.ratio, rel(e.atNs), ctx.rank, around.c_str());
  }
}

}  // namespace autopilot::profiler

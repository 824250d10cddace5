// `autopilot demo`: the main job. A GPU-free mini-cluster on this machine shows the closed loop
// (net + profiler + tuner plugins) against a static configuration through a scripted scenario:
// healthy, one rail degraded, the rail failed, the rail healed.
//
// N rank processes (default 4), each in its own network namespace with one veth NIC per rail
// when root (real rate limits with tc tbf, real link failures), load the three plugins exactly
// as NCCL does and run all-reduce, all-gather, reduce-scatter and broadcast on host buffers
// (bench/demo/rank.cc). The static mode is what stock NCCL with an equal-split transport would
// do: NCCL's own choices, equal split over the rails, no failover.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cli_args.h"
#include "bench/commands.h"
#include "bench/demo/cluster.h"
#include "bench/demo/collectives.h"
#include "bench/demo/orchestrator.h"
#include "bench/demo/report.h"
#include "common/clock.h"

namespace autopilot::demo {
namespace {

// Ctrl-C or a kill: the demo unwinds, so that the rank processes are reaped and the network
// namespaces, veth links and qdiscs it created are removed (destructors), instead of being left
// for the next run to clean up.
std::atomic<bool> gInterrupted{false};
struct Interrupted {};
void onSignal(int) { gInterrupted.store(true); }
void checkInterrupted() {
  if (gInterrupted.load()) throw Interrupted{};
}

struct DemoOptions {
  int ranks = 4;
  int rails = 3;
  int railMbit = 250;
  int degradedMbit = 25;
  double phaseSeconds = 7.0;
  double warmupSeconds = 4.0;
  double stallSeconds = 4.0;
  std::string sizes = "262144,1048576,4194304";
  std::string mode = "both";
  std::string outDir = "demo-out";
  std::string json;
  bool quick = false;
  bool noNetns = false;
  bool plot = true;
};

// The scenario. The warm-up is excluded from the comparison, as nccl-tests excludes its warm-up
// iterations: connections are set up and the tuner takes its first measurements there.
enum PhaseId { kWarmup = 0, kHealthy, kDegraded, kFailed, kHealed, kNumPhases };
const char* kPhaseNames[kNumPhases] = {"warm-up", "healthy", "degraded", "failed", "healed"};
constexpr int kFaultRail = 1;
// A job that has completed nothing for this long when a phase should change is held in its
// phase until its next completion or the stall verdict (runJob). Any value is safe (a hold only
// delays the change); small enough that a job stopped by a fault is always caught.
constexpr double kHoldSeconds = 0.25;

double phaseStart(const DemoOptions& o, int p) {
  return p == kWarmup ? 0.0 : o.warmupSeconds + (p - kHealthy) * o.phaseSeconds;
}
double phaseEnd(const DemoOptions& o, int p) {
  return p == kWarmup ? o.warmupSeconds : phaseStart(o, p) + o.phaseSeconds;
}
int phaseAt(const DemoOptions& o, double s) {
  for (int p = kNumPhases - 1; p > kWarmup; --p) {
    if (s >= phaseStart(o, p)) return p;
  }
  return kWarmup;
}

// The largest collective --sizes accepts: each rank holds a few buffers of up to nRanks times
// this (all-gather), and the demo is meant for one machine.
constexpr size_t kMaxCollectiveBytes = size_t(1) << 30;

// Returns the exit code when the command should stop here (--help, a bad command line).
std::optional<int> parse(int argc, char** argv, DemoOptions* o) {
  cli::Args args(
      "autopilot demo",
      "The main job: a GPU-free mini-cluster on this machine runs the closed loop (net +\n"
      "profiler + tuner plugins) and a static configuration through healthy, degraded,\n"
      "failed and healed phases, and compares them.");
  args.addInt("--ranks", o->ranks, 2, 16, "rank processes");
  args.addInt("--rails", o->rails, 2, 8, "rails (NICs) per rank");
  args.addInt("--rail-mbit", o->railMbit, 1, 1000000, "line rate of each rail, Mbit/s");
  args.addInt("--degraded-mbit", o->degradedMbit, 1, 1000000, "rate of the degraded rail, Mbit/s");
  args.addReal("--phase-seconds", o->phaseSeconds, cli::Interval::positive(),
               "length of each phase");
  args.addReal("--warmup-seconds", o->warmupSeconds, cli::Interval::atLeast(0),
               "warm-up before the compared phases");
  args.addIntList("--sizes", o->sizes, 1, kMaxCollectiveBytes,
                  "collective sizes in bytes, comma-separated")
      .showDefault();
  args.addChoice("--mode", o->mode, {"both", "closed", "static"},
                 "closed loop, static configuration, or both");
  args.addText("--out", o->outDir, "trace, plot, logs").typeName("DIR").showDefault();
  args.addText("--json", o->json, "the phase table as JSON").typeName("FILE");
  args.addFlag("--quick", o->quick, "short run for tests (2.5 s phases, small sizes)");
  args.addFlag("--no-netns", o->noNetns,
               "loopback rails paced inside the plugin, faults simulated (as without root)");
  bool noPlot = false;
  args.addFlag("--no-plot", noPlot, "skip the PNG plot");
  if (std::optional<int> rc = args.parse(argc, argv)) return rc;
  o->plot = !noPlot;
  if (o->quick) {
    o->phaseSeconds = std::min(o->phaseSeconds, 2.5);
    o->warmupSeconds = std::min(o->warmupSeconds, 1.0);
    o->sizes = "65536,524288";
  }
  // A job that completes nothing for this long has stopped (TCP's retransmission backoff alone
  // can hold a slow rail for seconds; that is slowness, not a stop). Live jobs' longest gaps
  // between completions measured 0.1-0.2 s in --quick on a loaded 2-core machine (the JSON's
  // *_max_gap_s), but a rail failing right after it was rate-limited is detected only once its
  // queued bytes had time to drain at the slow rate it last measured, and beside a CPU hog the
  // closed loop went 2.5 s without a completion there. Phase changes wait for the verdict
  // (runJob), so it may exceed what is left of a phase; only a stopped job pays for its length.
  o->stallSeconds = std::max(6.0, o->phaseSeconds);
  return std::nullopt;
}

// Removes what an earlier run left in a mode's folder (logs, traces, metrics), so that the
// counters read back are this run's.
void clearOutputs(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    auto ends = [&](const char* suffix) {
      size_t n = std::strlen(suffix);
      return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
    };
    if (ends(".prom") || ends(".json") || ends(".log") || ends(".prom.tmp")) {
      unlink((dir + "/" + name).c_str());
    }
  }
  closedir(d);
}

// Faults, real (veth cluster: tc tbf, ip link) or simulated inside the plugin on loopback rails
// (NCCL_AUTOPILOT_FAULT_FILE, which every rank's plugin re-reads; clearly labelled SIMULATED).
class FaultControl {
 public:
  FaultControl(VethCluster* cluster, const DemoOptions& o) : cluster_(cluster), o_(o) {
    if (!cluster_) planPath_ = o_.outDir + "/simulated-faults.txt";
  }
  const std::string& planPath() const { return planPath_; }
  bool simulated() const { return cluster_ == nullptr; }

  void apply(int phase) {
    if (cluster_ == nullptr) {
      writePlan(phase);
      return;
    }
    switch (phase) {
      case kDegraded:
        cluster_->setRailRate(kFaultRail, o_.degradedMbit);
        break;
      case kFailed:
        cluster_->setRailUp(kFaultRail, false);
        break;
      case kHealed:
        cluster_->setRailUp(kFaultRail, true);
        cluster_->setRailRate(kFaultRail, 0);
        break;
      default:
        break;
    }
  }
  void reset() {
    if (cluster_ == nullptr) {
      writePlan(kHealthy);
    } else {
      apply(kHealed);
    }
  }
  std::string describe(int phase) const {
    std::string how = simulated() ? " (SIMULATED in the plugin)" : "";
    switch (phase) {
      case kDegraded:
        return "rail " + std::to_string(kFaultRail) + " rate-limited to " +
               std::to_string(o_.degradedMbit) + " Mbit/s" + (simulated() ? how : " (tc tbf)");
      case kFailed:
        return "rail " + std::to_string(kFaultRail) + " down" +
               (simulated() ? how : " (ip link set down)");
      case kHealed:
        return "rail " + std::to_string(kFaultRail) + " up again, full rate";
    }
    return "all rails healthy";
  }

 private:
  // Every rail paced at the line rate, the faulty one as the phase says. Written whole and
  // renamed into place, so a rank never reads half a plan.
  void writePlan(int phase) {
    std::string tmp = planPath_ + ".tmp";
    {
      std::ofstream f(tmp);
      for (int r = 0; r < o_.rails; ++r) {
        int rate = (r == kFaultRail && phase == kDegraded) ? o_.degradedMbit : o_.railMbit;
        f << "rail " << r << " rate " << rate << "\n";
      }
      if (phase == kFailed) f << "rail " << kFaultRail << " down\n";
    }
    std::rename(tmp.c_str(), planPath_.c_str());
  }

  VethCluster* cluster_;
  const DemoOptions& o_;
  std::string planPath_;
};

std::map<std::string, std::string> modeEnv(bool closedLoop, const VethCluster* cluster,
                                           const FaultControl& faults, const DemoOptions& o,
                                           const std::string& modeDir) {
  std::map<std::string, std::string> env{
      // The profiler's exports: a Perfetto trace per rank, and the Prometheus file from which
      // the demo reads the net plugin's rail counters (failovers, recoveries).
      {"NCCL_AUTOPILOT_TRACE_FILE", modeDir + "/trace-rank%r.json"},
      {"NCCL_AUTOPILOT_PROM_FILE", modeDir + "/metrics-%p.prom"},
      {"NCCL_AUTOPILOT_PROM_INTERVAL_MS", "250"},
      {"NCCL_NET_PLUGIN", "autopilot"},
      {"NCCL_TUNER_PLUGIN", "autopilot"},
      {"NCCL_PROFILER_PLUGIN", "autopilot"},
      // The ranks are separate "nodes" on one filesystem: the tuner's control channel uses its
      // private Unix socket, never the rails under test.
      {"NCCL_AUTOPILOT_COORDINATOR", "unix"},
  };
  if (cluster) {
    env["NCCL_AUTOPILOT_IFNAME"] = cluster->ifnameList();
  } else {
    std::string addrs;
    for (int r = 0; r < o.rails; ++r)
      addrs += (r ? ",127.0.0." : "127.0.0.") + std::to_string(r + 1);
    env["NCCL_AUTOPILOT_NET_ADDRS"] = addrs;
    env["NCCL_AUTOPILOT_FAULT_FILE"] = faults.planPath();
  }
  // The tuner's switch points are counted in calls; this workload calls it ~25 times a second
  // (NCCL jobs: thousands), so the lead between a policy change and its effect is scaled down.
  env["NCCL_AUTOPILOT_TUNER_SWAP_LEAD"] = "8";
  if (!closedLoop) {
    // What stock NCCL with an equal-split multi-rail transport does: NCCL's own choices,
    // equal split over the rails, no failover.
    env["NCCL_AUTOPILOT_TUNER_ENABLE"] = "0";
    env["NCCL_AUTOPILOT_NET_STRIPING"] = "equal";
    env["NCCL_AUTOPILOT_NET_FAILOVER"] = "0";
  }
  return env;
}

class Scenario {
 public:
  Scenario(const DemoOptions& o, VethCluster* cluster)
      : o_(o), cluster_(cluster), faults_(cluster, o) {
    for (int p = 0; p < kNumPhases; ++p) {
      phases_.push_back(Phase{kPhaseNames[p], phaseStart(o, p), phaseEnd(o, p)});
    }
  }

  ModeRecord run(bool closedLoop) {
    ModeRecord record(closedLoop ? "closed-loop" : "static", phases_, o_.ranks);
    faults_.reset();
    countedFailovers_ = countedRecoveries_ = 0;
    clearOutputs(o_.outDir + "/" + record.mode());
    double offset = 0;
    int startPhase = kWarmup;
    while (startPhase < kNumPhases) {
      int failedAt = runJob(closedLoop, &record, startPhase, &offset);
      if (failedAt < 0) break;
      // The job died (static mode has no failover). A real job would be restarted once the
      // network is repaired: wait for the healed phase and measure a restarted job there.
      if (closedLoop || failedAt >= kHealed) break;
      for (int p = failedAt + 1; p < kHealed; ++p) record.markFailed(kPhaseNames[p], "job stopped");
      double waitUntil = phaseStart(o_, kHealed);
      sleepUntil(waitUntil);
      faults_.apply(kHealed);
      record.markRestarted("healed");
      startPhase = kHealed;
      offset = waitUntil;
    }
    faults_.reset();
    return record;
  }

 private:
  void sleepUntil(double scenarioS) {
    for (;;) {
      checkInterrupted();
      double now = double(monotonicNs() - scenarioStartNs_) / 1e9 - shiftS_;
      if (scenarioS <= now) return;
      usleep(useconds_t(std::min(scenarioS - now, 0.1) * 1e6));
    }
  }

  // Runs one job from `startPhase` to the end of the scenario. Returns -1 when it finished, or
  // the phase in which it failed.
  int runJob(bool closedLoop, ModeRecord* record, int startPhase, double* offset) {
    JobSpec spec;
    spec.nRanks = o_.ranks;
    spec.commId = std::random_device{}() | (uint64_t(std::random_device{}()) << 32) | 1;
    spec.rails = o_.rails;
    spec.railMbit = o_.railMbit;
    spec.sizes = o_.sizes;
    spec.cluster = cluster_;
    spec.logDir = o_.outDir + "/" + record->mode();
    mkdir(spec.logDir.c_str(), 0755);
    spec.env = modeEnv(closedLoop, cluster_, faults_, o_, spec.logDir);
    Job job(spec);
    if (!job.waitReady(60000)) {
      std::fprintf(stderr, "\n[%s] setup failed: %s\n", record->mode().c_str(),
                   job.error().c_str());
      record->markFailed(kPhaseNames[startPhase], "setup failed: " + job.error());
      return startPhase;
    }
    job.go();
    const uint64_t t0 = monotonicNs();
    if (startPhase == kWarmup) {
      scenarioStartNs_ = t0;
      shiftS_ = 0;
    }
    record->startJob();
    // Scenario time of this job: `clock` + seconds since t0. `clock` moves back whenever a phase
    // change happens late (a fault applied by slow tc/ip commands, a transition held for a
    // verdict, below), so that every phase keeps its full length whatever the machine's load.
    double clock = *offset;
    auto scenarioNow = [&] { return clock + double(monotonicNs() - t0) / 1e9; };
    uint64_t maxIteration = 0;
    uint64_t lastProgress = t0;
    double lastStatus = -1;
    int phase = startPhase;
    bool ended = false;
    std::string lastArm;
    auto onIteration = [&](const wire::Iteration& it) {
      // A completion belongs at the latest to the phase in force when its report arrives;
      // after the end, to none.
      record->add(it, t0, clock, ended ? HUGE_VAL : phaseEnd(o_, phase) - 1e-6);
      maxIteration = std::max(maxIteration, it.iteration);
      lastProgress = monotonicNs();
      if (it.h.rank == 0) {
        lastArm = std::string(collectiveName(CollectiveKind(it.kind))) + " " +
                  std::to_string(it.tunerBytes >> 10) + "K " + algorithmName(Algorithm(it.algo)) +
                  "/" + protocolByIndex(it.proto).name;
      }
    };
    int failedAt = -1;
    const double end = phaseEnd(o_, kHealed);
    for (;;) {
      checkInterrupted();
      double s = scenarioNow();
      int want = s >= end ? kNumPhases : phaseAt(o_, s);
      // A phase change (or the end) waits while the job looks stuck: the next phase could
      // repair what stopped it (the healed phase does), and then a stopped job would pass for a
      // slow one. So the verdict "stopped" never races the phase clock: the transition happens
      // at the job's next completion, or the job is declared stopped in the phase it is in.
      double stalled = double(monotonicNs() - lastProgress) / 1e9;
      bool hold = phase < want && stalled >= kHoldSeconds;
      if (phase < want && !hold) {
        if (want == kNumPhases) break;
        while (phase < want) {
          countRailEvents(record, spec.logDir, phase);
          ++phase;
          std::fprintf(stderr, "\n[%s] t=%5.1fs  %s: %s\n", record->mode().c_str(),
                       phaseStart(o_, phase), kPhaseNames[phase], faults_.describe(phase).c_str());
          faults_.apply(phase);
        }
        // The phase starts once its fault is in place.
        double late = scenarioNow() - phaseStart(o_, phase);
        if (late > 0) {
          clock -= late;
          shiftS_ += late;
        }
        s = scenarioNow();
      }
      job.pump(50, onIteration);
      if (job.failed()) {
        record->markFailed(kPhaseNames[phase], job.error());
        std::fprintf(stderr, "\n[%s] t=%5.1fs  job failed: %s\n", record->mode().c_str(), s,
                     job.error().c_str());
        failedAt = phase;
        break;
      }
      stalled = double(monotonicNs() - lastProgress) / 1e9;
      if (stalled > o_.stallSeconds) {
        // Every phase change happened with the job live (held otherwise), so the phase in
        // force is where it stopped.
        char why[96];
        std::snprintf(why, sizeof(why), "stopped: no collective completed for %.1f s", stalled);
        record->markFailed(kPhaseNames[phase], why);
        std::fprintf(stderr, "\n[%s] t=%5.1fs  %s (in the %s phase)\n", record->mode().c_str(), s,
                     why, kPhaseNames[phase]);
        failedAt = phase;
        break;
      }
      if (s - lastStatus >= 0.5) {
        lastStatus = s;
        const PhaseStats& st = record->stats(kPhaseNames[phase]);
        double phaseElapsed = std::min(s, phaseEnd(o_, phase)) - phaseStart(o_, phase);
        std::fprintf(stderr, "\r[%s] t=%5.1fs %-8s iter %6llu  %6.3f Gbit/s  last %-32s",
                     record->mode().c_str(), s, kPhaseNames[phase],
                     static_cast<unsigned long long>(maxIteration),
                     st.gbps(std::max(0.1, phaseElapsed)), lastArm.c_str());
        std::fflush(stderr);
      }
    }
    if (failedAt >= 0) {
      job.kill();
      countRailEvents(record, spec.logDir, phase);
      *offset = scenarioNow();
      return failedAt;
    }
    ended = true;
    if (!job.stop(maxIteration + 4, 20000, onIteration)) {
      record->markFailed("healed", "ranks did not stop cleanly: " + job.error());
    }
    countRailEvents(record, spec.logDir, phase);  // the files' final state, written at finalize
    std::fprintf(stderr, "\n");
    return -1;
  }

  // Attributes the rail failures and recoveries counted since the last call to `phase`. The
  // files are rewritten every 250 ms, so an event right at a boundary may land in the next phase.
  void countRailEvents(ModeRecord* record, const std::string& dir, int phase) {
    double failovers = sumPrometheusMetric(dir, "nccl_autopilot_rail_failovers_total");
    double recoveries = sumPrometheusMetric(dir, "nccl_autopilot_rail_recoveries_total");
    PhaseStats& st = record->stats(kPhaseNames[phase]);
    st.failovers += std::max(0.0, failovers - countedFailovers_);
    st.recoveries += std::max(0.0, recoveries - countedRecoveries_);
    countedFailovers_ = std::max(countedFailovers_, failovers);
    countedRecoveries_ = std::max(countedRecoveries_, recoveries);
  }

  const DemoOptions& o_;
  VethCluster* cluster_;
  FaultControl faults_;
  double countedFailovers_ = 0, countedRecoveries_ = 0;
  std::vector<Phase> phases_;
  uint64_t scenarioStartNs_ = monotonicNs();
  double shiftS_ = 0;  // seconds the scenario clock was held back (late phase changes)
};

std::string fmtGbps(double v, bool failed) {
  char buf[32];
  if (failed && v <= 0) return "stopped";
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

// What the live rails of a rank carry in phase p (Mbit/s): a ring's bus bandwidth cannot exceed
// it, since every byte of a step crosses one rank's NICs.
double capacityMbit(const DemoOptions& o, int p) {
  double full = double(o.rails) * o.railMbit;
  if (p == kDegraded) return full - o.railMbit + o.degradedMbit;
  if (p == kFailed) return full - o.railMbit;
  return full;
}

// Rail failures declared while no rail was down: every phase but the failed one (a rail rate-
// limited in the degraded phase is alive). -1 for the failed phase, where they are expected.
double falseFailovers(const ModeRecord& r, int p) {
  return p == kFailed ? -1 : r.stats(kPhaseNames[p]).failovers;
}

// The settling window of recovery_ms: long enough to hold a few collectives of the largest size.
constexpr double kSettleWindowS = 0.25;

// The figures of issue-style reporting, per phase of the closed loop.
struct PhaseFigures {
  double capacityFraction = 0;  // of the healthy capacity
  double efficiency = 0;        // bus bandwidth / capacity
  double recoveryMs = -1;       // to 90% of the phase's steady throughput
  double maxGapMs = 0;
  double falseFailovers = 0;
};

PhaseFigures figures(const DemoOptions& o, const ModeRecord& r, int p) {
  PhaseFigures f;
  const PhaseStats& st = r.stats(kPhaseNames[p]);
  f.capacityFraction = capacityMbit(o, p) / capacityMbit(o, kHealthy);
  f.efficiency = st.gbps(o.phaseSeconds) * 1e3 / capacityMbit(o, p);
  double settle = r.settleSeconds(kPhaseNames[p], kSettleWindowS, 0.9);
  f.recoveryMs = settle < 0 ? -1 : settle * 1e3;
  f.maxGapMs = st.maxGapS * 1e3;
  f.falseFailovers = falseFailovers(r, p);
  return f;
}

double totalFalseFailovers(const ModeRecord& r) {
  double n = 0;
  for (int p = kWarmup; p < kNumPhases; ++p) n += std::max(0.0, falseFailovers(r, p));
  return n;
}

void writeJson(const std::string& path, const DemoOptions& o, const ModeRecord* closed,
               const ModeRecord* stat, bool identical) {
  std::ofstream f(path);
  f << "{\n  \"ranks\": " << o.ranks << ", \"rails\": " << o.rails
    << ", \"rail_mbit\": " << o.railMbit << ", \"degraded_mbit\": " << o.degradedMbit
    << ", \"phase_seconds\": " << o.phaseSeconds << ", \"warmup_seconds\": " << o.warmupSeconds
    << ", \"stall_seconds\": " << o.stallSeconds
    << ",\n  \"identical_decisions\": " << (identical ? "true" : "false")
    << ",\n  \"false_failovers\": " << (closed ? totalFalseFailovers(*closed) : 0)
    << ",\n  \"phases\": [\n";
  for (int p = kHealthy; p < kNumPhases; ++p) {
    std::string name = kPhaseNames[p];
    double c = closed ? closed->stats(name).gbps(o.phaseSeconds) : 0;
    double s = stat ? stat->stats(name).gbps(o.phaseSeconds) : 0;
    bool sf = stat && stat->stats(name).failed;
    uint64_t lost = (closed ? closed->stats(name).wrongElements : 0) * sizeof(float);
    f << "    {\"name\": \"" << name << "\", \"closed_loop_gbps\": " << c
      << ", \"static_gbps\": " << s << ", \"speedup\": ";
    if (s > 0) {
      f << c / s;
    } else {
      f << "null";
    }
    f << ", \"bytes_lost\": " << lost << ", \"static_failed\": " << (sf ? "true" : "false")
      << ", \"failovers\": " << (closed ? closed->stats(name).failovers : 0)
      << ", \"recoveries\": " << (closed ? closed->stats(name).recoveries : 0)
      << ", \"closed_loop_failed\": " << (closed && closed->stats(name).failed ? "true" : "false")
      << ", \"static_restarted\": " << (stat && stat->stats(name).restarted ? "true" : "false");
    if (closed) {
      PhaseFigures fig = figures(o, *closed, p);
      f << ", \"capacity_fraction\": " << fig.capacityFraction
        << ", \"efficiency\": " << fig.efficiency << ", \"recovery_ms\": ";
      if (fig.recoveryMs >= 0) {
        f << fig.recoveryMs;
      } else {
        f << "null";
      }
      f << ", \"max_gap_ms\": " << fig.maxGapMs << ", \"false_failovers\": ";
      if (fig.falseFailovers >= 0) {
        f << fig.falseFailovers;
      } else {
        f << "null";
      }
    }
    // What the tuner did: rank 0's calls, and those whose decision differs from NCCL's own
    // choice for the same table (0 in static mode, where the tuner is off).
    for (const ModeRecord* r : {closed, stat}) {
      std::string key = r == closed ? "closed_loop" : "static";
      const PhaseStats* st = r ? &r->stats(name) : nullptr;
      f << ", \"" << key << "_calls\": " << (st ? st->iterations : 0) << ", \"" << key
        << "_tuner_changed\": " << (st ? st->tunerChanged : 0) << ", \"" << key
        << "_max_gap_s\": " << (st ? st->maxGapS : 0) << ", \"" << key << "_decisions\": {";
      bool first = true;
      if (st) {
        for (const auto& [arm, n] : st->decisions) {
          f << (first ? "" : ", ") << "\"" << arm << "\": " << n;
          first = false;
        }
      }
      f << "}";
    }
    f << "}" << (p + 1 < kNumPhases ? "," : "") << "\n";
  }
  f << "  ]\n}\n";
}

// Matplotlib (Debian's python3-matplotlib) draws the throughput timeline with the fault events.
const char* kPlotScript = R"PY(
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
data, events = {}, []
with open(sys.argv[1]) as f:
    for row in csv.reader(f):
        if row[0] == "event":
            events.append((float(row[1]), row[2]))
        else:
            data.setdefault(row[0], ([], []))
            data[row[0]][0].append(float(row[1])); data[row[0]][1].append(float(row[2]))
fig, ax = plt.subplots(figsize=(10, 4.5))
for mode, (t, v) in data.items():
    ax.plot(t, v, label=mode, linewidth=1.6)
for t, label in events:
    ax.axvline(t, color="grey", linestyle="--", linewidth=0.8)
    ax.text(t + 0.1, ax.get_ylim()[1] * 0.95, label, fontsize=8, va="top")
ax.set_xlabel("time (s)"); ax.set_ylabel("bus bandwidth (Gbit/s)")
ax.set_title("nccl-autopilot demo: closed loop vs static")
ax.legend(loc="lower left"); fig.tight_layout(); fig.savefig(sys.argv[2], dpi=110)
)PY";

void writePlot(const DemoOptions& o, const std::vector<const ModeRecord*>& records,
               const FaultControl& faults) {
  std::string csv = o.outDir + "/timeline.csv";
  std::ofstream f(csv);
  for (const ModeRecord* r : records) {
    for (const auto& [t, g] : r->timeline(0.5)) f << r->mode() << "," << t << "," << g << "\n";
  }
  for (int p = kHealthy; p < kNumPhases; ++p) {
    f << "event," << phaseStart(o, p) << "," << kPhaseNames[p] << "\n";
  }
  f.close();
  (void)faults;
  std::string script = o.outDir + "/plot_demo.py";
  std::ofstream(script) << kPlotScript;
  std::string png = o.outDir + "/demo.png";
  // Debian's interpreter carries python3-matplotlib; a python3 earlier on PATH may not.
  std::string python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::string cmd = python + " " + script + " " + csv + " " + png + " 2>" + o.outDir + "/plot.log";
  if (std::system(cmd.c_str()) == 0) {
    std::printf("plot:  %s\n", png.c_str());
  } else {
    std::printf("plot:  skipped (python3-matplotlib unavailable? see %s/plot.log)\n",
                o.outDir.c_str());
  }
}

int cmdDemo(int argc, char** argv) {
  DemoOptions o;
  if (std::optional<int> rc = parse(argc, argv, &o)) return *rc;
  mkdir(o.outDir.c_str(), 0755);
  std::unique_ptr<VethCluster> cluster;
  std::string why;
  if (!o.noNetns && VethCluster::available(&why)) {
    VethCluster::cleanupStale();
    try {
      cluster = std::make_unique<VethCluster>(VethCluster::Config{o.ranks, o.rails, o.railMbit});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "autopilot demo: cannot build the veth cluster: %s\n", e.what());
      return 1;
    }
    std::printf(
        "mini-cluster: %d hosts (network namespaces) x %d rails of %d Mbit/s (veth + "
        "tc tbf, addresses 127.32.<rail>.<host>)\n",
        o.ranks, o.rails, o.railMbit);
  } else {
    std::printf(
        "mini-cluster: %d ranks on loopback rails 127.0.0.1..%d paced to %d Mbit/s "
        "inside the plugin; faults are SIMULATED by the plugin (%s)\n",
        o.ranks, o.rails, o.railMbit,
        o.noNetns ? "--no-netns" : ("no veth cluster: " + why).c_str());
  }
  Scenario scenario(o, cluster.get());
  FaultControl faults(cluster.get(), o);
  std::printf("scenario: %.0f s warm-up, then %.0f s per phase: healthy | %s | %s | %s\n",
              o.warmupSeconds, o.phaseSeconds, faults.describe(kDegraded).c_str(),
              faults.describe(kFailed).c_str(), faults.describe(kHealed).c_str());
  std::unique_ptr<ModeRecord> closed, stat;
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  try {
    if (o.mode != "static") closed = std::make_unique<ModeRecord>(scenario.run(true));
    if (o.mode != "closed") stat = std::make_unique<ModeRecord>(scenario.run(false));
  } catch (const Interrupted&) {
    std::fprintf(stderr,
                 "\nautopilot demo: interrupted; stopping the ranks and removing the "
                 "mini-cluster\n");
    return 130;
  }

  bool identical = true;
  std::printf("\n%-9s | %12s | %12s | %8s | %10s | %9s | %s\n", "phase", "closed Gbit/s",
              "static Gbit/s", "speedup", "bytes lost", "failovers", "static");
  for (int p = kHealthy; p < kNumPhases; ++p) {
    std::string name = kPhaseNames[p];
    double c = closed ? closed->stats(name).gbps(o.phaseSeconds) : 0;
    double s = stat ? stat->stats(name).gbps(o.phaseSeconds) : 0;
    uint64_t lost = (closed ? closed->stats(name).wrongElements : 0) * sizeof(float);
    std::string st = !stat                         ? "-"
                     : stat->stats(name).failed    ? stat->stats(name).failure
                     : stat->stats(name).restarted ? "restarted after repair"
                                                   : "ok";
    char speed[16] = "-";
    if (s > 0 && c > 0) std::snprintf(speed, sizeof(speed), "%.2fx", c / s);
    char rails[32] = "-";
    if (closed) {
      std::snprintf(rails, sizeof(rails), "%.0f/%.0f", closed->stats(name).failovers,
                    closed->stats(name).recoveries);
    }
    std::printf("%-9s | %12s | %12s | %8s | %10llu | %9s | %s\n", name.c_str(),
                fmtGbps(c, closed && closed->stats(name).failed).c_str(),
                fmtGbps(s, stat && stat->stats(name).failed).c_str(), speed,
                static_cast<unsigned long long>(lost), rails, st.c_str());
  }
  if (closed) {
    // Against what the rails allow: capacity = the live rails' rates of a rank, efficiency =
    // bus bandwidth / capacity; recovery = time to 90% of the phase's steady throughput.
    std::printf("\nclosed loop against the rails: %-9s | %8s | %10s | %11s | %10s | %s\n", "phase",
                "capacity", "efficiency", "recovery ms", "max gap ms", "false failovers");
    for (int p = kHealthy; p < kNumPhases; ++p) {
      PhaseFigures fig = figures(o, *closed, p);
      char recovery[16] = "-", falseOnes[32] = "- (a rail is down)";
      if (fig.recoveryMs >= 0) std::snprintf(recovery, sizeof(recovery), "%.0f", fig.recoveryMs);
      if (fig.falseFailovers >= 0) {
        std::snprintf(falseOnes, sizeof(falseOnes), "%.0f", fig.falseFailovers);
      }
      std::printf("                               %-9s | %7.0f%% | %10.2f | %11s | %10.0f | %s\n",
                  kPhaseNames[p], fig.capacityFraction * 100, fig.efficiency, recovery,
                  fig.maxGapMs, falseOnes);
    }
    double healthyEff = figures(o, *closed, kHealthy).efficiency;
    std::printf("healthy phase at %.2f of the rails' capacity: %s\n", healthyEff,
                healthyEff >= 0.8 ? "rail-bound" : "not rail-bound");
    std::printf("false failovers (a rail failed while none was down), warm-up included: %.0f\n",
                totalFalseFailovers(*closed));
  }
  for (const ModeRecord* r : {closed.get(), stat.get()}) {
    if (r == nullptr) continue;
    std::printf("\n%s: latency per size (median us) and decisions per phase\n", r->mode().c_str());
    for (int p = kWarmup; p < kNumPhases; ++p) {
      const PhaseStats& st = r->stats(kPhaseNames[p]);
      std::printf("  %-9s", kPhaseNames[p]);
      for (auto [bytes, lat] : st.latencyUs) {
        std::sort(lat.begin(), lat.end());
        std::printf("  %lluK: %.0f", static_cast<unsigned long long>(bytes >> 10),
                    lat[lat.size() / 2]);
      }
      std::printf("\n            decisions:");
      for (const auto& [arm, n] : st.decisions) {
        std::printf(" %s x%llu", arm.c_str(), static_cast<unsigned long long>(n));
      }
      std::printf("  (%llu of %llu differ from NCCL's choice)\n",
                  static_cast<unsigned long long>(st.tunerChanged),
                  static_cast<unsigned long long>(st.iterations));
    }
    std::printf("  identical decisions on all ranks: %s (%llu calls compared, %llu differ)\n",
                r->decisionMismatches() == 0 ? "yes" : "NO",
                static_cast<unsigned long long>(r->decisionsCompared()),
                static_cast<unsigned long long>(r->decisionMismatches()));
    identical = identical && r->decisionMismatches() == 0 && r->decisionsCompared() > 0;
  }
  if (!o.json.empty()) writeJson(o.json, o, closed.get(), stat.get(), identical);
  if (o.plot) {
    std::vector<const ModeRecord*> recs;
    if (closed) recs.push_back(closed.get());
    if (stat) recs.push_back(stat.get());
    writePlot(o, recs, faults);
  }
  std::printf("logs:  %s/<mode>/rank<N>.log\n", o.outDir.c_str());
  return 0;
}

cli::CommandRegistrar registerDemo("demo", cmdDemo,
                                   "the main job: closed loop vs static on a mini-cluster");

}  // namespace
}  // namespace autopilot::demo

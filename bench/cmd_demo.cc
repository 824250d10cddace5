// `autopilot demo`: the main job. A GPU-free mini-cluster on this machine shows the closed loop
// (net + profiler + tuner plugins) against a static configuration through a scripted scenario of
// rail faults and repairs (buildScenario: degraded, failed, healed, half rate, two degraded, a
// failure and its heal while another rail is degraded, flapping).
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
#include "bench/top/prom_files.h"
#include "bench/top/top_model.h"
#include "common/abi/nccl_abi.h"
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

// One phase of the scenario: the state of every rail while it lasts.
struct PhaseSpec {
  std::string name;
  std::vector<int> mbit;  // per rail: rate in Mbit/s, 0 = link down
  int flapRail = -1;      // this rail goes down, then up, every kFlapSeconds (down first)
};
constexpr double kFlapSeconds = 1.5;

struct DemoOptions {
  int ranks = 4;
  int rails = 3;
  int railMbit = 250;
  int degradedMbit = 25;
  double phaseSeconds = 7.0;
  double warmupSeconds = 4.0;
  double stallSeconds = 4.0;
  int repeat = 1;
  std::string sizes = "262144,1048576,4194304";
  std::string mode = "both";
  std::string scenario = "faults";  // or "mistuned"
  double treeBwFactor = 1.0;        // the declared topology (DeclaredTopology::treeBwFactor)
  std::string force;                // --force ALGO/PROTO: every call runs that arm (static mode)
  int forcedCell = -1;
  std::string outDir = "demo-out";
  std::string json;
  bool quick = false;
  bool noNetns = false;
  bool plot = true;
  bool top = false;               // autopilot top's view instead of the status line
  int slowRank = -1;              // a straggler: this rank starts each collective late
  double slowMs = 20;             // by this much
  std::vector<PhaseSpec> phases;  // buildScenario(); [0] is the warm-up
};

// The rails the scenario acts on: rail 1 takes every fault, rail 2 (rail 0 with 2 rails) is the
// second one degraded at the same time.
constexpr int kFaultRail = 1;
int secondFaultRail(const DemoOptions& o) { return (kFaultRail + 1) % o.rails; }

// The scenario. The warm-up is excluded from the comparison, as nccl-tests excludes its warm-up
// iterations: connections are set up and the tuner takes its first measurements there. Each
// later phase is one transition of the rails, in an order where every fault is repaired by a
// later phase (so the static job, stopped by a failure, is restarted and measured again).
//
// The mistuned scenario keeps every rail healthy and declares a wrong topology instead (the
// tree credited with kMistunedTreeFactor times the ring's bandwidth), so that NCCL's model picks
// Tree for every all-reduce, about 1.4x slower than Ring on the mini-cluster: one long phase
// shows the tuner, fed only by the profiler's measurements, finding Ring on every rank at once.
std::vector<PhaseSpec> buildScenario(const DemoOptions& o) {
  const std::vector<int> full(size_t(o.rails), o.railMbit);
  if (o.scenario == "mistuned") return {{"warm-up", full}, {"mistuned", full}};
  const size_t a = kFaultRail, b = size_t(secondFaultRail(o));
  auto with = [&](std::initializer_list<std::pair<size_t, int>> changes) {
    std::vector<int> m = full;
    for (auto [rail, mbit] : changes) m[rail] = mbit;
    return m;
  };
  const int deg = o.degradedMbit, half = std::max(1, o.railMbit / 2);
  return {
      {"warm-up", full},
      {"healthy", full},
      {"degraded", with({{a, deg}})},
      {"failed", with({{a, 0}})},
      {"healed", full},
      {"half-rate", with({{a, half}})},
      {"two-degraded", with({{a, deg}, {b, deg}})},
      {"failed+degraded", with({{a, 0}, {b, deg}})},
      {"healed+degraded", with({{b, deg}})},
      {"flapping", full, int(a)},
  };
}

// Three times the ring's bandwidth makes the model choose Tree for all-reduce at every size
// from 16 KiB to 16 MiB on the demo's topology (at 2x it still picks Ring from 32 KiB to 4 MiB).
constexpr double kMistunedTreeFactor = 3.0;
// The mistuned phase's default length: time for the probe budget (1% of the time measured in
// collectives) to pay the first probes of Ring, whose model places it 1.4x above Tree, and for
// the samples a confident switch needs (README, "The mistuned scenario").
constexpr double kMistunedPhaseSeconds = 40.0;

constexpr int kWarmup = 0, kHealthy = 1;
int numPhases(const DemoOptions& o) { return int(o.phases.size()); }
const std::string& phaseName(const DemoOptions& o, int p) { return o.phases[size_t(p)].name; }

// The flapping rail is down during the even kFlapSeconds periods of its phase.
bool flapDown(double sincePhaseStartS) {
  return (int64_t(std::floor(std::max(0.0, sincePhaseStartS) / kFlapSeconds)) % 2) == 0;
}
// Share of a phase of `seconds` in which the flapping rail is up.
double flapUpFraction(double seconds) {
  double up = 0;
  for (double t = 0; t < seconds; t += kFlapSeconds) {
    if (!flapDown(t + kFlapSeconds / 2)) up += std::min(kFlapSeconds, seconds - t);
  }
  return seconds > 0 ? up / seconds : 0;
}
// Every rail's rate `sinceStartS` into the phase (0 = down).
std::vector<int> railState(const PhaseSpec& spec, double sinceStartS) {
  std::vector<int> m = spec.mbit;
  if (spec.flapRail >= 0 && flapDown(sinceStartS)) m[size_t(spec.flapRail)] = 0;
  return m;
}
// Whether some rail is down at some time in the phase (failovers there are expected).
bool anyRailDown(const PhaseSpec& spec) {
  return spec.flapRail >= 0 || std::count(spec.mbit.begin(), spec.mbit.end(), 0) > 0;
}

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
  for (int p = numPhases(o) - 1; p > kWarmup; --p) {
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
      "profiler + tuner plugins) and a static configuration through a scenario of rail\n"
      "faults and repairs (degraded, failed, healed, half rate, two degraded, a failure\n"
      "and its heal while another rail is degraded, flapping), and compares them.");
  args.addInt("--ranks", o->ranks, 2, 16, "rank processes");
  args.addInt("--rails", o->rails, 2, 8, "rails (NICs) per rank");
  args.addInt("--rail-mbit", o->railMbit, 1, 1000000, "line rate of each rail, Mbit/s");
  args.addInt("--degraded-mbit", o->degradedMbit, 1, 1000000, "rate of the degraded rail, Mbit/s");
  cli::Opt phaseOpt = args.addReal("--phase-seconds", o->phaseSeconds, cli::Interval::positive(),
                                   "length of each phase");
  cli::Opt warmupOpt = args.addReal("--warmup-seconds", o->warmupSeconds, cli::Interval::atLeast(0),
                                    "warm-up before the compared phases");
  args.addIntList("--sizes", o->sizes, 1, kMaxCollectiveBytes,
                  "collective sizes in bytes, comma-separated")
      .showDefault();
  args.addChoice("--mode", o->mode, {"both", "closed", "static"},
                 "closed loop, static configuration, or both");
  args.addChoice("--scenario", o->scenario, {"faults", "mistuned"},
                 "faults: the rail faults and repairs above; mistuned: healthy rails under a "
                 "declared topology that makes NCCL's model choose Tree for all-reduce, about "
                 "1.4x slower than Ring here, one phase (40 s, --quick 30 s) in which the tuner "
                 "must find Ring")
      .showDefault();
  args.addChoice("--force", o->force,
                 {"Tree/LL", "Tree/LL128", "Tree/Simple", "Ring/LL", "Ring/LL128", "Ring/Simple"},
                 "with --mode static: run this arm wherever the collective has it, as NCCL_ALGO "
                 "and NCCL_PROTO would (measures what each arm costs on the mini-cluster)");
  args.addInt("--repeat", o->repeat, 1, 20,
              "run the scenario this many times; figures are medians with their spread");
  args.addText("--out", o->outDir, "trace, plot, logs").typeName("DIR").showDefault();
  args.addText("--json", o->json, "the phase table as JSON").typeName("FILE");
  args.addFlag("--quick", o->quick,
               "short run for tests (faults: 2.5 s phases, small sizes; mistuned: a 30 s phase)");
  args.addFlag("--no-netns", o->noNetns,
               "loopback rails paced inside the plugin, faults simulated (as without root)");
  bool noPlot = false;
  args.addFlag("--no-plot", noPlot, "skip the PNG plot");
  args.addFlag("--top", o->top,
               "show `autopilot top`'s view of the running job (its ranks' Prometheus files) "
               "every second instead of the status line");
  args.addInt("--slow-rank", o->slowRank, -1, 15,
              "make this rank a straggler: it starts every collective --slow-ms late, as a rank "
              "busy elsewhere (-1: none)");
  args.addReal("--slow-ms", o->slowMs, cli::Interval::closed(0, 10000),
               "the straggler's delay before each collective, ms");
  if (std::optional<int> rc = args.parse(argc, argv)) return rc;
  if (o->slowRank >= o->ranks) {
    std::fprintf(stderr, "autopilot demo: --slow-rank %d: there are only %d ranks\n", o->slowRank,
                 o->ranks);
    return cli::kUsageError;
  }
  o->plot = !noPlot;
  if (!o->force.empty()) {
    if (o->mode != "static") {
      std::fprintf(stderr,
                   "autopilot demo: --force needs --mode static (it replaces NCCL's "
                   "choice; the closed loop's tuner would be overridden)\n");
      return cli::kUsageError;
    }
    const size_t slash = o->force.find('/');
    const std::string algo = o->force.substr(0, slash), proto = o->force.substr(slash + 1);
    o->forcedCell = (algo == "Tree" ? abi::kAlgoTree : abi::kAlgoRing) * abi::kNumProtocols +
                    (proto == "LL"      ? abi::kProtoLL
                     : proto == "LL128" ? abi::kProtoLL128
                                        : abi::kProtoSimple);
  }
  if (o->scenario == "mistuned") {
    o->treeBwFactor = kMistunedTreeFactor;
    if (!phaseOpt.given()) o->phaseSeconds = o->quick ? 30.0 : kMistunedPhaseSeconds;
    if (!warmupOpt.given()) o->warmupSeconds = 1.0;
  }
  if (o->quick) {
    o->warmupSeconds = std::min(o->warmupSeconds, 1.0);
    if (o->scenario == "faults") {
      o->phaseSeconds = std::min(o->phaseSeconds, 2.5);
      o->sizes = "65536,524288";
    }
  }
  // A job that completes nothing for this long has stopped (TCP's retransmission backoff alone
  // can hold a slow rail for seconds; that is slowness, not a stop). Live jobs' longest gaps
  // between completions measured 0.1-0.2 s in --quick on a loaded 2-core machine (the JSON's
  // *_max_gap_s), but a rail failing right after it was rate-limited is detected only once its
  // queued bytes had time to drain at the slow rate it last measured, and beside a CPU hog the
  // closed loop went 2.5 s without a completion there. Phase changes wait for the verdict
  // (runJob), so it may exceed what is left of a phase; only a stopped job pays for its length.
  o->stallSeconds = std::max(6.0, o->phaseSeconds);
  o->phases = buildScenario(*o);
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
  FaultControl(VethCluster* cluster, const DemoOptions& o)
      : cluster_(cluster),
        o_(o),
        applied_(size_t(o.rails), o.railMbit),
        rate_(size_t(o.rails), o.railMbit) {
    if (!cluster_) planPath_ = o_.outDir + "/simulated-faults.txt";
  }
  const std::string& planPath() const { return planPath_; }
  bool simulated() const { return cluster_ == nullptr; }

  // Puts every rail in the state `spec` asks for `sinceStartS` into its phase; only rails whose
  // state changes are touched (tc and ip are slow, and the flapping rail is re-checked often).
  void apply(const PhaseSpec& spec, double sinceStartS) {
    std::vector<int> want = railState(spec, sinceStartS);
    if (want == applied_ && (cluster_ != nullptr || planWritten_)) return;
    if (cluster_ == nullptr) {
      writePlan(want);
    } else {
      for (int r = 0; r < o_.rails; ++r) {
        int w = want[size_t(r)], was = applied_[size_t(r)];
        if (w == was) continue;
        if (w == 0) {
          cluster_->setRailUp(r, false);  // its rate stays as it was, for when it returns
          continue;
        }
        if (w != rate_[size_t(r)]) {
          cluster_->setRailRate(r, w == o_.railMbit ? 0 : w);
          rate_[size_t(r)] = w;
        }
        if (was == 0) cluster_->setRailUp(r, true);
      }
    }
    applied_ = want;
  }
  void reset() { apply(o_.phases[size_t(kHealthy)], 0); }

  std::string describe(const PhaseSpec& spec) const {
    std::string out;
    for (int r = 0; r < o_.rails; ++r) {
      int m = spec.mbit[size_t(r)];
      std::string what;
      if (r == spec.flapRail) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "down and up every %.1f s", kFlapSeconds);
        what = buf;
      } else if (m == 0) {
        what = simulated() ? "down" : "down (ip link set down)";
      } else if (m != o_.railMbit) {
        what =
            "rate-limited to " + std::to_string(m) + " Mbit/s" + (simulated() ? "" : " (tc tbf)");
      } else {
        continue;
      }
      out += (out.empty() ? "" : ", ") + std::string("rail ") + std::to_string(r) + " " + what;
    }
    if (out.empty()) return "all rails at full rate";
    return out + (simulated() ? " (SIMULATED in the plugin)" : "");
  }

 private:
  // Every rail paced at its rate, down ones marked. Written whole and renamed into place, so a
  // rank never reads half a plan.
  void writePlan(const std::vector<int>& mbit) {
    std::string tmp = planPath_ + ".tmp";
    {
      std::ofstream f(tmp);
      for (int r = 0; r < o_.rails; ++r) {
        int m = mbit[size_t(r)];
        f << "rail " << r << " rate " << (m > 0 ? m : o_.railMbit) << "\n";
        if (m == 0) f << "rail " << r << " down\n";
      }
    }
    std::rename(tmp.c_str(), planPath_.c_str());
    planWritten_ = true;
  }

  VethCluster* cluster_;
  const DemoOptions& o_;
  std::string planPath_;
  bool planWritten_ = false;
  std::vector<int> applied_;  // per rail as last applied (0 = down)
  std::vector<int> rate_;     // per rail, its shaping (kept while it is down)
};

// How often each rank rewrites its Prometheus file in the demo. A failover is read at most this
// long after it is counted, plus the time its rank's service thread waits for a CPU; a repair
// phase charges the failovers read within kFailoverReadLagS of its repair to the phase before it
// (RailEventLedger).
constexpr int kPromIntervalMs = 250;
constexpr double kFailoverReadLagS = 2 * kPromIntervalMs / 1e3;

std::map<std::string, std::string> modeEnv(bool closedLoop, const VethCluster* cluster,
                                           const FaultControl& faults, const DemoOptions& o,
                                           const std::string& modeDir) {
  std::map<std::string, std::string> env{
      // The profiler's exports: a Perfetto trace per rank, and the Prometheus file from which
      // the demo reads the net plugin's rail counters (failovers, recoveries).
      {"NCCL_AUTOPILOT_TRACE_FILE", modeDir + "/trace-rank%r.json"},
      {"NCCL_AUTOPILOT_PROM_FILE", modeDir + "/metrics-rank%r.prom"},
      {"NCCL_AUTOPILOT_PROM_INTERVAL_MS", std::to_string(kPromIntervalMs)},
      {"NCCL_AUTOPILOT_PROM_KEEP", "1"},  // read after the ranks exit
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
  // The tuner's switch points are counted in calls but sized in time (the lead spans
  // NCCL_AUTOPILOT_TUNER_SWAP_LEAD_MS at the measured call rate): this workload, about 25 calls
  // a second (the mistuned scenario's about 20), needs no setting of its own.
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
    for (int p = 0; p < numPhases(o); ++p) {
      phases_.push_back(Phase{phaseName(o, p), phaseStart(o, p), phaseEnd(o, p)});
    }
  }

  ModeRecord run(bool closedLoop) {
    ModeRecord record(closedLoop ? "closed-loop" : "static", phases_, o_.ranks);
    faults_.reset();
    railEvents_ = RailEventLedger{};
    clearOutputs(o_.outDir + "/" + record.mode());
    double offset = 0;
    int startPhase = kWarmup;
    while (startPhase < numPhases(o_)) {
      int failedAt = runJob(closedLoop, &record, startPhase, &offset);
      if (failedAt < 0 || closedLoop) break;
      // The job died (static mode has no failover). A real job would be restarted once the
      // network is repaired: wait for the next phase with every rail up and measure a restarted
      // job there.
      int restartAt = failedAt + 1;
      while (restartAt < numPhases(o_) && anyRailDown(o_.phases[size_t(restartAt)])) ++restartAt;
      for (int p = failedAt + 1; p < restartAt; ++p) {
        record.markFailed(phaseName(o_, p), "job stopped");
      }
      if (restartAt >= numPhases(o_)) break;
      double waitUntil = phaseStart(o_, restartAt);
      sleepUntil(waitUntil);
      faults_.apply(o_.phases[size_t(restartAt)], 0);
      record.markRestarted(phaseName(o_, restartAt));
      startPhase = restartAt;
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
    spec.treeBwFactor = o_.treeBwFactor;
    spec.allReduceOnly = o_.scenario == "mistuned";
    spec.forcedCell = o_.forcedCell;
    spec.sizes = o_.sizes;
    spec.cluster = cluster_;
    spec.slowRank = o_.slowRank;
    spec.slowMs = o_.slowMs;
    spec.logDir = o_.outDir + "/" + record->mode();
    mkdir(spec.logDir.c_str(), 0755);
    spec.env = modeEnv(closedLoop, cluster_, faults_, o_, spec.logDir);
    Job job(spec);
    if (!job.waitReady(60000)) {
      std::fprintf(stderr, "\n[%s] setup failed: %s\n", record->mode().c_str(),
                   job.error().c_str());
      record->markFailed(phaseName(o_, startPhase), "setup failed: " + job.error());
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
    top::TopModel topView;  // --top: what the ranks' Prometheus files say
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
    const int nPhases = numPhases(o_);
    const double end = phaseEnd(o_, nPhases - 1);
    for (;;) {
      checkInterrupted();
      double s = scenarioNow();
      int want = s >= end ? nPhases : phaseAt(o_, s);
      // A phase change (or the end) waits while the job looks stuck: the next phase could
      // repair what stopped it (the healed phase does), and then a stopped job would pass for a
      // slow one. So the verdict "stopped" never races the phase clock: the transition happens
      // at the job's next completion, or the job is declared stopped in the phase it is in.
      double stalled = double(monotonicNs() - lastProgress) / 1e9;
      bool hold = phase < want && stalled >= kHoldSeconds;
      if (phase < want && !hold) {
        if (want == nPhases) break;
        while (phase < want) {
          countRailEvents(record, spec.logDir, phase);
          ++phase;
          const PhaseSpec& next = o_.phases[size_t(phase)];
          std::fprintf(stderr, "\n[%s] t=%5.1fs  %s: %s\n", record->mode().c_str(),
                       phaseStart(o_, phase), next.name.c_str(), faults_.describe(next).c_str());
          faults_.apply(next, 0);
          // A rank may find a rail of the phase before still down while the repair runs: its
          // failover is no false one, though read in this phase.
          if (anyRailDown(o_.phases[size_t(phase - 1)])) {
            railEvents_.holdFailoversFor(phase - 1, monotonicS() + kFailoverReadLagS);
          }
        }
        // The phase starts once its fault is in place.
        double late = scenarioNow() - phaseStart(o_, phase);
        if (late > 0) {
          clock -= late;
          shiftS_ += late;
        }
        s = scenarioNow();
      }
      if (railEvents_.holdEnded(monotonicS())) countRailEvents(record, spec.logDir, phase);
      // The flapping rail changes state within its phase.
      faults_.apply(o_.phases[size_t(phase)], s - phaseStart(o_, phase));
      job.pump(50, onIteration);
      if (job.failed()) {
        record->markFailed(phaseName(o_, phase), job.error());
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
        record->markFailed(phaseName(o_, phase), why);
        std::fprintf(stderr, "\n[%s] t=%5.1fs  %s (in the %s phase)\n", record->mode().c_str(), s,
                     why, phaseName(o_, phase).c_str());
        failedAt = phase;
        break;
      }
      if (o_.top && s - lastStatus >= 1.0) {
        lastStatus = s;
        topView.update(top::readPromFolder(spec.logDir));
        // The screen is cleared only for a person at a terminal; a log gets frames in sequence.
        std::string text = isatty(STDERR_FILENO) ? "\x1b[H\x1b[2J" : "\n";
        char head[160];
        std::snprintf(head, sizeof(head), "[%s] t=%5.1fs %s: %s\n", record->mode().c_str(), s,
                      phaseName(o_, phase).c_str(),
                      faults_.describe(o_.phases[size_t(phase)]).c_str());
        text += head;
        text += top::renderText(topView.frame(top::wallSeconds(), 30), spec.logDir);
        std::fputs(text.c_str(), stderr);
        std::fflush(stderr);
      } else if (!o_.top && s - lastStatus >= 0.5) {
        lastStatus = s;
        const PhaseStats& st = record->stats(phaseName(o_, phase));
        double phaseElapsed = std::min(s, phaseEnd(o_, phase)) - phaseStart(o_, phase);
        std::fprintf(stderr, "\r[%s] t=%5.1fs %-8s iter %6llu  %6.3f Gbit/s  last %-32s",
                     record->mode().c_str(), s, phaseName(o_, phase).c_str(),
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
      record->markFailed(phaseName(o_, nPhases - 1), "ranks did not stop cleanly: " + job.error());
    }
    countRailEvents(record, spec.logDir, phase);  // the files' final state, written at finalize
    std::fprintf(stderr, "\n");
    return -1;
  }

  static double monotonicS() { return double(monotonicNs()) / 1e9; }

  // Charges the rail failures and recoveries counted since the last call, `phase` in force
  // (RailEventLedger says which phase a failover belongs to). The files are rewritten every
  // kPromIntervalMs, so an event right at a boundary may land in the next phase.
  void countRailEvents(ModeRecord* record, const std::string& dir, int phase) {
    RailEventLedger::Charge c = railEvents_.read(
        phase, sumPrometheusMetric(dir, "nccl_autopilot_rail_failovers_total"),
        sumPrometheusMetric(dir, "nccl_autopilot_rail_recoveries_total"), monotonicS());
    record->stats(phaseName(o_, c.failoverPhase)).failovers += c.failovers;
    record->stats(phaseName(o_, phase)).recoveries += c.recoveries;
  }

  const DemoOptions& o_;
  VethCluster* cluster_;
  FaultControl faults_;
  RailEventLedger railEvents_;
  std::vector<Phase> phases_;
  uint64_t scenarioStartNs_ = monotonicNs();
  double shiftS_ = 0;  // seconds the scenario clock was held back (late phase changes)
};

const double kNaN = std::nan("");

// What the live rails of a rank carry in phase p (Mbit/s): a ring's bus bandwidth cannot exceed
// it, since every byte of a step crosses one rank's NICs. The flapping rail counts for the share
// of the phase it is up.
double capacityMbit(const DemoOptions& o, int p) {
  const PhaseSpec& spec = o.phases[size_t(p)];
  double sum = 0;
  for (int r = 0; r < o.rails; ++r) {
    double m = spec.mbit[size_t(r)];
    if (r == spec.flapRail) m *= flapUpFraction(o.phaseSeconds);
    sum += m;
  }
  return sum;
}

// The settling window of recovery_ms: long enough to hold a few collectives of the largest size.
constexpr double kSettleWindowS = 0.25;

// Every figure of one phase in one run; NaN where it does not apply (a mode not run, no
// throughput to compare with, a phase where failovers are expected).
struct PhaseRow {
  double closedGbps = kNaN, staticGbps = kNaN, speedup = kNaN;
  double failovers = kNaN, recoveries = kNaN;
  double capacityFraction = kNaN;
  double efficiency = kNaN;  // bus bandwidth / capacity
  double recoveryMs = kNaN;  // from the phase's start (each flap) to 90% of its steady throughput
  double maxGapMs = kNaN;    // longest wait between two completions
  double falseFailovers = kNaN;  // rails failed while none was down
  double closedMaxGapS = kNaN, staticMaxGapS = kNaN;
  // Mistuned scenario: seconds from the phase's start until every size ran the tuner's arm for
  // good (rank 0's last call on NCCL's choice), NaN when some size ended on NCCL's choice; and
  // how many sizes ended on an arm of the tuner's.
  double switchedAfterS = kNaN, sizesSwitched = kNaN, sizes = kNaN;
  double bytesLost = 0;
  double closedCalls = 0, closedChanged = 0, staticCalls = 0, staticChanged = 0;
  bool closedFailed = false, staticFailed = false, staticRestarted = false;
  std::string closedNote, staticNote;
};

PhaseRow phaseRow(const DemoOptions& o, const ModeRecord* closed, const ModeRecord* stat, int p) {
  PhaseRow row;
  const std::string& name = phaseName(o, p);
  row.capacityFraction = capacityMbit(o, p) / capacityMbit(o, kHealthy);
  if (closed) {
    const PhaseStats& st = closed->stats(name);
    row.closedGbps = st.gbps(o.phaseSeconds);
    row.failovers = st.failovers;
    row.recoveries = st.recoveries;
    row.efficiency = row.closedGbps * 1e3 / capacityMbit(o, p);
    // A flapping rail changes the limit every kFlapSeconds: each change is a fault or a repair
    // of its own, measured against the throughput of its own state.
    const bool flaps = o.phases[size_t(p)].flapRail >= 0;
    double settle = flaps ? closed->settleSecondsPerPeriod(name, kFlapSeconds, kSettleWindowS, 0.9)
                          : closed->settleSeconds(name, kSettleWindowS, 0.9);
    if (settle >= 0) row.recoveryMs = settle * 1e3;
    row.maxGapMs = st.maxGapS * 1e3;
    row.closedMaxGapS = st.maxGapS;
    if (!anyRailDown(o.phases[size_t(p)])) row.falseFailovers = st.failovers;
    row.bytesLost = double(st.wrongElements) * sizeof(float);
    row.closedCalls = double(st.iterations);
    row.closedChanged = double(st.tunerChanged);
    row.closedFailed = st.failed;
    if (st.failed) row.closedNote = st.failure;
    if (o.scenario == "mistuned") {
      row.sizes = row.sizesSwitched = 0;
      double last = phaseStart(o, p);
      for (const auto& [bytes, h] : closed->sizeHistory()) {
        ++row.sizes;
        if (h.lastWasNcclChoice) continue;
        ++row.sizesSwitched;
        last = std::max(last, h.lastNcclChoiceS);
      }
      if (row.sizes > 0 && row.sizesSwitched == row.sizes)
        row.switchedAfterS = last - phaseStart(o, p);
    }
  }
  if (stat) {
    const PhaseStats& st = stat->stats(name);
    row.staticGbps = st.gbps(o.phaseSeconds);
    row.staticMaxGapS = st.maxGapS;
    row.staticCalls = double(st.iterations);
    row.staticChanged = double(st.tunerChanged);
    row.staticFailed = st.failed;
    row.staticRestarted = st.restarted;
    row.staticNote = st.failed ? st.failure : st.restarted ? "restarted after repair" : "ok";
  }
  if (row.staticGbps > 0 && row.closedGbps > 0) row.speedup = row.closedGbps / row.staticGbps;
  return row;
}

// One figure over the runs of --repeat: the median and the range of the values it has.
struct Figure {
  double median = kNaN, lo = kNaN, hi = kNaN;
  bool has() const { return !std::isnan(median); }
};
Figure aggregate(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  Figure f;
  if (v.empty()) return f;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  f.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  f.lo = v.front();
  f.hi = v.back();
  return f;
}

// The figures reported per phase, with their JSON names.
struct FigureDef {
  const char* key;
  double PhaseRow::*field;
};
const FigureDef kFigures[] = {
    {"closed_loop_gbps", &PhaseRow::closedGbps},
    {"static_gbps", &PhaseRow::staticGbps},
    {"speedup", &PhaseRow::speedup},
    {"failovers", &PhaseRow::failovers},
    {"recoveries", &PhaseRow::recoveries},
    {"capacity_fraction", &PhaseRow::capacityFraction},
    {"efficiency", &PhaseRow::efficiency},
    {"recovery_ms", &PhaseRow::recoveryMs},
    {"max_gap_ms", &PhaseRow::maxGapMs},
    {"false_failovers", &PhaseRow::falseFailovers},
    {"closed_loop_max_gap_s", &PhaseRow::closedMaxGapS},
    {"static_max_gap_s", &PhaseRow::staticMaxGapS},
    {"switched_after_s", &PhaseRow::switchedAfterS},
    {"sizes_switched", &PhaseRow::sizesSwitched},
};

// Everything the runs of --repeat produced, per phase.
class Results {
 public:
  Results(const DemoOptions& o) : o_(o) {}
  void addRun(const ModeRecord* closed, const ModeRecord* stat) {
    std::vector<PhaseRow> rows;
    for (int p = 0; p < numPhases(o_); ++p) rows.push_back(phaseRow(o_, closed, stat, p));
    runs_.push_back(std::move(rows));
    double falseOnes = 0;
    if (closed) {
      for (const PhaseRow& r : runs_.back())
        falseOnes += std::isnan(r.falseFailovers) ? 0 : r.falseFailovers;
    }
    falseTotals_.push_back(closed ? falseOnes : kNaN);
    for (const ModeRecord* r : {closed, stat}) {
      if (r == nullptr) continue;
      compared_ += r->decisionsCompared();
      mismatches_ += r->decisionMismatches();
      identical_ = identical_ && r->decisionMismatches() == 0 && r->decisionsCompared() > 0;
    }
  }
  int runs() const { return int(runs_.size()); }
  Figure figure(int p, double PhaseRow::*field) const {
    std::vector<double> v;
    for (const auto& run : runs_) v.push_back(run[size_t(p)].*field);
    return aggregate(v);
  }
  double sum(int p, double PhaseRow::*field) const {
    double s = 0;
    for (const auto& run : runs_) s += run[size_t(p)].*field;
    return s;
  }
  bool any(int p, bool PhaseRow::*field) const {
    for (const auto& run : runs_) {
      if (run[size_t(p)].*field) return true;
    }
    return false;
  }
  // The distinct notes of the runs ("ok / stopped: ...").
  std::string notes(int p, std::string PhaseRow::*field) const {
    std::string out;
    for (const auto& run : runs_) {
      const std::string& n = run[size_t(p)].*field;
      if (!n.empty() && out.find(n) == std::string::npos) out += (out.empty() ? "" : " / ") + n;
    }
    return out.empty() ? "-" : out;
  }
  Figure falseFailoverTotal() const { return aggregate(falseTotals_); }
  bool identical() const { return identical_; }
  uint64_t compared() const { return compared_; }
  uint64_t mismatches() const { return mismatches_; }

 private:
  const DemoOptions& o_;
  std::vector<std::vector<PhaseRow>> runs_;
  std::vector<double> falseTotals_;
  bool identical_ = true;
  uint64_t compared_ = 0, mismatches_ = 0;
};

// "0.491" for one run, "0.491 (0.452-0.517)" for the median and range of several.
std::string show(const Figure& f, const char* format, int runs) {
  if (!f.has()) return "-";
  char a[32], b[32], c[32];
  std::snprintf(a, sizeof(a), format, f.median);
  if (runs <= 1) return a;
  std::snprintf(b, sizeof(b), format, f.lo);
  std::snprintf(c, sizeof(c), format, f.hi);
  return std::string(a) + " (" + b + "-" + c + ")";
}

void jsonNumber(std::ostream& f, double v) {
  if (std::isnan(v)) {
    f << "null";
  } else {
    f << v;
  }
}

void writeJson(const std::string& path, const DemoOptions& o, const Results& res,
               const ModeRecord* closed, const ModeRecord* stat) {
  std::ofstream f(path);
  Figure falseOnes = res.falseFailoverTotal();
  f << "{\n  \"scenario\": \"" << o.scenario << "\", \"tree_bw_factor\": " << o.treeBwFactor
    << ",\n  \"ranks\": " << o.ranks << ", \"rails\": " << o.rails
    << ", \"rail_mbit\": " << o.railMbit << ", \"degraded_mbit\": " << o.degradedMbit
    << ", \"phase_seconds\": " << o.phaseSeconds << ", \"warmup_seconds\": " << o.warmupSeconds
    << ", \"stall_seconds\": " << o.stallSeconds << ", \"runs\": " << res.runs()
    << ",\n  \"identical_decisions\": " << (res.identical() ? "true" : "false")
    << ",\n  \"false_failovers\": ";
  jsonNumber(f, falseOnes.has() ? falseOnes.median : 0);
  f << ",\n  \"phases\": [\n";
  for (int p = kHealthy; p < numPhases(o); ++p) {
    const std::string& name = phaseName(o, p);
    f << "    {\"name\": \"" << name << "\", \"rails_mbit\": [";
    for (int r = 0; r < o.rails; ++r) f << (r ? ", " : "") << o.phases[size_t(p)].mbit[size_t(r)];
    f << "], \"flapping_rail\": " << o.phases[size_t(p)].flapRail;
    // Per figure the median over the runs; "spread" holds each one's [min, max].
    for (const FigureDef& d : kFigures) {
      f << ", \"" << d.key << "\": ";
      jsonNumber(f, res.figure(p, d.field).median);
    }
    f << ", \"bytes_lost\": " << res.sum(p, &PhaseRow::bytesLost)
      << ", \"static_failed\": " << (res.any(p, &PhaseRow::staticFailed) ? "true" : "false")
      << ", \"closed_loop_failed\": " << (res.any(p, &PhaseRow::closedFailed) ? "true" : "false")
      << ", \"static_restarted\": " << (res.any(p, &PhaseRow::staticRestarted) ? "true" : "false")
      << ", \"closed_loop_calls\": " << res.sum(p, &PhaseRow::closedCalls)
      << ", \"closed_loop_tuner_changed\": " << res.sum(p, &PhaseRow::closedChanged)
      << ", \"static_calls\": " << res.sum(p, &PhaseRow::staticCalls)
      << ", \"static_tuner_changed\": " << res.sum(p, &PhaseRow::staticChanged);
    // What the tuner did in the last run: rank 0's decisions.
    for (const ModeRecord* r : {closed, stat}) {
      f << ", \"" << (r == closed ? "closed_loop" : "static") << "_decisions\": {";
      bool first = true;
      if (r) {
        for (const auto& [arm, n] : r->stats(name).decisions) {
          f << (first ? "" : ", ") << "\"" << arm << "\": " << n;
          first = false;
        }
      }
      f << "}";
    }
    // Mistuned scenario: the arm each size ended on in the last run (rank 0).
    if (o.scenario == "mistuned" && closed) {
      f << ", \"closed_loop_final_arms\": {";
      bool firstArm = true;
      for (const auto& [bytes, h] : closed->sizeHistory()) {
        f << (firstArm ? "" : ", ") << "\"" << bytes << "\": \"" << h.lastArm << "\"";
        firstArm = false;
      }
      f << "}";
    }
    f << ", \"spread\": {";
    bool first = true;
    for (const FigureDef& d : kFigures) {
      Figure fig = res.figure(p, d.field);
      if (!fig.has()) continue;
      f << (first ? "" : ", ") << "\"" << d.key << "\": [" << fig.lo << ", " << fig.hi << "]";
      first = false;
    }
    f << "}}" << (p + 1 < numPhases(o) ? "," : "") << "\n";
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
for i, (t, label) in enumerate(events):
    ax.axvline(t, color="grey", linestyle="--", linewidth=0.8)
    ax.text(t + 0.1, ax.get_ylim()[1] * (0.95 - 0.07 * (i % 4)), label, fontsize=8, va="top")
ax.set_xlabel("time (s)"); ax.set_ylabel("bus bandwidth (Gbit/s)")
ax.set_title("nccl-autopilot demo: closed loop vs static")
ax.legend(loc="lower left"); fig.tight_layout(); fig.savefig(sys.argv[2], dpi=110)
)PY";

void writePlot(const DemoOptions& o, const std::vector<const ModeRecord*>& records) {
  std::string csv = o.outDir + "/timeline.csv";
  std::ofstream f(csv);
  for (const ModeRecord* r : records) {
    for (const auto& [t, g] : r->timeline(0.5)) f << r->mode() << "," << t << "," << g << "\n";
  }
  for (int p = kHealthy; p < numPhases(o); ++p) {
    f << "event," << phaseStart(o, p) << "," << phaseName(o, p) << "\n";
  }
  // Mistuned scenario: where the closed loop left NCCL's choice for good, per size.
  if (o.scenario == "mistuned" && !records.empty() && records[0]->mode() == "closed-loop") {
    for (const auto& [bytes, h] : records[0]->sizeHistory()) {
      if (h.lastWasNcclChoice || h.lastNcclChoiceS < 0) continue;
      f << "event," << h.lastNcclChoiceS << "," << (bytes >> 10) << "K: " << h.lastArm << "\n";
    }
  }
  f.close();
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

void printTables(const DemoOptions& o, const Results& res, bool withClosed) {
  const int n = res.runs();
  if (n > 1) std::printf("\nmedians of %d runs, (min-max) of the runs in brackets\n", n);
  std::printf("\n%-15s | %-21s | %-21s | %-19s | %10s | %-11s | %s\n", "phase", "closed Gbit/s",
              "static Gbit/s", "speedup", "bytes lost", "failovers", "static");
  for (int p = kHealthy; p < numPhases(o); ++p) {
    std::string rails = show(res.figure(p, &PhaseRow::failovers), "%.0f", 1) + "/" +
                        show(res.figure(p, &PhaseRow::recoveries), "%.0f", 1);
    std::printf("%-15s | %-21s | %-21s | %-19s | %10.0f | %-11s | %s\n", phaseName(o, p).c_str(),
                show(res.figure(p, &PhaseRow::closedGbps), "%.3f", n).c_str(),
                show(res.figure(p, &PhaseRow::staticGbps), "%.3f", n).c_str(),
                show(res.figure(p, &PhaseRow::speedup), "%.2fx", n).c_str(),
                res.sum(p, &PhaseRow::bytesLost), withClosed ? rails.c_str() : "-",
                res.notes(p, &PhaseRow::staticNote).c_str());
  }
  for (int p = kHealthy; p < numPhases(o); ++p) {
    if (res.any(p, &PhaseRow::closedFailed)) {
      std::printf("closed loop stopped in %s: %s\n", phaseName(o, p).c_str(),
                  res.notes(p, &PhaseRow::closedNote).c_str());
    }
  }
  if (!withClosed) return;
  // Against what the rails allow: capacity = the live rails' rates of a rank, efficiency =
  // bus bandwidth / capacity; recovery = time to 90% of the phase's steady throughput.
  std::printf("\nclosed loop against the rails:\n%-15s | %8s | %-17s | %-17s | %-17s | %s\n",
              "phase", "capacity", "efficiency", "recovery ms", "max gap ms", "false failovers");
  for (int p = kHealthy; p < numPhases(o); ++p) {
    Figure falseOnes = res.figure(p, &PhaseRow::falseFailovers);
    std::printf("%-15s | %7.0f%% | %-17s | %-17s | %-17s | %s\n", phaseName(o, p).c_str(),
                res.figure(p, &PhaseRow::capacityFraction).median * 100,
                show(res.figure(p, &PhaseRow::efficiency), "%.2f", n).c_str(),
                show(res.figure(p, &PhaseRow::recoveryMs), "%.0f", n).c_str(),
                show(res.figure(p, &PhaseRow::maxGapMs), "%.0f", n).c_str(),
                falseOnes.has() ? show(falseOnes, "%.0f", n).c_str() : "- (a rail is down)");
  }
  double healthyEff = res.figure(kHealthy, &PhaseRow::efficiency).median;
  std::printf("%s phase at %.2f of the rails' capacity: %s\n", phaseName(o, kHealthy).c_str(),
              healthyEff, healthyEff >= 0.8 ? "rail-bound" : "not rail-bound");
  std::printf("false failovers (a rail failed while none was down), warm-up included: %s\n",
              show(res.falseFailoverTotal(), "%.0f", n).c_str());
}

// The closed loop's targets (medians over the runs): each line says the figure, the target
// and whether it is met.
void printTargets(const DemoOptions& o, const Results& res) {
  auto find = [&](const char* name) {
    for (int p = 0; p < numPhases(o); ++p) {
      if (phaseName(o, p) == name) return p;
    }
    return -1;
  };
  auto med = [&](int p, double PhaseRow::*field) { return res.figure(p, field).median; };
  int healthy = kHealthy, healed = find("healed"), degraded = find("degraded"),
      failed = find("failed"), flapping = find("flapping");
  // Faulted phases with a steady capacity: every one below full capacity but the flapping one.
  double minEff = HUGE_VAL, worstRecovery = 0, worstGap = 0;
  std::string minEffAt, recoveryAt, gapAt;
  bool neverSettled = false;
  for (int p = kHealthy; p < numPhases(o); ++p) {
    double eff = med(p, &PhaseRow::efficiency);
    if (p != flapping && capacityMbit(o, p) < capacityMbit(o, kHealthy) && eff < minEff) {
      minEff = eff;
      minEffAt = phaseName(o, p);
    }
    // A phase that never settled has no recovery time: the target is missed there.
    double rec = med(p, &PhaseRow::recoveryMs);
    if (p > kHealthy && !neverSettled && (std::isnan(rec) || rec > worstRecovery)) {
      neverSettled = std::isnan(rec);
      worstRecovery = rec;
      recoveryAt = phaseName(o, p);
    }
    double gap = med(p, &PhaseRow::maxGapMs);
    if (p >= failed && gap > worstGap) {
      worstGap = gap;
      gapAt = phaseName(o, p);
    }
  }
  struct Target {
    std::string what;
    double value;
    const char* format;
    std::string goal;
    bool met;
  };
  double healedVsHealthy = med(healed, &PhaseRow::closedGbps) / med(healthy, &PhaseRow::closedGbps);
  double lost = 0;
  for (int p = kHealthy; p < numPhases(o); ++p) lost += res.sum(p, &PhaseRow::bytesLost);
  double falseOnes = res.falseFailoverTotal().median;
  // Three decimals: a figure just below its target must not print as the target itself.
  std::vector<Target> targets = {
      {"efficiency, worst degraded/failed phase (" + minEffAt + ")", minEff, "%.3f", ">= 0.85",
       minEff >= 0.85},
      {"efficiency, flapping (time-averaged capacity)", med(flapping, &PhaseRow::efficiency),
       "%.3f", ">= 0.70", med(flapping, &PhaseRow::efficiency) >= 0.7},
      {"healed / healthy closed-loop throughput", healedVsHealthy, "%.3f", ">= 0.95",
       healedVsHealthy >= 0.95},
      {"healed: closed loop / restarted static", med(healed, &PhaseRow::speedup), "%.3fx",
       ">= 0.95x", med(healed, &PhaseRow::speedup) >= 0.95},
      {"recovery after each fault or repair, worst (" + recoveryAt + ")", worstRecovery, "%.0f ms",
       "<= 1000 ms", worstRecovery <= 1000},
      {"longest gap from the first failure on (" + gapAt + ")", worstGap, "%.0f ms", "<= 500 ms",
       worstGap <= 500},
      {"false failovers", falseOnes, "%.0f", "0", falseOnes == 0},
      {"bytes lost, all runs", lost, "%.0f", "0", lost == 0},
      {"healthy: closed loop / static", med(healthy, &PhaseRow::speedup), "%.3fx", ">= 0.95x",
       med(healthy, &PhaseRow::speedup) >= 0.95},
      {"degraded: closed loop / static", med(degraded, &PhaseRow::speedup), "%.2fx", ">= 2x",
       med(degraded, &PhaseRow::speedup) >= 2},
  };
  std::printf("\ntargets (closed loop, medians over %d run%s):\n", res.runs(),
              res.runs() > 1 ? "s" : "");
  int met = 0;
  for (const Target& t : targets) {
    char value[32] = "-";
    if (!std::isnan(t.value)) std::snprintf(value, sizeof(value), t.format, t.value);
    std::printf("  %-58s %12s  target %-10s %s\n", t.what.c_str(), value, t.goal.c_str(),
                t.met ? "met" : "NOT met");
    met += t.met;
  }
  std::printf("  %d of %zu targets met\n", met, targets.size());
}

// The mistuned scenario's targets: the tuner, fed only by the profiler's measurements, leaves
// NCCL's (wrong) choice at every size, on every rank at once, and the phase shows the gain.
void printMistunedTargets(const DemoOptions& o, const Results& res) {
  const int p = kHealthy;  // the one phase after the warm-up
  const Figure speedup = res.figure(p, &PhaseRow::speedup);
  const Figure switched = res.figure(p, &PhaseRow::sizesSwitched);
  const Figure sizes = res.figure(p, &PhaseRow::sizes);
  const Figure after = res.figure(p, &PhaseRow::switchedAfterS);
  const int n = res.runs();
  double lost = res.sum(p, &PhaseRow::bytesLost);
  std::printf("\ntargets (closed loop, medians over %d run%s):\n", n, n > 1 ? "s" : "");
  auto line = [](const std::string& what, const std::string& value, const char* goal, bool met) {
    std::printf("  %-58s %12s  target %-10s %s\n", what.c_str(), value.c_str(), goal,
                met ? "met" : "NOT met");
    return int(met);
  };
  int met = 0;
  met += line("mistuned: closed loop / static", show(speedup, "%.2fx", 1), ">= 1.2x",
              speedup.has() && speedup.median >= 1.2);
  met += line("sizes whose all-reduce left NCCL's choice for good",
              show(switched, "%.0f", 1) + " of " + show(sizes, "%.0f", 1), "all",
              switched.has() && switched.lo == sizes.median && sizes.median > 0);
  met += line("identical decisions on every rank", res.identical() ? "yes" : "no", "yes",
              res.identical());
  met += line("bytes lost, all runs", show(Figure{lost, lost, lost}, "%.0f", 1), "0", lost == 0);
  std::printf("  %d of 4 targets met; every size on the tuner's arm %s s into the %.0f s phase\n",
              met, show(after, "%.1f", n).c_str(), o.phaseSeconds);
}

void printDetails(const DemoOptions& o, const ModeRecord& r, int runs) {
  std::printf("\n%s: latency per size (median us) and decisions per phase%s\n", r.mode().c_str(),
              runs > 1 ? " (last run)" : "");
  for (int p = kWarmup; p < numPhases(o); ++p) {
    const PhaseStats& st = r.stats(phaseName(o, p));
    std::printf("  %-15s", phaseName(o, p).c_str());
    for (auto [bytes, lat] : st.latencyUs) {
      std::sort(lat.begin(), lat.end());
      std::printf("  %lluK: %.0f", static_cast<unsigned long long>(bytes >> 10),
                  lat[lat.size() / 2]);
    }
    std::printf("\n                  decisions:");
    for (const auto& [arm, count] : st.decisions) {
      std::printf(" %s x%llu", arm.c_str(), static_cast<unsigned long long>(count));
    }
    std::printf("  (%llu of %llu differ from NCCL's choice)\n",
                static_cast<unsigned long long>(st.tunerChanged),
                static_cast<unsigned long long>(st.iterations));
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
  std::printf("scenario: %.0f s warm-up, then %.1f s per phase:\n", o.warmupSeconds,
              o.phaseSeconds);
  for (int p = kHealthy; p < numPhases(o); ++p) {
    std::printf("  %-15s %s\n", phaseName(o, p).c_str(),
                faults.describe(o.phases[size_t(p)]).c_str());
  }
  if (o.scenario == "mistuned") {
    std::printf(
        "  declared topology: the tree credited with %.0fx the ring's bandwidth, so NCCL's model\n"
        "  picks Tree for every all-reduce (about 1.4x slower than Ring here); the workload is\n"
        "  all-reduce alone\n",
        o.treeBwFactor);
  }
  std::unique_ptr<ModeRecord> closed, stat;
  Results results(o);
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  try {
    for (int run = 0; run < o.repeat; ++run) {
      if (o.repeat > 1) std::fprintf(stderr, "\n=== run %d of %d\n", run + 1, o.repeat);
      closed.reset();
      stat.reset();
      if (o.mode != "static") closed = std::make_unique<ModeRecord>(scenario.run(true));
      if (o.mode != "closed") stat = std::make_unique<ModeRecord>(scenario.run(false));
      results.addRun(closed.get(), stat.get());
    }
  } catch (const Interrupted&) {
    std::fprintf(stderr,
                 "\nautopilot demo: interrupted; stopping the ranks and removing the "
                 "mini-cluster\n");
    return 130;
  }

  printTables(o, results, closed != nullptr);
  if (closed && o.scenario == "faults") printTargets(o, results);
  if (closed && stat && o.scenario == "mistuned") printMistunedTargets(o, results);
  for (const ModeRecord* r : {closed.get(), stat.get()}) {
    if (r) printDetails(o, *r, results.runs());
  }
  std::printf("\nidentical decisions on all ranks: %s (%llu calls compared, %llu differ)\n",
              results.identical() ? "yes" : "NO",
              static_cast<unsigned long long>(results.compared()),
              static_cast<unsigned long long>(results.mismatches()));
  if (!o.json.empty()) writeJson(o.json, o, results, closed.get(), stat.get());
  if (o.plot) {
    std::vector<const ModeRecord*> recs;
    if (closed) recs.push_back(closed.get());
    if (stat) recs.push_back(stat.get());
    writePlot(o, recs);
  }
  std::printf("logs:  %s/<mode>/rank<N>.log%s\n", o.outDir.c_str(),
              results.runs() > 1 ? " (last run)" : "");
  return 0;
}

cli::CommandRegistrar registerDemo("demo", cmdDemo,
                                   "the main job: closed loop vs static on a mini-cluster");

}  // namespace
}  // namespace autopilot::demo

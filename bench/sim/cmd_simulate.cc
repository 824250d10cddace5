// `autopilot simulate`: our policies on a simulated cluster (SimGrid), against static equal
// split and NCCL 2.30's IB resiliency, under gray failures. Each (scenario, policy, seed) runs in
// a child process (SimGrid has one engine per process); the parent aggregates, checks that the
// simulator reproduces the alpha-beta formula and the demo's measured phases, and writes a
// table, a JSON and a plot.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cli_args.h"
#include "bench/commands.h"
#include "bench/sim/sim_spec.h"

#ifdef AUTOPILOT_HAVE_SIMGRID
#include "bench/sim/sim_engine.h"
#endif

namespace autopilot::sim {
namespace {

struct Options {
  bool quick = false;
  int gpus = 1024;
  std::string topo;
  std::vector<std::string> models = {"dense"};
  std::vector<std::string> scenarios;
  std::vector<PolicyKind> policies = {PolicyKind::kStatic, PolicyKind::kNcclResilient,
                                      PolicyKind::kOurs};
  int seeds = 3;
  int jobs = 1;
  bool checks = true;
  bool checksOnly = false;
  std::string json;
  std::string plot;
  int chunksPerRail = 4;
  uint64_t windowBytes = 0;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

const std::vector<std::string>& allScenarios() {
  static const std::vector<std::string> all = {"healthy",   "gray50", "gray10", "nic-down",
                                               "fail-heal", "flap",   "spine",  "multi"};
  return all;
}

FabricSpec builtinFabric(int gpus) {
  FabricSpec f;
  f.gpusPerNode = 8;
  f.nicsPerNode = 8;
  f.nodes = std::max(1, gpus / 8);
  f.nicBytesPerSec = 400e9 / 8;  // 400 Gbit/s per NIC, one per GPU
  f.nicLatencyS = 2e-6;
  f.railOptimized = true;
  f.uplinkBytesPerSec = 0;  // non-blocking spine
  f.nvlinkBytesPerSec = 450e9;
  f.sm = 90;
  char text[512];
  std::snprintf(text, sizeof(text),
                "{\"nodes\": %d, \"gpus_per_node\": 8, \"sm\": 90, \"intra\": \"nvswitch\", "
                "\"nics_per_node\": 8, \"nic_gbps\": 400, \"fabric\": {\"kind\": \"rail\", "
                "\"nic_latency_us\": 2, \"uplink_latency_us\": 1}}",
                f.nodes);
  f.topoText = text;
  return f;
}

// Faults of a scenario; node/nic/onset < 0 are drawn per seed by the run.
Scenario makeScenario(const std::string& name, double warmupS, double stepS) {
  Scenario s;
  s.name = name;
  Fault f;
  f.node = -1;
  f.nic = -1;
  if (name == "gray50" || name == "gray10") {
    f.kind = FaultKind::kGray;
    f.factor = name == "gray50" ? 0.5 : 0.1;
    f.onsetS = 0;
    s.faults.push_back(f);
  } else if (name == "nic-down") {
    f.kind = FaultKind::kDown;
    f.onsetS = -1;
    s.faults.push_back(f);
  } else if (name == "fail-heal") {
    f.kind = FaultKind::kFailHeal;
    f.onsetS = -1;
    f.durationS = warmupS + 0.25 * stepS;  // heals early in the measured step
    s.faults.push_back(f);
  } else if (name == "flap") {
    f.kind = FaultKind::kFlap;
    f.onsetS = -1;
    f.durationS = 0.5;  // down half a second out of every two
    f.periodS = 2.0;
    s.faults.push_back(f);
  } else if (name == "spine") {
    f.kind = FaultKind::kSpine;
    f.factor = 0.1;
    f.onsetS = 0;
    s.faults.push_back(f);
  } else if (name == "multi") {
    Fault g = f;
    g.kind = FaultKind::kGray;
    g.factor = 0.1;
    g.onsetS = 0;
    s.faults.push_back(g);
    Fault d = f;
    d.kind = FaultKind::kDown;
    d.onsetS = -1;
    s.faults.push_back(d);
    Fault sp = f;
    sp.kind = FaultKind::kSpine;
    sp.factor = 0.1;
    sp.onsetS = 0;
    s.faults.push_back(sp);
  }
  return s;
}

std::string serialize(const RunResult& r) {
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "ok=%d step=%.9g comm=%.9g compute=%.9g warmup=%.9g stopped=%d stopat=%.9g "
                "recovery=%.9g transfers=%llu fails=%llu rejoins=%llu splits=%llu badsplits=%llu "
                "tuner=%s\n",
                r.ok ? 1 : 0, r.stepS, r.commS, r.computeS, r.warmupS, r.stopped ? 1 : 0, r.stopAtS,
                r.recoveryS, (unsigned long long)r.transfers, (unsigned long long)r.railFailures,
                (unsigned long long)r.railRejoins, (unsigned long long)r.splitMessages,
                (unsigned long long)r.splitMismatches,
                r.tunerChoice.empty() ? "-" : r.tunerChoice.c_str());
  std::string out = buf;
  if (!r.windowBusBytes.empty()) {
    out.pop_back();  // the newline
    out += " windows=";
    for (size_t i = 0; i < r.windowBusBytes.size(); ++i) {
      std::snprintf(buf, sizeof(buf), "%s%.9g", i ? "," : "", r.windowBusBytes[i]);
      out += buf;
    }
    out += "\n";
  }
  return out;
}

RunResult deserialize(const std::string& s) {
  RunResult r;
  std::stringstream ss(s);
  std::string kv;
  while (ss >> kv) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    double d = std::atof(v.c_str());
    if (k == "ok")
      r.ok = d != 0;
    else if (k == "step")
      r.stepS = d;
    else if (k == "comm")
      r.commS = d;
    else if (k == "compute")
      r.computeS = d;
    else if (k == "warmup")
      r.warmupS = d;
    else if (k == "stopped")
      r.stopped = d != 0;
    else if (k == "stopat")
      r.stopAtS = d;
    else if (k == "recovery")
      r.recoveryS = d;
    else if (k == "transfers")
      r.transfers = uint64_t(d);
    else if (k == "fails")
      r.railFailures = uint64_t(d);
    else if (k == "rejoins")
      r.railRejoins = uint64_t(d);
    else if (k == "splits")
      r.splitMessages = uint64_t(d);
    else if (k == "badsplits")
      r.splitMismatches = uint64_t(d);
    else if (k == "tuner")
      r.tunerChoice = v == "-" ? "" : v;
    else if (k == "windows") {
      std::stringstream ws(v);
      std::string item;
      while (std::getline(ws, item, ',')) r.windowBusBytes.push_back(std::atof(item.c_str()));
    }
  }
  return r;
}

#ifdef AUTOPILOT_HAVE_SIMGRID
int gResultFd = -1;

[[noreturn]] void reportAndExit(const RunResult& r) {
  std::string s = serialize(r);
  ssize_t w = write(gResultFd, s.data(), s.size());
  (void)w;
  _exit(0);
}

// Runs specs in child processes, `jobs` at a time.
std::vector<RunResult> runAll(const std::vector<RunSpec>& specs, int jobs) {
  std::vector<RunResult> out(specs.size());
  struct Child {
    pid_t pid;
    int fd;
    size_t index;
    std::chrono::steady_clock::time_point start;
  };
  std::vector<Child> running;
  size_t next = 0;
  auto reap = [&](Child& c) {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = read(c.fd, buf, sizeof(buf))) > 0) text.append(buf, size_t(n));
    close(c.fd);
    int status = 0;
    waitpid(c.pid, &status, 0);
    RunResult r = deserialize(text);
    if (!r.ok) {
      r.error = WIFSIGNALED(status) ? "the run died on signal " + std::to_string(WTERMSIG(status))
                                    : "the run returned no result";
    }
    r.wallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
    out[c.index] = r;
  };
  while (next < specs.size() || !running.empty()) {
    while (next < specs.size() && int(running.size()) < std::max(1, jobs)) {
      int fds[2];
      if (pipe(fds) != 0) {
        out[next].error = "pipe failed";
        ++next;
        continue;
      }
      std::fflush(nullptr);
      pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        gResultFd = fds[1];
        reportAndExit(runOnce(specs[next], reportAndExit));
      }
      close(fds[1]);
      if (pid < 0) {
        close(fds[0]);
        out[next].error = "fork failed";
        ++next;
        continue;
      }
      running.push_back(Child{pid, fds[0], next, std::chrono::steady_clock::now()});
      ++next;
    }
    // Children write their one line at exit: wait for the oldest.
    reap(running.front());
    running.erase(running.begin());
  }
  return out;
}
#endif

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Row {
  std::string model, scenario, policy;
  double stepS = 0, commS = 0, vsStatic = 0, vsHealthy = 0, recoveryS = -1, wallS = 0;
  bool stopped = false;
  int stoppedRuns = 0, runs = 0;
  double failures = 0, rejoins = 0;
  std::string tuner;
};

struct Check {
  std::string name;
  double predicted = 0, measured = 0, error = 0, limit = 0;
  bool pass = false;
  bool gates = true;  // a failure fails the command (and CTest sim_quick)
  std::string note;
};

// A phase of the demo's mini-cluster: ours against the same job with RunSpec::split's
// placements, Gbit/s of bus bandwidth (-1: stopped).
struct DemoBound {
  std::string phase;
  double capacityGbps = 0, oursGbps = -1, trueRatesGbps = -1, sustainedGbps = -1;
};

std::string jsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

}  // namespace

int cmdSimulate(int argc, char** argv) {
  Options o;
  std::string models = "dense", scenarios, policies = "static,nccl-2.30,ours";
  int windowMib = 0;
  cli::Args args(
      "autopilot simulate",
      "Our rail striper, failure detector, rail health, failback scheduler and tuner policy on\n"
      "a simulated cluster (SimGrid), against static equal split and NCCL 2.30's IB resiliency,\n"
      "under NIC faults; one training step per (scenario, policy, seed).");
  args.addFlag("--quick", o.quick, "64 GPUs (8 nodes x 8 GPUs x 8 NICs), 2 seeds, the checks (CI)");
  args.addInt("--gpus", o.gpus, 1, 1 << 20,
              "GPUs of the built-in rail-optimized H100 fabric (8 per node; --quick: 64)");
  args.addText("--topo", o.topo,
               "fabric from a .topo.json with a \"fabric\" member (docs/simulate.md)")
      .typeName("FILE");
  args.addChoiceList("--model", models, {"dense", "moe"},
                     "dense (Llama-70B class), moe (Mixtral-8x22B class)")
      .showDefault();
  std::string allNames;
  for (const std::string& s : allScenarios()) allNames += (allNames.empty() ? "" : ",") + s;
  args.addChoiceList("--scenarios", scenarios, allScenarios(),
                     "comma-separated (default all: " + allNames + ")");
  args.addChoiceList("--policies", policies, {"static", "nccl-2.30", "nccl", "ours"},
                     "comma-separated (nccl: the same as nccl-2.30)")
      .showDefault();
  args.addInt("--seeds", o.seeds, 1, 1 << 20,
              "random onsets and faulty NICs per scenario (--quick: 2 for 3)");
  args.addInt("--jobs", o.jobs, 1, 4096, "runs in parallel");
  bool noChecks = false;
  args.addFlag("--no-checks", noChecks, "skip the reproduction checks");
  args.addFlag("--checks-only", o.checksOnly, "only the reproduction checks");
  args.addInt("--chunks-per-rail", o.chunksPerRail, 1, 1 << 20,
              "simulation granularity of a ring step");
  args.addInt("--window-mib", windowMib, 1, 1 << 20,
              "the striper's in-flight cap per rail (default 4; above the chunk size)")
      .hideDefault();
  args.addText("--json", o.json, "the results as JSON").typeName("FILE");
  args.addText("--plot", o.plot, "step time per scenario and policy (PNG, python3-matplotlib)")
      .typeName("FILE");
  args.footer(
      "Exit codes: 0 ok, 1 a reproduction check failed, 2 bad usage, 77 built without "
      "SimGrid.");
  if (std::optional<int> rc = args.parse(argc, argv)) return *rc;
  o.checks = !noChecks;
  o.models = split(models);
  o.scenarios = split(scenarios);
  o.policies.clear();
  for (const std::string& p : split(policies)) {
    o.policies.push_back(p == "static" ? PolicyKind::kStatic
                         : p == "ours" ? PolicyKind::kOurs
                                       : PolicyKind::kNcclResilient);
  }
  if (windowMib > 0) o.windowBytes = uint64_t(windowMib) << 20;
#ifndef AUTOPILOT_HAVE_SIMGRID
  std::fprintf(stderr,
               "autopilot simulate: this build has no SimGrid (libsimgrid-dev was not found when "
               "CMake configured the build); install it (apt-get install libsimgrid-dev) and "
               "re-run cmake\n");
  return 77;
#else
  if (o.quick) {
    o.gpus = 64;
    if (o.seeds == 3) o.seeds = 2;
  }
  if (o.scenarios.empty()) o.scenarios = allScenarios();
  FabricSpec fabric = builtinFabric(o.gpus);
  if (!o.topo.empty()) {
    std::ifstream in(o.topo);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string err;
    if (!in || !fabricFromJson(ss.str(), &fabric, &err)) {
      std::fprintf(stderr, "autopilot simulate: %s: %s\n", o.topo.c_str(),
                   in ? err.c_str() : "cannot read");
      return 2;
    }
  }
  if (fabric.nicsPerNode > 16) {
    std::fprintf(stderr, "autopilot simulate: at most 16 NICs per node (the striper's rails)\n");
    return 2;
  }
  int gpus = fabric.nodes * fabric.gpusPerNode;
  std::printf(
      "autopilot simulate: %d GPUs = %d nodes x %d GPUs, %d NICs/node at %.0f Gbit/s, "
      "%s fabric (SimGrid flow model)\n",
      gpus, fabric.nodes, fabric.gpusPerNode, fabric.nicsPerNode, fabric.nicBytesPerSec * 8e-9,
      fabric.railOptimized ? "rail-optimized" : "fat-tree");
  std::fflush(stdout);

  std::vector<Row> rows;
  std::vector<Check> checks;
  std::vector<DemoBound> demoBounds;
  int failedChecks = 0;
  auto wall0 = std::chrono::steady_clock::now();

  if (!o.checksOnly) {
    for (const std::string& modelName : o.models) {
      RunSpec base;
      base.fabric = fabric;
      base.workload = modelName == "moe" ? WorkloadKind::kMoe : WorkloadKind::kDense;
      base.model = modelName == "moe" ? mixtral8x22b() : llama70b();
      base.chunksPerRail = o.chunksPerRail;
      base.windowBytes = o.windowBytes;
      if (o.quick) {
        base.model.pp = 2;
        base.model.microBatches = 4;
        if (base.workload == WorkloadKind::kMoe) base.model.ep = 4;
      }
      // The healthy runs first: their warm-up length is where random onsets fall.
      std::map<PolicyKind, RunResult> healthy;
      {
        std::vector<RunSpec> specs;
        for (PolicyKind p : o.policies) {
          RunSpec s = base;
          s.policy = p;
          s.scenario = makeScenario("healthy", 0, 0);
          specs.push_back(s);
        }
        std::vector<RunResult> res = runAll(specs, o.jobs);
        for (size_t i = 0; i < specs.size(); ++i) healthy[specs[i].policy] = res[i];
      }
      const RunResult& h0 = healthy.begin()->second;
      if (!h0.ok) {
        std::fprintf(stderr, "autopilot simulate: the healthy run failed: %s\n", h0.error.c_str());
        return 1;
      }
      std::printf(
          "  %s: healthy step %.3f s (compute %.3f s, network %.3f s), warm-up %.3f s, "
          "%llu transfers, %.1f s wall\n",
          base.model.name.c_str(), h0.stepS, h0.computeS, h0.commS, h0.warmupS,
          (unsigned long long)h0.transfers, h0.wallS);
      std::fflush(stdout);
      std::vector<RunSpec> specs;
      struct Key {
        std::string scenario;
        PolicyKind policy;
      };
      std::vector<Key> keys;
      for (const std::string& sc : o.scenarios) {
        for (PolicyKind p : o.policies) {
          int seeds = sc == "healthy" ? 1 : o.seeds;
          for (int seed = 1; seed <= seeds; ++seed) {
            if (sc == "healthy") {
              keys.push_back({sc, p});
              specs.push_back(RunSpec{});  // placeholder: reuse the healthy run
              continue;
            }
            RunSpec s = base;
            s.policy = p;
            s.seed = uint64_t(seed) * 7919;
            s.warmupS = h0.warmupS;
            s.scenario = makeScenario(sc, h0.warmupS, h0.stepS);
            keys.push_back({sc, p});
            specs.push_back(s);
          }
        }
      }
      // Run everything but the placeholders.
      std::vector<RunSpec> toRun;
      std::vector<size_t> where;
      for (size_t i = 0; i < specs.size(); ++i) {
        if (keys[i].scenario != "healthy") {
          toRun.push_back(specs[i]);
          where.push_back(i);
        }
      }
      std::vector<RunResult> ran = runAll(toRun, o.jobs);
      std::vector<RunResult> results(specs.size());
      for (size_t i = 0; i < specs.size(); ++i) {
        if (keys[i].scenario == "healthy") results[i] = healthy[keys[i].policy];
      }
      for (size_t i = 0; i < where.size(); ++i) results[where[i]] = ran[i];
      // Effective step of a stopped job: the step plus the restart and, on average, half a
      // checkpoint interval of lost work.
      auto effective = [&](const RunResult& r, PolicyKind p) {
        if (!r.stopped) return r.stepS;
        return healthy[p].stepS + base.statics.restartS + base.statics.checkpointIntervalS / 2;
      };
      std::map<std::pair<std::string, PolicyKind>, std::vector<size_t> > groups;
      for (size_t i = 0; i < keys.size(); ++i)
        groups[{keys[i].scenario, keys[i].policy}].push_back(i);
      for (const std::string& sc : o.scenarios) {
        for (PolicyKind p : o.policies) {
          const std::vector<size_t>& idx = groups[{sc, p}];
          Row row;
          row.model = base.model.name;
          row.scenario = sc;
          row.policy = policyName(p);
          std::vector<double> step, comm, vsS, vsH, rec, wall;
          for (size_t i : idx) {
            const RunResult& r = results[i];
            if (!r.ok) {
              std::fprintf(stderr, "autopilot simulate: %s/%s failed: %s\n", sc.c_str(),
                           policyName(p), r.error.c_str());
              continue;
            }
            row.runs++;
            row.stoppedRuns += r.stopped ? 1 : 0;
            double e = effective(r, p);
            step.push_back(e);
            comm.push_back(r.stopped ? NAN : r.commS);
            wall.push_back(r.wallS);
            if (r.recoveryS >= 0) rec.push_back(r.recoveryS);
            row.failures += double(r.railFailures);
            row.rejoins += double(r.railRejoins);
            if (!r.tunerChoice.empty()) row.tuner = r.tunerChoice;
            // Same seed, static policy.
            for (size_t j : groups[{sc, PolicyKind::kStatic}]) {
              if (specs[j].seed == specs[i].seed && results[j].ok) {
                vsS.push_back(e / effective(results[j], PolicyKind::kStatic));
              }
            }
            vsH.push_back(e / healthy[p].stepS);
          }
          row.stepS = median(step);
          std::vector<double> c2;
          for (double c : comm) {
            if (!std::isnan(c)) c2.push_back(c);
          }
          row.commS = c2.empty() ? NAN : median(c2);
          row.vsStatic = vsS.empty() ? NAN : median(vsS);
          row.vsHealthy = median(vsH);
          row.recoveryS = rec.empty() ? -1 : median(rec);
          row.wallS = median(wall);
          row.stopped = row.stoppedRuns * 2 > row.runs;
          if (row.runs > 0) {
            row.failures /= row.runs;
            row.rejoins /= row.runs;
          }
          rows.push_back(row);
        }
      }
    }
  }

  if (o.checks) {
    // 1. Ring all-reduce and all-gather on a healthy fabric vs the alpha-beta formula: n members
    //    per ring, one ring per GPU of a node, every GPU's share striped over the node's NICs.
    FabricSpec f = builtinFabric(64);
    std::vector<RunSpec> specs;
    std::vector<std::pair<std::string, double> > predicted;
    for (PolicyKind p : {PolicyKind::kStatic, PolicyKind::kOurs}) {
      for (const char* algo : {"ring", "allgather"}) {
        for (uint64_t bytes : {uint64_t(64) << 20, uint64_t(1) << 30}) {
          RunSpec s;
          s.fabric = f;
          s.workload = WorkloadKind::kAllReduce;
          s.allReduceBytes = bytes;
          s.algo = algo;
          s.policy = p;
          s.chunksPerRail = o.chunksPerRail;
          specs.push_back(s);
          int n = f.nodes;
          int steps = std::string(algo) == "ring" ? 2 * (n - 1) : n - 1;
          double alpha = 2 * f.nicLatencyS;
          double perNic = double(f.gpusPerNode) * double(bytes / uint64_t(n)) / f.nicsPerNode;
          double t = steps * (alpha + perNic / f.nicBytesPerSec);
          char name[160];
          std::snprintf(name, sizeof(name), "%s %s %llu MiB, %d nodes x %d GPUs (%s) vs alpha-beta",
                        std::string(algo) == "ring" ? "ring all-reduce" : "ring all-gather", "",
                        (unsigned long long)(bytes >> 20), f.nodes, f.gpusPerNode, policyName(p));
          predicted.push_back({name, t});
        }
      }
    }
    // 2. The demo's mini-cluster as `autopilot demo` runs it (default scenario): 4 hosts x 3
    //    rails at 250 Mbit/s, a 4 s warm-up, then 7 s phases, each one state of the rails
    //    (rail 1 takes every fault, rail 2 is the second one degraded); the demo's workload
    //    (all-reduce, all-gather, reduce-scatter and broadcast of each of its sizes in turn), bus
    //    bandwidth per phase. The closed loop runs the whole timeline in one job, as the demo does.
    //    The static job stops where a rail goes down and, as in the demo, is restarted at the next
    //    phase.
    FabricSpec demo;
    demo.nodes = 4;
    demo.gpusPerNode = 1;
    demo.nicsPerNode = 3;
    demo.nicBytesPerSec = 250e6 / 8;
    demo.nicLatencyS = 50e-6;
    demo.railOptimized = true;
    demo.rdma = false;  // the demo's rails are TCP over veth
    // tc tbf's bucket on each rail (bench/net/netns.cc, tbfArguments): max(128 KiB, 4 ms at
    // the rate), i.e. 128 KiB at every rate the demo uses.
    demo.shaperBurstBytes = 128 << 10;
    demo.topoText =
        "{\"nodes\": 4, \"gpus_per_node\": 1, \"nics_per_node\": 3, \"nic_gbps\": 0.25}";
    constexpr double kStopped = -1, kNotCompared = -2;
    struct DemoPhase {
      const char* name;
      std::vector<double> rate;  // per rail, fraction of 250 Mbit/s (0: down)
      bool flap;                 // rail 1 down, then up, every 1.5 s
      // README demo table (two sets of `autopilot demo --repeat 3` as root, 2026-12-06, of the
      // demo and the plugin this simulation models): medians of the six runs, Gbit/s.
      double ours, statics;
    };
    const std::vector<DemoPhase> phases = {
        {"healthy", {1, 1, 1}, false, 0.644, 0.669},
        {"degraded", {1, 0.1, 1}, false, 0.411, 0.068},
        {"failed", {1, 0, 1}, false, 0.440, kStopped},
        {"healed", {1, 1, 1}, false, 0.626, 0.671},
        {"half-rate", {1, 0.5, 1}, false, 0.458, 0.352},
        {"two-degraded", {1, 0.1, 0.1}, false, 0.204, 0.068},
        {"failed+degraded", {1, 0, 0.1}, false, 0.220, kStopped},
        {"healed+degraded", {1, 1, 0.1}, false, 0.409, 0.067},
        // The static job stopped in 6 of 6 runs: TCP's retransmission back-off grows with
        // every outage until nothing moves for 7 s; the flow model has no back-off, so its
        // static job rides the outages out. Not compared.
        {"flapping", {1, 1, 1}, true, 0.490, kNotCompared},
    };
    constexpr double kDemoWarmupS = 4, kDemoPhaseS = 7;
    // The demo's stop verdict: nothing completed for max(6 s, a phase), and its next phase
    // waits for the verdict. Here the next phase starts on time, so the verdict comes at 6 s,
    // within the phase (a repair at its end would otherwise revive the stalled job). A stop
    // counts in the phase where the stall began.
    constexpr double kDemoStallS = 6.0;
    // The demo changes phase only while the job has completed a collective in the last 0.25 s
    // (cmd_demo.cc, kHoldSeconds), so a job slowed down by one phase meets the next phase's
    // fault just after a completion, and its stall begins in that phase. Here faults come on
    // time, mid-collective, and the last bytes that moved may precede the edge by a chunk's time
    // on a slow rail: a stall that began within the hold before a phase's end counts in the next.
    constexpr double kDemoHoldS = 0.25;
    auto stallBeganBefore = [&](const RunResult& r, double edgeS) {
      return r.stopped && r.stopAtS - kDemoStallS + kDemoHoldS < edgeS;
    };
    // A demo run of the phases [first, phases.size()): rail states as faults at each phase's
    // start, one window per phase (after the warm-up when `warmup`).
    auto demoRun = [&](PolicyKind policy, size_t first, bool warmup) {
      RunSpec s;
      s.fabric = demo;
      s.workload = WorkloadKind::kAllReduce;
      s.algo = "ring";
      s.policy = policy;
      s.scenario.name = "demo";
      s.chunksPerRail = 4;
      s.pluginChunks = true;
      s.cycleBytes = {256u << 10, 1u << 20, 4u << 20};
      // The demo's collectives as its engine runs them with ring algorithms and its Simple
      // protocol (256 KiB slices, 8 in flight per connection; bench/demo/collectives.cc), one
      // chunk queue per rail and connection, the shaper's bucket (above) and the ranks' host
      // work between calls.
      s.sliceBytes = 256u << 10;
      s.sliceDepth = 8;
      s.cycleCollectives = {"allreduce", "allgather", "reducescatter", "broadcast"};
      // Rank 0's trace of a closed-loop demo run (2026-12-05): from one collective's end to the
      // next one's start, a mean of 0.74-0.95 ms in each phase (median 0.45-0.54 ms).
      s.hostGapS = 0.9e-3;
      // The hosts' part of each chunk (RunSpec::hostDelayS), from the healthy phase of rank 0's
      // traces of two closed-loop demo runs (2026-12-06, not among the runs of the table above):
      // over the twelve collectives and sizes, the median times' rms log error was 0.31 without
      // it, 0.29 at 0.3 ms, 0.19 at 0.6, 0.21 at 0.8 and 0.29 at 1 ms (the 256 KiB all-reduce
      // 6.6-6.8 ms measured, 3.5 ms without it, 4.2 at 0.6 ms: below about 0.5 ms a step's
      // chunk waits for the shaper's bucket anyway).
      s.hostDelayS = 0.6e-3;
      s.nccl.detectS = kDemoStallS;
      double t = warmup ? kDemoWarmupS : 0;
      s.windowEdgesS.push_back(t);
      std::vector<double> rate(3, 1.0);
      for (size_t p = first; p < phases.size(); ++p, t += kDemoPhaseS) {
        s.windowEdgesS.push_back(t + kDemoPhaseS);
        for (int r = 0; r < 3; ++r) {
          const double want = phases[p].rate[size_t(r)];
          if (want == rate[size_t(r)]) continue;
          rate[size_t(r)] = want;
          for (int n = 0; n < 4; ++n) {
            Fault f;
            f.kind = want > 0 ? FaultKind::kGray : FaultKind::kDown;
            f.node = n;
            f.nic = r;
            f.factor = want;
            f.onsetS = t;
            s.scenario.faults.push_back(f);
          }
        }
        if (phases[p].flap) {
          for (int n = 0; n < 4; ++n) {
            Fault f;
            f.kind = FaultKind::kFlap;
            f.node = n;
            f.nic = 1;
            f.onsetS = t;
            f.durationS = 1.5;
            f.periodS = 3.0;
            s.scenario.faults.push_back(f);
          }
        }
      }
      return s;
    };
    size_t demoFirst = specs.size();
    specs.push_back(demoRun(PolicyKind::kOurs, 0, true));
    // What the rails allow the demo's collectives: the same job placing each message in
    // proportion to the rails' true rates, then to rates it measures itself, in pieces of 16
    // KiB or more (the plugin's chunks are 64 KiB or more and follow its striper's estimates).
    // Their throughputs are reported; the splits' bookkeeping and the sustained-rate split's
    // lowest efficiency are checked (below).
    for (RunSpec::Split split : {RunSpec::Split::kTrueRates, RunSpec::Split::kSustainedRates}) {
      specs.push_back(demoRun(PolicyKind::kOurs, 0, true));
      specs.back().split = split;
    }
    std::vector<RunResult> res = runAll(specs, o.jobs);
    for (size_t i = 0; i < predicted.size(); ++i) {
      Check c;
      c.name = predicted[i].first;
      c.predicted = predicted[i].second;
      c.measured = res[i].stepS;
      c.error = res[i].ok ? std::fabs(c.measured - c.predicted) / c.predicted : 1;
      c.limit = 0.02;
      c.pass = res[i].ok && !res[i].stopped && c.error <= c.limit;
      c.note = "seconds, simulated (measured) vs formula (predicted)";
      checks.push_back(c);
    }
    // The static segments: from the start, then from each phase after a stop.
    std::vector<double> staticGbps(phases.size(), kStopped);
    {
      size_t first = 0;
      bool warmup = true;
      while (first < phases.size()) {
        RunResult r = runAll({demoRun(PolicyKind::kStatic, first, warmup)}, 1)[0];
        size_t p = first;
        for (size_t w = 0; w < r.windowBusBytes.size() && p < phases.size(); ++w, ++p) {
          const double end = (warmup ? kDemoWarmupS : 0) + kDemoPhaseS * double(w + 1);
          if (stallBeganBefore(r, end)) break;
          staticGbps[p] = r.windowBusBytes[w] * 8e-9 / kDemoPhaseS;
        }
        if (!r.ok || !r.stopped) break;
        first = p + 1;  // restarted after the phase it stopped in
        warmup = false;
      }
    }
    const RunResult& ours = res[demoFirst];
    const RunResult& trueRates = res[demoFirst + 1];
    const RunResult& sustained = res[demoFirst + 2];
    for (size_t p = 0; p < phases.size(); ++p) {
      DemoBound b;
      b.phase = phases[p].name;
      // The live rails' rates; the flapping rail counts for the half of the phase it is up.
      for (size_t r = 0; r < phases[p].rate.size(); ++r) {
        const bool flapping = phases[p].flap && r == 1;
        b.capacityGbps += (flapping ? 0.5 : phases[p].rate[r]) * demo.nicBytesPerSec * 8e-9;
      }
      const double edge = kDemoWarmupS + kDemoPhaseS * double(p + 1);
      if (ours.ok && p < ours.windowBusBytes.size() && !stallBeganBefore(ours, edge))
        b.oursGbps = ours.windowBusBytes[p] * 8e-9 / kDemoPhaseS;
      auto gbps = [&](const RunResult& r) {
        if (!r.ok || p >= r.windowBusBytes.size() || stallBeganBefore(r, edge)) return -1.0;
        return r.windowBusBytes[p] * 8e-9 / kDemoPhaseS;
      };
      b.trueRatesGbps = gbps(trueRates);
      b.sustainedGbps = gbps(sustained);
      demoBounds.push_back(b);
    }
    // The splits themselves: every phase ran (the jobs keep our failure handling), messages
    // were split, and each split's pieces added up to its message.
    for (const RunResult* r : {&trueRates, &sustained}) {
      const bool isTrue = r == &trueRates;
      Check c;
      c.name = std::string("demo mini-cluster, ") + (isTrue ? "true" : "sustained") +
               "-rate split: phases run minus bad splits";
      int ran = 0;
      for (const DemoBound& b : demoBounds)
        ran += (isTrue ? b.trueRatesGbps : b.sustainedGbps) > 0 ? 1 : 0;
      c.predicted = double(phases.size());
      c.measured = double(ran) - double(r->splitMismatches);
      c.error = std::fabs(c.predicted - c.measured) / c.predicted;
      c.limit = 0;
      c.pass =
          r->ok && ran == int(phases.size()) && r->splitMessages > 0 && r->splitMismatches == 0;
      c.note = "every phase ran and every split added up";
      checks.push_back(c);
    }
    {
      // The sustained-rate split's lowest efficiency over the phases (0.86 on 2026-12-06): the
      // model is deterministic, so a change to the policies it runs (the striper's bookkeeping,
      // the rail health, the estimator here) that undoes the finding shows.
      Check c;
      c.name = "demo mini-cluster, sustained-rate split: lowest phase efficiency";
      c.predicted = 0.80;
      c.measured = 1;
      for (const DemoBound& b : demoBounds)
        c.measured = std::min(c.measured, std::max(0.0, b.sustainedGbps) / b.capacityGbps);
      c.limit = 0;
      c.error = std::max(0.0, c.predicted - c.measured) / c.predicted;
      c.pass = c.measured >= c.predicted;
      c.note = "at least 0.80 of the live rails' rates in every phase";
      checks.push_back(c);
    }
    for (size_t p = 0; p < phases.size(); ++p) {
      for (PolicyKind policy : {PolicyKind::kOurs, PolicyKind::kStatic}) {
        const bool isOurs = policy == PolicyKind::kOurs;
        const double measured = isOurs ? phases[p].ours : phases[p].statics;
        if (measured == kNotCompared) continue;
        double predicted = kStopped;
        if (isOurs && ours.ok && p < ours.windowBusBytes.size() &&
            !stallBeganBefore(ours, kDemoWarmupS + kDemoPhaseS * double(p + 1))) {
          predicted = ours.windowBusBytes[p] * 8e-9 / kDemoPhaseS;
        }
        if (!isOurs) predicted = staticGbps[p];
        Check c;
        c.name = std::string("demo mini-cluster ") + phases[p].name + " (" + policyName(policy) +
                 "), bus bandwidth Gbit/s";
        c.predicted = predicted;
        c.measured = measured;
        c.limit = 0.15;
        if (measured < 0 || predicted < 0) {
          // Whether the job stops is no matter of degree: where the demo stopped, the
          // simulation must stop, and nowhere else.
          c.pass = (measured < 0) == (predicted < 0);
          c.error = c.pass ? 0 : 1;
          c.note = measured < 0 ? "stopped in the demo; the simulation must stop too"
                                : "ran in the demo; the simulation must not stop";
        } else {
          // The static job has no policy: its phases test the model of the demo itself (its
          // collectives, the rails' queues and shapers), and they gate. The closed loop's are
          // reported: there the real transport's TCP losses on a policed rail and the tuner's
          // exploration, which the model lacks, show (README, At scale).
          c.gates = !isOurs;
          c.error = std::fabs(c.predicted - c.measured) / c.measured;
          c.pass = c.error <= c.limit;
          c.note = "demo figures: README demo table (median of 6 runs as root, 2026-12-06)";
        }
        checks.push_back(c);
      }
    }
  }

  double wallTotal =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();

  // Table.
  if (!rows.empty()) {
    std::printf("\n%-14s %-10s %-10s %11s %11s %9s %9s %9s %8s %7s %8s\n", "model", "scenario",
                "policy", "step (s)", "network (s)", "vs static", "vs healthy", "recovery",
                "stopped", "wall s", "tuner");
    for (const Row& r : rows) {
      char rec[32];
      if (r.recoveryS >= 0)
        std::snprintf(rec, sizeof(rec), "%.3f s", r.recoveryS);
      else
        std::snprintf(rec, sizeof(rec), "-");
      std::printf("%-14s %-10s %-10s %11.3f %11.3f %8.2fx %9.2fx %9s %5d/%-2d %7.1f %8s\n",
                  r.model.c_str(), r.scenario.c_str(), r.policy.c_str(), r.stepS, r.commS,
                  r.vsStatic, r.vsHealthy, rec, r.stoppedRuns, r.runs, r.wallS,
                  r.tuner.empty() ? "-" : r.tuner.c_str());
    }
    // The targets of issue 18, from the medians.
    auto find = [&](const std::string& model, const std::string& sc,
                    const std::string& p) -> const Row* {
      for (const Row& r : rows) {
        if (r.model == model && r.scenario == sc && r.policy == p) return &r;
      }
      return nullptr;
    };
    for (const std::string& m : {std::string("llama-70b"), std::string("mixtral-8x22b")}) {
      const Row* g10s = find(m, "gray10", "static");
      const Row* g10o = find(m, "gray10", "ours");
      if (g10s && g10o) {
        std::printf(
            "\n%s, one NIC at 10%%: ours vs static: %.2fx faster step, %.2fx faster "
            "network phases\n",
            m.c_str(), g10s->stepS / g10o->stepS, g10s->commS / g10o->commS);
      }
      const Row* down = find(m, "nic-down", "ours");
      const Row* h = find(m, "healthy", "ours");
      if (down && h) {
        double k = fabric.nicsPerNode;
        double bound = h->commS * k / (k - 1);
        std::printf(
            "%s, one NIC down: ours network %.4f s vs healthy x %d/%d = %.4f s "
            "(%+.2f%%), job stopped in %d of %d runs\n",
            m.c_str(), down->commS, int(k), int(k - 1), bound, 100 * (down->commS / bound - 1),
            down->stoppedRuns, down->runs);
      }
    }
  }
  if (!checks.empty()) {
    std::printf("\nreproduction checks:\n");
    for (const Check& c : checks) {
      std::printf("  %-4s %-78s predicted %.6g measured %.6g error %.1f%% (limit %.0f%%)\n",
                  c.pass ? "ok" : (c.gates ? "FAIL" : "miss"), c.name.c_str(), c.predicted,
                  c.measured, 100 * c.error, 100 * c.limit);
      // The alpha-beta checks, where jobs stop and the static job's throughputs gate; the closed
      // loop's throughputs are reported, a miss is not a failure (docs/simulate.md).
      if (!c.pass && c.gates) failedChecks++;
    }
  }
  if (!demoBounds.empty()) {
    std::printf(
        "\ndemo mini-cluster, what the rails allow (throughputs reported; the checks above gate "
        "the splits'\nbookkeeping and the sustained-rate split's lowest efficiency): ours "
        "against the same job\nsplitting each message in proportion to the rails' true rates, "
        "then to sustained rates it\nmeasures itself, pieces >= %llu KiB; Gbit/s of bus "
        "bandwidth and, in brackets, efficiency\n(against the live rails' rates)\n",
        (unsigned long long)(RunSpec{}.splitMinPieceBytes >> 10));
    std::printf("  %-16s %9s %16s %16s %16s\n", "phase", "capacity", "ours", "true rates",
                "sustained rates");
    for (const DemoBound& b : demoBounds) {
      auto cell = [&](double g) {
        char buf[32];
        if (g < 0)
          std::snprintf(buf, sizeof(buf), "stopped");
        else
          std::snprintf(buf, sizeof(buf), "%.3f (%.2f)", g, g / b.capacityGbps);
        return std::string(buf);
      };
      std::printf("  %-16s %9.3f %16s %16s %16s\n", b.phase.c_str(), b.capacityGbps,
                  cell(b.oursGbps).c_str(), cell(b.trueRatesGbps).c_str(),
                  cell(b.sustainedGbps).c_str());
    }
  }
  std::printf("\nwall time %.1f s (shared 2-core machine)\n", wallTotal);

  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << "{\"gpus\": " << gpus << ", \"scenarios\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      auto num = [](double v) {
        if (std::isnan(v) || std::isinf(v)) return std::string("null");
        char b[64];
        std::snprintf(b, sizeof(b), "%.6g", v);
        return std::string(b);
      };
      out << (i ? ", " : "") << "{\"model\": \"" << jsonEscape(r.model) << "\", \"name\": \""
          << jsonEscape(r.scenario) << "\", \"policy\": \"" << r.policy
          << "\", \"step_time_s\": " << num(r.stepS) << ", \"comm_time_s\": " << num(r.commS)
          << ", \"vs_static\": " << num(r.vsStatic) << ", \"vs_healthy\": " << num(r.vsHealthy)
          << ", \"stopped\": " << (r.stopped ? "true" : "false")
          << ", \"recovery_s\": " << (r.recoveryS >= 0 ? num(r.recoveryS) : "null")
          << ", \"runs\": " << r.runs << ", \"wall_s\": " << num(r.wallS) << "}";
    }
    out << "], \"reproduction\": [";
    for (size_t i = 0; i < checks.size(); ++i) {
      const Check& c = checks[i];
      out << (i ? ", " : "") << "{\"check\": \"" << jsonEscape(c.name)
          << "\", \"predicted\": " << c.predicted << ", \"measured\": " << c.measured
          << ", \"error\": " << c.error << ", \"limit\": " << c.limit
          << ", \"pass\": " << (c.pass ? "true" : "false") << "}";
    }
    out << "], \"demo_bound\": [";
    for (size_t i = 0; i < demoBounds.size(); ++i) {
      const DemoBound& b = demoBounds[i];
      out << (i ? ", " : "") << "{\"phase\": \"" << jsonEscape(b.phase)
          << "\", \"capacity_gbps\": " << b.capacityGbps << ", \"ours_gbps\": " << b.oursGbps
          << ", \"true_rates_gbps\": " << b.trueRatesGbps
          << ", \"sustained_rates_gbps\": " << b.sustainedGbps << "}";
    }
    out << "], \"wall_s\": " << wallTotal << "}\n";
    if (!out) {
      std::fprintf(stderr, "autopilot simulate: cannot write %s\n", o.json.c_str());
      return 1;
    }
  }
  if (!o.plot.empty() && !rows.empty()) {
    std::string data = o.plot + ".csv";
    {
      std::ofstream out(data);
      out << "model,scenario,policy,step_s,comm_s,stopped\n";
      for (const Row& r : rows) {
        out << r.model << "," << r.scenario << "," << r.policy << "," << r.stepS << "," << r.commS
            << "," << (r.stopped ? 1 : 0) << "\n";
      }
    }
    static const char* kPlot = R"PY(
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
models = sorted(set(r["model"] for r in rows))
fig, axes = plt.subplots(1, len(models), figsize=(7 * len(models), 4.5), squeeze=False)
for ax, m in zip(axes[0], models):
    rs = [r for r in rows if r["model"] == m]
    scen = list(dict.fromkeys(r["scenario"] for r in rs))
    pols = list(dict.fromkeys(r["policy"] for r in rs))
    w = 0.8 / len(pols)
    for i, p in enumerate(pols):
        ys, hatch = [], []
        for s in scen:
            v = [r for r in rs if r["scenario"] == s and r["policy"] == p]
            ys.append(float(v[0]["comm_s"]) if v and v[0]["stopped"] == "0" and v[0]["comm_s"] != "nan" else 0)
        ax.bar([x + i * w for x in range(len(scen))], ys, w, label=p)
        for x, s in enumerate(scen):
            v = [r for r in rs if r["scenario"] == s and r["policy"] == p]
            if v and v[0]["stopped"] == "1":
                ax.text(x + i * w, 0, "stopped", rotation=90, ha="center", va="bottom", fontsize=7)
    ax.set_xticks([x + 0.4 - w / 2 for x in range(len(scen))])
    ax.set_xticklabels(scen, rotation=30)
    ax.set_ylabel("network time per step (s)")
    ax.set_title(m)
    ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
)PY";
    std::string script = o.plot + ".py";
    {
      std::ofstream out(script);
      out << kPlot;
    }
    // Debian's interpreter first: python3-matplotlib is installed for it, and a python3 earlier
    // on PATH (a virtual environment) may lack it.
    const char* py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    std::string cmd = std::string(py) + " '" + script + "' '" + data + "' '" + o.plot + "'";
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr,
                   "autopilot simulate: plotting failed (python3-matplotlib?); the data "
                   "is in %s\n",
                   data.c_str());
    } else {
      std::remove(script.c_str());
      std::printf("plot: %s\n", o.plot.c_str());
    }
  }
  return failedChecks > 0 ? 1 : 0;
#endif
}

static autopilot::cli::CommandRegistrar reg(
    "simulate", cmdSimulate,
    "our policies on a simulated 1,000+ GPU cluster under NIC faults (SimGrid)");

}  // namespace autopilot::sim

// `autopilot demo-rank`: one rank of the demo's mini-cluster (started by `autopilot demo`, not
// by hand). It loads the three plugins exactly as NCCL would (NCCL_*_PLUGIN from its
// environment, the same .so), runs one communicator's plugin lifecycle, connects to every peer
// through the net plugin, then runs the workload: per call it gives the tuner the cost table
// NCCL would, applies NCCL's selection rule to the result, emits the profiler events NCCL would,
// runs the collective on host buffers, checks the result exactly and reports to the parent.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/cli_args.h"
#include "bench/commands.h"
#include "bench/demo/collectives.h"
#include "bench/demo/demo_topology.h"
#include "bench/demo/net_transport.h"
#include "bench/demo/profiler_feed.h"
#include "bench/demo/wire.h"
#include "bench/demo/workload.h"
#include "common/clock.h"
#include "common/host/log_capture.h"
#include "common/host/plugin_host.h"

namespace autopilot::demo {
namespace {

// The mini-cluster's rounding of a tuner's chunk size (NCCL rounds to its protocol's grain).
constexpr size_t kStepGrain = 4u << 10;

struct RankOptions {
  int rank = -1;
  int nRanks = 0;
  int fd = -1;
  uint64_t commId = 0;
  DeclaredTopology topology;
  std::vector<size_t> sizes;
  double delayMs = 0;  // a straggler's late start before each collective
  bool allReduceOnly = false;
  int forcedCell = -1;  // --force: this cell where the collective supports it (as NCCL_ALGO/PROTO)
};

std::vector<size_t> parseSizes(const std::string& list) {
  std::vector<size_t> out;
  size_t start = 0;
  while (start < list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    out.push_back(std::strtoull(list.substr(start, end - start).c_str(), nullptr, 10));
    start = end + 1;
  }
  return out;
}

class Rank {
 public:
  explicit Rank(const RankOptions& o) : o_(o) {}

  void fatal(const std::string& text) {
    wire::Error e{};
    e.h = {wire::Type::kError, o_.rank};
    std::snprintf(e.text, sizeof(e.text), "%s", text.c_str());
    wire::sendMsg(o_.fd, e);
  }

  int run() {
    host::LogCapture::configureEchoFromEnv();
    host::PluginHost plugins;  // NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN / NCCL_PROFILER_PLUGIN
    if (!plugins.loadNet()) {
      fatal("the net plugin did not load");
      return 2;
    }
    plugins.loadProfiler();
    plugins.loadTuner();

    tuner::model::Topology topo = modelTopology(o_.topology);
    tuner::model::CostModel model(topo);
    host::CommSession::Config cfg;
    cfg.commId = o_.commId;
    cfg.nRanks = o_.nRanks;
    cfg.nNodes = o_.nRanks;
    cfg.rank = o_.rank;
    cfg.name = "autopilot-demo";
    cfg.nvlDomain = {o_.nRanks, 1, 1};
    cfg.constants = tuner::model::defaultConstants();
    host::CommSession session(plugins, cfg);
    if (session.init() != abi::kSuccess) {
      fatal("tuner init failed (NCCL would abort the communicator)");
      return 2;
    }
    if (!session.netUsable()) {
      fatal("the net plugin reported no devices (check NCCL_AUTOPILOT_IFNAME)");
      return 2;
    }

    NetTransport transport(*plugins.net(), session.netContext(), 0, o_.rank, o_.nRanks);
    std::map<int, std::vector<char>> handles;
    transport.connectAll(
        [&](int peer, const void* handle, size_t bytes) {
          wire::Handle m{};
          m.h = {wire::Type::kHandle, o_.rank};
          m.peer = peer;
          std::memcpy(m.handle, handle, std::min(bytes, sizeof(m.handle)));
          wire::sendMsg(o_.fd, m);
        },
        [&](int peer, void* handle, size_t bytes) {
          while (!handles.count(peer)) {
            wire::Handle m{};
            if (recv(o_.fd, &m, sizeof(m), 0) != ssize_t(sizeof(m)) ||
                m.h.type != wire::Type::kHandle) {
              throw TransportError("bootstrap: lost the parent");
            }
            handles[m.peer].assign(m.handle, m.handle + sizeof(m.handle));
          }
          std::memcpy(handle, handles[peer].data(), std::min(bytes, handles[peer].size()));
        },
        30000);

    Workload workload(o_.nRanks, o_.sizes, o_.allReduceOnly);
    std::vector<float> data(workload.maxElements());
    CollectiveEngine engine(transport);
    transport.registerRegion(data.data(), data.size() * sizeof(float));
    transport.registerRegion(engine.scratch(), engine.scratchBytes());
    ProfilerFeed feed(plugins.profiler(), session.profilerContext(), o_.rank,
                      plugins.activationMask());

    wire::Header ready{wire::Type::kReady, o_.rank};
    wire::sendMsg(o_.fd, ready);
    wire::Header go{};
    if (recv(o_.fd, &go, sizeof(go), 0) <= 0 || go.type != wire::Type::kGo) return 0;

    uint64_t stopAt = UINT64_MAX;
    uint64_t hash = 1469598103934665603ull;
    uint64_t seq[5] = {};
    for (uint64_t it = 0; it < stopAt; ++it) {
      pollParent(&stopAt);
      if (it >= stopAt) break;
      const WorkItem& item = workload.at(it);
      CollectiveCall call{item.kind, Algorithm::kRing, 2, item.count, item.root};
      const uint64_t nBytes = tunerBytes(call, o_.nRanks);

      float table[abi::kNumAlgorithms][abi::kNumProtocols];
      model.fillTable(int(item.kind), nBytes, 1, table);
      // NCCL's own choice, before the tuner sees the table: what the report compares against to
      // tell the tuner's decisions from NCCL's.
      const int ncclCell = tuner::model::ncclChoice(&table[0][0]);
      int nChannels = 0;
      if (host::HostTuner* tuner = plugins.tuner()) {
        tuner->getCollInfo(session.tunerContext(), int(item.kind), nBytes, 1,
                           reinterpret_cast<float**>(table), abi::kNumAlgorithms,
                           abi::kNumProtocols, 0, &nChannels);
      }
      int cell = tuner::model::ncclChoice(&table[0][0]);
      if (o_.forcedCell >= 0 &&
          CollectiveEngine::supports(item.kind, Algorithm(o_.forcedCell / abi::kNumProtocols))) {
        cell = o_.forcedCell;
      }
      if (cell < 0) {
        fatal("no algorithm/protocol left in the cost table (NCCL would fail the collective)");
        return 3;
      }
      call.algorithm = Algorithm(cell / abi::kNumProtocols);
      call.protocol = cell % abi::kNumProtocols;
      // Tuner v6+: the task's chunk size, asked as NCCL asks it (after the choice, one channel
      // here); as NCCL, never above the protocol's own step, rounded down to a grain (4 KiB).
      if (host::HostTuner* tuner = plugins.tuner();
          tuner != nullptr && tuner->hasGetChunkSize() &&
          CollectiveEngine::supports(item.kind, call.algorithm)) {
        const size_t own = protocolByIndex(call.protocol).stepBytes;
        size_t chunk = own;
        tuner->getChunkSize(session.tunerContext(), int(item.kind), nBytes, int(call.algorithm),
                            call.protocol, 1, &chunk);
        chunk = std::min(chunk, own) / kStepGrain * kStepGrain;
        if (chunk >= kStepGrain && chunk < own) call.stepBytes = chunk;
      }
      if ((cell / abi::kNumProtocols) > abi::kAlgoRing ||
          !CollectiveEngine::supports(item.kind, call.algorithm)) {
        fatal("the cost table offered an algorithm this mini-cluster cannot run");
        return 3;
      }
      hash = (hash ^ (it * 131 + uint64_t(cell) * 7 + uint64_t(nChannels) +
                      (uint64_t(call.stepBytes) << 20))) *
             1099511628211ull;

      bool int8Task =
          item.kind == CollectiveKind::kAllGather || item.kind == CollectiveKind::kBroadcast;
      ProfilerFeed::CollectiveInfo info{collectiveName(item.kind),
                                        item.count,
                                        "ncclFloat32",
                                        int8Task ? item.count * sizeof(float) : item.count,
                                        int8Task ? "ncclInt8" : "ncclFloat32",
                                        item.root,
                                        ProfilerFeed::descriptorAlgo(int(call.algorithm)),
                                        ProfilerFeed::descriptorProto(call.protocol),
                                        1,  // one "channel": one KernelCh event marks completion
                                        seq[int(item.kind)]++};
      workload.fillInput(item, it, o_.rank, data.data());
      // A straggler is busy elsewhere before it reaches the collective: NCCL sees it arrive
      // late, and the other ranks wait for it inside the collective.
      if (o_.delayMs > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o_.delayMs));
      }
      feed.enqueued(info);
      uint64_t t0 = monotonicNs();
      try {
        engine.run(call, data.data());
      } catch (const TransportError& e) {
        fatal(std::string("collective failed: ") + e.what());
        return 4;
      }
      uint64_t t1 = monotonicNs();
      feed.completed(t0, t1);

      wire::Iteration m{};
      m.h = {wire::Type::kIteration, o_.rank};
      m.iteration = it;
      m.endNs = t1;
      m.durationNs = t1 - t0;
      m.kind = int(item.kind);
      m.algo = int(call.algorithm);
      m.proto = call.protocol;
      m.nChannels = nChannels;
      m.stepKiB = int32_t(call.stepBytes >> 10);
      m.ncclCell = ncclCell;
      m.tunerBytes = nBytes;
      m.busBytes = workload.busBytes(item);
      m.wrongElements = workload.countWrong(item, it, o_.rank, data.data());
      m.decisionHash = hash;
      wire::sendMsg(o_.fd, m);
    }
    session.finalize();
    return 0;
  }

 private:
  void pollParent(uint64_t* stopAt) {
    pollfd p{o_.fd, POLLIN, 0};
    while (poll(&p, 1, 0) > 0) {
      if (p.revents & (POLLHUP | POLLERR)) {
        *stopAt = 0;  // the parent is gone: stop
        return;
      }
      wire::Stop s{};
      if (recv(o_.fd, &s, sizeof(s), 0) <= 0) {
        *stopAt = 0;
        return;
      }
      if (s.h.type == wire::Type::kStop) *stopAt = s.atIteration;
    }
  }

  RankOptions o_;
};

int cmdDemoRank(int argc, char** argv) {
  RankOptions o;
  std::string sizes;
  cli::Args args("autopilot demo-rank",
                 "One rank of `autopilot demo`, which starts it with these options.");
  args.addInt("--rank", o.rank, 0, 1 << 20, "this rank").required();
  args.addInt("--nranks", o.nRanks, 2, 1 << 20, "ranks of the job").required();
  args.addInt("--fd", o.fd, 0, 1 << 20, "socket to the orchestrator").required();
  args.addInt("--comm-id", o.commId, uint64_t(1), ~uint64_t(0), "communicator id", cli::Radix::kAny)
      .required();
  args.addInt("--rails", o.topology.rails, 1, 1 << 10, "rails per rank");
  args.addInt("--rail-mbit", o.topology.railMbit, 1, 1 << 30, "rate of each rail, Mbit/s");
  args.addReal("--tree-bw-factor", o.topology.treeBwFactor, cli::Interval::positive(),
               "declared tree bandwidth per channel as a multiple of the ring's");
  args.addIntList("--sizes", sizes, 1, ~uint64_t(0), "collective sizes in bytes, comma-separated")
      .required();
  args.addInt("--force-cell", o.forcedCell, -1,
              abi::kAlgoRing * abi::kNumProtocols + abi::kProtoSimple,
              "run this cell (algorithm * 3 + protocol) wherever the collective has it");
  args.addFlag("--all-reduce-only", o.allReduceOnly,
               "run all-reduce alone (a data-parallel job's gradients), not the four collectives");
  args.addReal("--delay-ms", o.delayMs, cli::Interval::closed(0, 10000),
               "wait this long before each collective (a straggler)");
  if (std::optional<int> rc = args.parse(argc, argv)) return *rc;
  o.sizes = parseSizes(sizes);
  o.topology.nRanks = o.nRanks;
  if (o.rank < 0 || o.nRanks < 2 || o.fd < 0 || o.commId == 0 || o.sizes.empty()) {
    std::fprintf(stderr, "demo-rank is started by `autopilot demo`\n");
    return 2;
  }
  Rank rank(o);
  try {
    return rank.run();
  } catch (const std::exception& e) {
    rank.fatal(e.what());
    return 5;
  }
}

cli::CommandRegistrar registerDemoRank("demo-rank", cmdDemoRank,
                                       "one rank of `autopilot demo` (started by it)");

}  // namespace
}  // namespace autopilot::demo

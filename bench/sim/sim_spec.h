// `autopilot simulate`: what one simulated run is made of (fabric, workload, fault scenario,
// policy), independent of the simulator, so that the command line and the reports build
// without SimGrid.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace autopilot::sim {

// The fabric: a `.topo.json` document (the cost model's keys) with a "fabric" member
// (docs/simulate.md describes the keys).
struct FabricSpec {
  int nodes = 8;
  int gpusPerNode = 8;
  int nicsPerNode = 8;
  double nicBytesPerSec = 50e9;  // per NIC, each direction
  double nicLatencyS = 2e-6;     // NIC to its leaf switch, one way
  bool railOptimized = true;     // rail r of every node on leaf (rail switch) r
  int nodesPerLeaf = 16;         // plain fat-tree: nodes per leaf switch
  double uplinkBytesPerSec = 0;  // leaf <-> spine per leaf and direction (0: non-blocking)
  double uplinkLatencyS = 1e-6;
  double nvlinkBytesPerSec = 450e9;  // per GPU, NVLink inside a node
  double nvlinkLatencyS = 1e-6;
  int sm = 90;
  // RDMA NICs (the ibverbs transport's striper settings: a large chunk sent alone measures its
  // rail); false: TCP, as the demo's mini-cluster (such a chunk may be slowed by slow start).
  bool rdma = true;
  // A token bucket on every NIC's egress, as tc tbf shapes the demo's rails (0: none): an idle
  // NIC saves up to this many bytes at its rate and sends them at once. Applies to transfers
  // queued per rail (RunSpec::sliceBytes).
  double shaperBurstBytes = 0;
  std::string topoText;  // the document (cost-model prior for the tuner)
};

bool fabricFromJson(const std::string& text, FabricSpec* out, std::string* error);

// A collective or training step.
enum class WorkloadKind { kAllReduce, kDense, kMoe };

struct ModelSpec {
  std::string name;
  double totalParams = 70e9;
  double activeParams = 70e9;  // per token (MoE: the experts a token visits)
  int layers = 80;
  int hidden = 8192;
  int seqLen = 4096;
  int microBatch = 1;          // sequences per micro-batch
  int microBatches = 8;        // per pipeline and step
  int tp = 8, pp = 4, ep = 1;  // tensor (inside a node), pipeline, expert parallel
  int topK = 2;                // MoE: experts per token
  int experts = 1;             // MoE: experts per layer
};

ModelSpec llama70b();
ModelSpec mixtral8x22b();

struct GpuSpec {
  double peakFlops = 989e12;  // H100 SXM dense BF16
  double utilization = 0.45;  // model FLOPs utilization of the compute phases
};

enum class FaultKind { kGray, kDown, kFailHeal, kFlap, kSpine };

struct Fault {
  FaultKind kind = FaultKind::kGray;
  int node = 0, nic = 0;  // the NIC (kSpine: nic = the leaf whose uplink degrades)
  double factor = 0.1;    // remaining rate (gray, spine)
  double onsetS = 0;
  double durationS = 0;  // fail-heal: how long it is down; flap: down time per period
  double periodS = 0;    // flap
};

struct Scenario {
  std::string name;
  std::vector<Fault> faults;
};

enum class PolicyKind { kStatic, kNcclResilient, kOurs };
const char* policyName(PolicyKind p);

struct StaticConfig {
  double restartS = 600;              // job relaunch after a stop (scheduler, load, NCCL init)
  double checkpointIntervalS = 1800;  // half of it is lost on average
};

struct NcclResilConfig {
  double detectS = 30.0;   // RC retry budget before a completion error (defaults)
  double failbackS = 1.0;  // a repaired NIC is used again this long after it heals
};

struct RunSpec {
  FabricSpec fabric;
  WorkloadKind workload = WorkloadKind::kDense;
  ModelSpec model;
  GpuSpec gpu;
  uint64_t allReduceBytes = 1ull << 30;  // kAllReduce
  std::string algo = "ring";             // kAllReduce: ring | tree | allgather | reducescatter
  Scenario scenario;
  PolicyKind policy = PolicyKind::kOurs;
  StaticConfig statics;
  NcclResilConfig nccl;
  bool tuner = true;  // ours: the bandit picks ring/tree per DP bucket
  uint64_t seed = 1;
  int chunksPerRail = 4;      // chunks per rail and ring step (simulation granularity)
  uint64_t windowBytes = 0;   // the striper's in-flight cap per rail (0: the plugin's 4 MiB);
                              // coarse runs need it above their chunk size
  bool pluginChunks = false;  // the plugin's own chunk sizes (64 KiB .. 1 MiB; small runs)
  // Ring collectives as the demo's collective engine runs them (bench/demo/collectives.cc):
  // each member's segment in slices of this size, sliceDepth at a time, each slice forwarded
  // on its own (0: every ring step one message, NCCL's steps taken whole).
  uint64_t sliceBytes = 0;
  int sliceDepth = 1;
  double warmupS = 0;  // where faults with a random onset may start (set by the driver)
  // kAllReduce as a timeline instead of one measured call: collectives of these sizes in turn
  // until the last window edge; RunResult::windowBusBytes holds the bus bytes of those that
  // completed in each window [edges[i], edges[i+1]) (the demo's phases).
  std::vector<uint64_t> cycleBytes;
  // ... each size as these collectives in turn (allreduce, allgather, reducescatter, broadcast;
  // ring algorithms, the demo's mix; empty: `algo` only). Broadcast's root is the call's
  // index in the cycle modulo the nodes, as in the demo's workload.
  std::vector<std::string> cycleCollectives;
  // ... and this long between two collectives (the ranks' host work: checking a result, filling
  // the next input, the tuner's call).
  double hostGapS = 0;
  // Queued chunks (sliceBytes): a chunk counts as arrived, on both sides, this long after its
  // last byte left the wire: the hosts' part of a transfer (the receiving proxy finding it, the
  // acknowledgement's way back), which the links' latency does not stand for (a latency there
  // would hold back the slices in flight as well).
  double hostDelayS = 0;
  // Ours, with a reference placement instead of the striper's (kNone: off): every message split
  // over the usable rails in proportion to their rates, water-filled over what each rail of the
  // connection already holds, in pieces of at least splitMinPieceBytes (a rail whose piece would
  // be smaller gets none). Failures are still found as ours finds them.
  //  - kTrueRates: the NICs' configured rates and link states: what a placement that knew them
  //    could reach.
  //  - kSustainedRates: rates the connection measures itself (sim_engine.cc, SustainedRate):
  //    what a transport could reach with an estimate that a shaper's bursts do not lift.
  enum class Split { kNone, kTrueRates, kSustainedRates };
  Split split = Split::kNone;
  uint64_t splitMinPieceBytes = 16u << 10;
  std::vector<double> windowEdgesS;
};

struct RunResult {
  bool ok = false;
  std::string error;
  double stepS = 0;  // the measured step (after warm-up)
  double commS = 0;  // its network phases (compute excluded)
  double computeS = 0;
  double warmupS = 0;
  bool stopped = false;  // the job stopped (static / NCCL with no path left)
  double stopAtS = 0;
  double recoveryS = -1;   // first fault onset -> traffic flows again (ours: rail failed over)
  uint64_t transfers = 0;  // simulated network transfers
  uint64_t railFailures = 0, railRejoins = 0;
  // RunSpec::split: messages split, and splits whose pieces did not add up.
  uint64_t splitMessages = 0, splitMismatches = 0;
  double wallS = 0;
  std::string tunerChoice;             // what the tuner settled on for the DP all-reduce
  std::vector<double> windowBusBytes;  // RunSpec::windowEdgesS; up to the stop when stopped
};

}  // namespace autopilot::sim

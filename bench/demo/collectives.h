// Host-memory collectives for the demo's mini-cluster: all-reduce, all-gather, reduce-scatter
// and broadcast on float32 data, with ring and tree algorithms and three "protocols" that are
// concrete transfer strategies with different latency/bandwidth trade-offs (step size and
// pipelining depth). They run over any Transport, so the same code is unit-tested in memory
// and runs over the net plugin in the demo.
//
// Ordering rule (what keeps ranks in step without tags): every rank posts the transfers of a
// connection in one canonical order: pipeline groups in sequence, then algorithm steps, then
// slices of the group. Receives are matched to sends in that order, as NCCL's net API requires.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench/demo/transport.h"

namespace autopilot::demo {

enum class Algorithm { kTree = 0, kRing = 1 };  // NCCL's algorithm indices
const char* algorithmName(Algorithm a);

// Transfer strategy standing in for NCCL's LL / LL128 / Simple protocols.
struct Protocol {
  const char* name;
  size_t stepBytes;  // bytes per transfer
  int depth;         // slices in flight per connection
};
// Index by NCCL's protocol index: 0 = LL, 1 = LL128, 2 = Simple.
const Protocol& protocolByIndex(int proto);
inline constexpr int kNumDemoProtocols = 3;

enum class CollectiveKind { kBroadcast = 0, kAllGather = 2, kReduceScatter = 3, kAllReduce = 4 };
const char* collectiveName(CollectiveKind c);

struct CollectiveCall {
  CollectiveKind kind;
  Algorithm algorithm;
  int protocol;  // 0..2
  size_t count;  // elements: per rank for all-gather input / reduce-scatter output
  int root = 0;  // broadcast
  // Bytes per transfer when smaller than the protocol's (the tuner's chunk size, as NCCL's
  // getChunkSize answer sets a task's chunk); 0: the protocol's own.
  size_t stepBytes = 0;
};

// Sizes as the tuner sees them (NCCL's getCollInfo nBytes): total bytes of the operation.
size_t tunerBytes(const CollectiveCall& call, int nRanks);
// Bytes each rank must provide in `data` for the call (see run()).
size_t bufferElements(const CollectiveCall& call, int nRanks);

class CollectiveEngine {
 public:
  // Allocates the scratch space every protocol needs, once: transports register it up front.
  explicit CollectiveEngine(Transport& transport);
  void* scratch() { return scratch_.data(); }
  size_t scratchBytes() const { return scratch_.size() * sizeof(float); }

  // Runs one collective in place on `data` (bufferElements() floats):
  //  - all-reduce: data[0..count) in, reduced sum out;
  //  - broadcast: root's data[0..count) copied to all;
  //  - all-gather: rank r's input at data[r*count..), all blocks out;
  //  - reduce-scatter: data[0..nRanks*count) in, rank r's reduced block out at data[r*count..).
  // Throws TransportError when the transport fails for good.
  void run(const CollectiveCall& call, float* data);

  // Whether the algorithm is implemented for the collective (all-gather and reduce-scatter are
  // ring-only, as in NCCL without NVLS/PAT).
  static bool supports(CollectiveKind kind, Algorithm algorithm);

 private:
  void ringAllReduce(float* data, size_t count, const Protocol& p);
  void ringReduceScatter(float* data, size_t count, const Protocol& p);
  void ringAllGather(float* data, size_t count, const Protocol& p);
  void ringBroadcast(float* data, size_t count, int root, const Protocol& p);
  void treeAllReduce(float* data, size_t count, const Protocol& p);
  void treeBroadcast(float* data, size_t count, int root, const Protocol& p);

  Transport& transport_;
  int rank_;
  int nRanks_;
  std::vector<float> scratch_;
};

}  // namespace autopilot::demo

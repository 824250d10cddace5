// Emits, for each collective the demo runs, the profiler events NCCL 2.28.9 would emit for one
// blocking collective (v5 ABI), in NCCL's order and with NCCL's odd parentage: GroupApi start
// and GroupStartApiStop, CollApi start/stop, GroupEndApiStart, Coll start and stop ("enqueued")
// under the already-stopped CollApi, GroupApi stop; then, once the work ran, one KernelCh
// start / KernelChStop / stop whose timer values bracket the execution. NCCL's timer there is
// the GPU's %globaltimer; the demo has no GPU and passes host CLOCK_MONOTONIC nanoseconds.
// Events are emitted only when the activation mask asks for them (or for a descendant), as
// NCCL does.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/host/plugin_host.h"

namespace autopilot::demo {

class ProfilerFeed {
 public:
  // profiler may be NULL (no profiler plugin): every call is then a no-op.
  ProfilerFeed(host::HostProfiler* profiler, void* context, int rank, const int* activationMask);

  struct CollectiveInfo {
    const char* func;  // "AllReduce", ...
    size_t apiCount;   // the user's count (elements)
    const char* apiDatatype;
    size_t taskCount;  // NCCL's task count (AllGather/Broadcast: bytes as int8)
    const char* taskDatatype;
    int root;
    const char* algo;    // NCCL's descriptor spelling: "RING", "TREE" (descriptorAlgo)
    const char* proto;   // "LL", "LL128", "SIMPLE" (descriptorProto)
    int nChannels;       // channels used; one KernelCh event is emitted per channel
    uint64_t seqNumber;  // per-communicator, per-function
  };

  // The names NCCL puts in a Coll descriptor (upper case, not the tuner table's "Ring" and
  // "Simple": docs/nccl-plugin-abi.md, "Name strings"), by abi::Algo and abi::Proto index.
  static const char* descriptorAlgo(int algo);
  static const char* descriptorProto(int proto);

  // Enqueue and group end; the collective then runs.
  void enqueued(const CollectiveInfo& info);
  // The work ran between these two timer values.
  void completed(uint64_t startTimer, uint64_t endTimer);

 private:
  host::HostProfiler* profiler_;
  void* context_;
  int rank_;
  const int* mask_;
  int sampledMask_ = 0;
  int nChannels_ = 1;
  void* coll_ = nullptr;
};

}  // namespace autopilot::demo

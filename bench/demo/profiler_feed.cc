#include "bench/demo/profiler_feed.h"

#include <cstring>

namespace autopilot::demo {

namespace ev = abi::event;

ProfilerFeed::ProfilerFeed(host::HostProfiler* profiler, void* context, int rank,
                           const int* activationMask)
    : profiler_(profiler), context_(context), rank_(rank), mask_(activationMask) {}

const char* ProfilerFeed::descriptorAlgo(int algo) {
  static const char* const kNames[abi::kNumAlgorithms] = {
      "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
  return algo >= 0 && algo < abi::kNumAlgorithms ? kNames[algo] : "Unknown";
}

const char* ProfilerFeed::descriptorProto(int proto) {
  static const char* const kNames[abi::kNumProtocols] = {"LL", "LL128", "SIMPLE"};
  return proto >= 0 && proto < abi::kNumProtocols ? kNames[proto] : "Unknown";
}

void ProfilerFeed::enqueued(const CollectiveInfo& info) {
  coll_ = nullptr;
  nChannels_ = info.nChannels;
  if (profiler_ == nullptr) return;
  sampledMask_ = *mask_;  // NCCL samples the mask once per operation, at enqueue
  const uint64_t m = uint64_t(sampledMask_);
  const uint64_t belowColl =
      ev::kColl | ev::kProxyOp | ev::kProxyStep | ev::kKernelCh | ev::kNetPlugin;
  void* group = nullptr;
  void* collApi = nullptr;
  if (m & ~ev::kProxyCtrl) {
    abi::ProfilerEventDescrV5 d;
    std::memset(&d, 0, sizeof(d));
    d.type = ev::kGroupApi;
    d.groupApi.graphCaptured = false;
    d.groupApi.groupDepth = 1;  // the implicit group of a blocking call
    profiler_->startEvent(context_, &group, &d);
    profiler_->recordEventState(group, abi::state::kGroupStartApiStop, nullptr);
  }
  if (m & (ev::kCollApi | belowColl)) {
    abi::ProfilerEventDescrV5 d;
    std::memset(&d, 0, sizeof(d));
    d.type = ev::kCollApi;
    d.parentObj = group;
    d.collApi.func = info.func;
    d.collApi.count = info.apiCount;
    d.collApi.datatype = info.apiDatatype;
    d.collApi.root = info.root;
    profiler_->startEvent(context_, &collApi, &d);
    profiler_->stopEvent(collApi);  // before the enqueue call returns
  }
  if (group) profiler_->recordEventState(group, abi::state::kGroupEndApiStart, nullptr);
  if (m & belowColl) {
    abi::ProfilerEventDescrV5 d;
    std::memset(&d, 0, sizeof(d));
    d.type = ev::kColl;
    d.parentObj = collApi;  // already stopped: parents often end before their children
    d.rank = rank_;
    d.coll.seqNumber = info.seqNumber;
    d.coll.func = info.func;
    d.coll.count = info.taskCount;
    d.coll.root = info.root;
    d.coll.datatype = info.taskDatatype;
    d.coll.nChannels = uint8_t(info.nChannels);
    d.coll.nWarps = 16;
    d.coll.algo = info.algo;
    d.coll.proto = info.proto;
    profiler_->startEvent(context_, &coll_, &d);
    profiler_->stopEvent(coll_);  // "enqueued", not "completed"
  }
  if (group) profiler_->stopEvent(group);  // ncclGroupEnd returns before the work completes
}

void ProfilerFeed::completed(uint64_t startTimer, uint64_t endTimer) {
  if (profiler_ == nullptr || !(uint64_t(sampledMask_) & ev::kKernelCh)) return;
  // NCCL emits one kernel-channel event per channel the collective used; a profiler counts them
  // down to tell when the collective completed.
  for (int c = 0; c < nChannels_; ++c) {
    abi::ProfilerEventDescrV5 d;
    std::memset(&d, 0, sizeof(d));
    d.type = ev::kKernelCh;
    d.parentObj = coll_;
    d.kernelCh.channelId = uint8_t(c);
    d.kernelCh.pTimer = startTimer;
    void* channel = nullptr;
    profiler_->startEvent(context_, &channel, &d);
    abi::ProfilerEventStateArgsV5 args;
    args.kernelCh.pTimer = endTimer;
    profiler_->recordEventState(channel, abi::state::kKernelChStop, &args);
    profiler_->stopEvent(channel);
  }
}

}  // namespace autopilot::demo

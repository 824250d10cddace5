// Replays NCCL 2.28.9's profiler callback sequences through the plugin-host harness, for the
// profiler tests and `autopilot profbench`. Only the events NCCL would start for the current
// activation mask are emitted (docs/nccl-plugin-abi.md §3.5), with the descriptors
// and parent handles NCCL would pass (§3.3, §3.6); GPU timers are the caller's.
//
// A blocking collective, as NCCL runs it:
//   application thread: GroupApi start, GroupStartApiStop, CollApi start + stop,
//     GroupEndApiStart, [KernelLaunch start + stop], Group start, Coll start, Coll stop,
//     Group stop, GroupApi stop            (Coll stop = "enqueued", before any child)
//   proxy thread, per channel: KernelCh start (GPU start timer), KernelChStop (GPU stop timer),
//     KernelCh stop; [ProxyOp start/stop per channel when the mask asks for them]
// enqueue() and kernelChannel() split the two halves so tests can interleave them in odd orders.
#pragma once

#include <cstdint>
#include <vector>

#include "common/abi/profiler_abi.h"
#include "common/host/plugin_host.h"

namespace autopilot::replay {

namespace ev = abi::event;

// Does NCCL start an event of `type` under `mask`? (§3.5: requesting a lower-level event
// implicitly starts its ancestors.)
inline bool ncclStarts(uint64_t type, int mask) {
  uint64_t m = uint64_t(unsigned(mask));
  switch (type) {
    case ev::kGroupApi:
      return (m & ~ev::kProxyCtrl) != 0;
    case ev::kCollApi:
      return m & (ev::kCollApi | ev::kColl | ev::kProxyOp | ev::kProxyStep | ev::kKernelCh |
                  ev::kNetPlugin);
    case ev::kKernelLaunch:
      return m & ev::kKernelLaunch;
    case ev::kGroup:
      return m & (ev::kGroup | ev::kColl | ev::kP2p | ev::kProxyOp | ev::kProxyStep |
                  ev::kKernelCh | ev::kNetPlugin);
    case ev::kColl:
      return m & (ev::kColl | ev::kProxyOp | ev::kProxyStep | ev::kKernelCh | ev::kNetPlugin);
    case ev::kProxyOp:
      return m & (ev::kProxyOp | ev::kProxyStep | ev::kNetPlugin);
    case ev::kProxyStep:
      return m & (ev::kProxyStep | ev::kNetPlugin);
    case ev::kKernelCh:
      return m & ev::kKernelCh;
    case ev::kNetPlugin:
      return m & ev::kNetPlugin;
    default:
      return false;
  }
}

struct CollSpec {
  const char* func = "AllReduce";
  const char* datatype = "ncclFloat32";
  size_t count = 1 << 20;
  // NCCL's Coll descriptor spelling (docs/nccl-plugin-abi.md, "Name strings").
  const char* algo = "RING";
  const char* proto = "SIMPLE";
  int nChannels = 16;
  uint64_t seqNumber = 0;
  int root = 0;
};

// The handles NCCL holds for one enqueued collective.
struct Enqueued {
  void* groupApi = nullptr;
  void* coll = nullptr;
  int mask = 0;  // sampled at enqueue, as NCCL does
};

class Replayer {
 public:
  Replayer(host::HostProfiler* profiler, void* context, int* mask)
      : p_(profiler), ctx_(context), mask_(mask) {}

  int mask() const { return __atomic_load_n(mask_, __ATOMIC_RELAXED); }

  // The application-thread half of a blocking collective. Returns the handles the proxy
  // thread will use.
  Enqueued enqueue(const CollSpec& s) {
    Enqueued e;
    e.mask = mask();
    abi::ProfilerEventDescrV5 d{};
    if (ncclStarts(ev::kGroupApi, e.mask)) {
      d = {};
      d.type = ev::kGroupApi;
      d.groupApi.groupDepth = 1;
      start(&e.groupApi, &d);
      p_->recordEventState(e.groupApi, abi::state::kGroupStartApiStop, nullptr);
    }
    void* collApi = nullptr;
    if (ncclStarts(ev::kCollApi, e.mask)) {
      d = {};
      d.type = ev::kCollApi;
      d.parentObj = e.groupApi;
      d.collApi.func = s.func;
      d.collApi.count = s.count;
      d.collApi.datatype = s.datatype;
      d.collApi.root = s.root;
      start(&collApi, &d);
      p_->stopEvent(collApi);
    }
    if (e.groupApi) p_->recordEventState(e.groupApi, abi::state::kGroupEndApiStart, nullptr);
    if (ncclStarts(ev::kKernelLaunch, e.mask)) {
      void* launch = nullptr;
      d = {};
      d.type = ev::kKernelLaunch;
      d.parentObj = e.groupApi;
      start(&launch, &d);
      p_->stopEvent(launch);
    }
    void* group = nullptr;
    if (ncclStarts(ev::kGroup, e.mask)) {
      d = {};
      d.type = ev::kGroup;
      start(&group, &d);
    }
    if (ncclStarts(ev::kColl, e.mask)) {
      d = {};
      d.type = ev::kColl;
      d.parentObj = collApi;
      d.rank = rank_;
      d.coll.seqNumber = s.seqNumber;
      d.coll.func = s.func;
      d.coll.count = s.count;
      d.coll.root = s.root;
      d.coll.datatype = s.datatype;
      d.coll.nChannels = uint8_t(s.nChannels);
      d.coll.nWarps = 16;
      d.coll.algo = s.algo;
      d.coll.proto = s.proto;
      d.coll.parentGroup = group;
      start(&e.coll, &d);
      p_->stopEvent(e.coll);  // "enqueued": children come later
    }
    if (group) p_->stopEvent(group);
    if (e.groupApi) p_->stopEvent(e.groupApi);
    return e;
  }

  // One kernel channel on the proxy thread: start with the GPU start timer, KernelChStop with
  // the GPU stop timer, stop.
  void kernelChannel(const Enqueued& e, int channel, uint64_t gpuStart, uint64_t gpuStop) {
    if (!ncclStarts(ev::kKernelCh, e.mask)) return;
    void* h = nullptr;
    abi::ProfilerEventDescrV5 d{};
    d.type = ev::kKernelCh;
    d.parentObj = e.coll;
    d.kernelCh.channelId = uint8_t(channel);
    d.kernelCh.pTimer = gpuStart;
    start(&h, &d);
    if (h == nullptr) return;  // NCCL skips the stop for a NULL handle
    abi::ProfilerEventStateArgsV5 a{};
    a.kernelCh.pTimer = gpuStop;
    p_->recordEventState(h, abi::state::kKernelChStop, &a);
    p_->stopEvent(h);
  }

  // A proxy op on the proxy thread (started at append, stopped when its steps are done).
  void* proxyOpStart(const Enqueued& e, int channel, int peer, bool isSend, pid_t pid) {
    if (!ncclStarts(ev::kProxyOp, e.mask)) return nullptr;
    void* h = nullptr;
    abi::ProfilerEventDescrV5 d{};
    d.type = ev::kProxyOp;
    d.parentObj = e.coll;
    d.rank = rank_;
    d.proxyOp.pid = pid;
    d.proxyOp.channelId = uint8_t(channel);
    d.proxyOp.peer = peer;
    d.proxyOp.nSteps = 8;
    d.proxyOp.chunkSize = 1 << 19;
    d.proxyOp.isSend = isSend ? 1 : 0;
    start(&h, &d);
    return h;
  }
  void stop(void* h) {
    if (h) p_->stopEvent(h);
  }

  // A whole blocking collective: enqueue, then every channel in order with the given GPU span
  // (channel c runs [gpuStart + c * skew, gpuStart + gpuDuration - c * skew]).
  void collective(const CollSpec& s, uint64_t gpuStart, uint64_t gpuDuration, uint64_t skew = 0) {
    Enqueued e = enqueue(s);
    for (int c = 0; c < s.nChannels; ++c) {
      kernelChannel(e, c, gpuStart + uint64_t(c) * skew,
                    gpuStart + gpuDuration - uint64_t(c) * skew);
    }
  }

  void setRank(int rank) { rank_ = rank; }

 private:
  void start(void** h, abi::ProfilerEventDescrV5* d) {
    *h = nullptr;
    p_->startEvent(ctx_, h, d);
  }
  host::HostProfiler* p_;
  void* ctx_;
  int* mask_;
  int rank_ = 0;
};

}  // namespace autopilot::replay

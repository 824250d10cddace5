// One profiler context per communicator (what init returns to NCCL), and the registry that owns
// every context for the lifetime of the loaded library.
//
// Hot-path side: fixed pools of event records and two bounded queues towards the profiler's
// service thread (completed collectives, and trace spans when tracing). Everything is allocated
// at init; the event callbacks only claim pool slots, write plain fields and bump atomics.
//
// Service side (ContextState, service.h): aggregates, change-point detectors and exporters,
// touched only by the service thread and by init/finalize under the service mutex.
//
// Contexts are never freed while the library is loaded: finalize retires a context and a later
// init reuses it. So a handle NCCL passes after finalize (a late proxy-thread event) still
// points into valid memory, and memory stays bounded by the peak number of live communicators.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/measurement_bus.h"
#include "profiler_plugin/bounded_queue.h"
#include "profiler_plugin/event_records.h"

namespace autopilot::profiler {

// A completed collective, as queued to the service thread.
struct CompletedColl {
  uint64_t seqNumber = 0;
  uint64_t count = 0;
  uint64_t nBytes = 0;
  uint64_t hostStartNs = 0;  // host clock at Coll start
  uint64_t hostEndNs = 0;    // host clock when the last child stopped
  uint64_t gpuStartNs = 0;   // GPU clock, earliest kernel-channel start (0: not GPU-timed)
  uint64_t gpuEndNs = 0;     // GPU clock, latest kernel-channel stop
  int8_t func = -1, algo = -1, proto = -1, datatype = -1;
  uint8_t nChannels = 0;
  uint8_t gpuTimed = 0;
};

// A kernel-channel or proxy-op span, queued only when tracing. GPU spans are placed on the host
// timeline by aligning the collective's last GPU stop with its host completion time.
struct TraceSpan {
  enum Kind : uint8_t { kKernelChannel = 0, kProxyOp = 1 };
  uint64_t seqNumber = 0;
  uint64_t startNs = 0, endNs = 0;  // GPU clock for kernel channels, host clock for proxy ops
  uint64_t anchorHostNs = 0, anchorGpuNs = 0;
  int32_t peer = -1;
  uint8_t kind = kKernelChannel;
  uint8_t channelId = 0;
  uint8_t isSend = 0;
  int8_t func = -1;
};

struct ContextCounters {
  std::atomic<uint64_t> collStarted{0};
  std::atomic<uint64_t> collCompleted{0};
  std::atomic<uint64_t> collPoolFull{0};       // Coll events dropped: every slot in flight
  std::atomic<uint64_t> childPoolFull{0};      // ProxyOp / net events dropped
  std::atomic<uint64_t> completedQueueFull{0}; // completions the service thread never saw
  std::atomic<uint64_t> traceQueueFull{0};
  std::atomic<uint64_t> busPublished{0};
  std::atomic<uint64_t> busRejected{0};        // bus ring full (the tuner did not drain)
  std::atomic<uint64_t> otherClock{0};         // not published: timed with the other clock
  std::atomic<uint64_t> reclaimed{0};          // stale collectives freed by the service thread
  std::atomic<uint64_t> unbalanced{0};         // stops without a matching start
  std::atomic<uint64_t> untrackedChildren{0};  // children whose parent was not (or no longer) ours
};

struct ContextState;  // service.h

struct ProfilerContext {
  ProfilerContext(size_t collPool, size_t childPool, size_t queueCapacity);
  ~ProfilerContext();
  ProfilerContext(const ProfilerContext&) = delete;
  ProfilerContext& operator=(const ProfilerContext&) = delete;

  // Clears the pools, queues and counters for a new communicator (init, under the registry
  // mutex, while no live communicator uses this context).
  void resetForReuse();

  // Identity (written at init before the context is handed to NCCL; constant afterwards).
  uint64_t commId = 0;
  int rank = 0, nRanks = 0, nNodes = 0;
  std::string name;

  std::atomic<bool> live{false};
  bool busAttached = false;
  bool kernelChTimed = false;  // KernelCh requested: its references are taken at Coll start
  bool measuresCompletion = false;  // some child event marks completion (else no durations)
  bool traceSpans = false;     // queue per-channel / per-op spans for the trace
  // The one clock this communicator's bus samples use: 0 undecided, else 1 + DurationClock.
  std::atomic<uint8_t> busClock{0};

  FixedPool<CollRecord> colls;
  FixedPool<ProxyOpRecord> proxyOps;
  FixedPool<NetRecord> nets;
  BoundedQueue<CompletedColl> completed;
  BoundedQueue<TraceSpan> spans;
  ContextCounters counters;

  std::unique_ptr<ContextState> state;  // service side
};

// Owns every context created by this load of the library.
class ContextRegistry {
 public:
  static ContextRegistry& instance();
  // A retired context if one exists, else a new one (NULL if allocation failed).
  ProfilerContext* acquire(size_t collPool, size_t childPool, size_t queueCapacity);
  void retire(ProfilerContext* ctx);
  size_t allocated() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<ProfilerContext>> all_;
  std::vector<ProfilerContext*> retired_;
};

}  // namespace autopilot::profiler

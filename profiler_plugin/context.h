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
#include "common/measurement_matcher.h"
#include "common/ring.h"
#include "profiler_plugin/event_records.h"

namespace autopilot::profiler {

inline constexpr uint8_t kKernelEngine = 0;
inline constexpr uint8_t kCopyEngine = 1;

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
  uint8_t engine = kKernelEngine;  // kCopyEngine: a copy-engine collective (profiler v6+)
  uint8_t isSymColl = 0;           // v7: a symmetric-memory kernel
  uint64_t userTag = 0;            // v7: the application's per-call tag (0 = untagged)
  // v7 kernel phases, summed over the channels: GPU ns in initial + final sync, and in compute.
  uint64_t phaseSyncNs = 0;
  uint64_t phaseComputeNs = 0;
  char kernelVariant[kVariantChars] = {};  // v7: NCCL's kernel variant name, cut to fit
};

// A kernel-channel or proxy-op span, queued only when tracing. GPU spans are placed on the host
// timeline by aligning the collective's last GPU stop with its host completion time.
struct TraceSpan {
  enum Kind : uint8_t { kKernelChannel = 0, kProxyOp = 1, kKernelPhase = 2 };
  uint64_t seqNumber = 0;
  uint64_t startNs = 0, endNs = 0;  // GPU clock for kernel channels, host clock for proxy ops
  uint64_t anchorHostNs = 0, anchorGpuNs = 0;
  int32_t peer = -1;
  uint8_t kind = kKernelChannel;
  uint8_t channelId = 0;
  uint8_t isSend = 0;
  int8_t func = -1;
  uint8_t phaseId = 0;  // kKernelPhase: 0 initial sync, 1 compute, 2 final sync
  uint64_t userTag = 0;
};

struct ContextCounters {
  std::atomic<uint64_t> collStarted{0};
  std::atomic<uint64_t> collCompleted{0};
  std::atomic<uint64_t> collPoolFull{0};        // Coll events dropped: every slot in flight
  std::atomic<uint64_t> childPoolFull{0};       // ProxyOp / net events dropped
  std::atomic<uint64_t> completedQueueFull{0};  // completions the service thread never saw
  std::atomic<uint64_t> traceQueueFull{0};
  std::atomic<uint64_t> busPublished{0};
  std::atomic<uint64_t> busRejected{0};        // bus ring full (the tuner did not drain)
  std::atomic<uint64_t> otherClock{0};         // not published: timed with the other clock
  std::atomic<uint64_t> reclaimed{0};          // stale collectives freed by the service thread
  std::atomic<uint64_t> unbalanced{0};         // stops without a matching start
  std::atomic<uint64_t> untrackedChildren{0};  // children whose parent was not (or no longer) ours
  std::atomic<uint64_t> ceStarted{0};          // copy-engine collectives (profiler v6+)
  std::atomic<uint64_t> ceTimed{0};            // ... whose GPU duration was measured
  std::atomic<uint64_t> ceUntimed{0};          // ... without one (no CUDA driver, event error)
  std::atomic<uint64_t> cePoolFull{0};
  std::atomic<uint64_t> phases{0};  // kernel-phase events tracked (profiler v7)
};

struct ContextState;  // service.h

// Copy-engine collectives in flight per communicator: each holds two CUDA events until the
// service thread sees it complete (a few per training step at most).
inline constexpr size_t kCePool = 64;

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
  bool kernelChTimed = false;       // KernelCh requested: its references are taken at Coll start
  bool measuresCompletion = false;  // some child event marks completion (else no durations)
  bool traceSpans = false;          // queue per-channel / per-op spans for the trace
  int abiVersion = 5;               // the profiler version NCCL picked
  bool ceCudaTimed = false;         // copy-engine collectives timed with CUDA events (v6+, driver)
  // The one clock this communicator's bus samples (and its exported durations) use: the clock
  // rule of the measurement path, without call matching (that is the tuner's side).
  bus::MeasurementMatcher clockRule{0};

  FixedPool<CollRecord> colls;
  FixedPool<PhaseBlock> phaseBlocks;  // CollRecord::phases of every pool slot, by index
  FixedPool<ProxyOpRecord> proxyOps;
  FixedPool<NetRecord> nets;
  FixedPool<CeRecord> ces;        // copy-engine collectives in flight (timed by the service thread)
  Ring<CompletedColl> completed;  // many producers (proxy, application threads)
  Ring<TraceSpan> spans;
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

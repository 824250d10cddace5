#include "profiler_plugin/profiler.h"

#include <unistd.h>

#include <atomic>

#include "common/comm_registry.h"
#include "common/instance.h"
#include "common/log.h"
#include "common/measurement_bus.h"
#include "common/params.h"
#include "profiler_plugin/context.h"
#include "profiler_plugin/cuda_events.h"
#include "profiler_plugin/events.h"
#include "profiler_plugin/service.h"

namespace autopilot::profiler {
namespace {

params::BoolParam gProfilerEnable(
    "NCCL_AUTOPILOT_PROFILER_ENABLE", true,
    "Profiler plugin on/off. 0 requests no events from NCCL (activation mask 0).");
params::IntParam gEventMask(
    "NCCL_AUTOPILOT_PROFILER_EVENTS",
    int64_t(abi::event::kColl | abi::event::kKernelCh | abi::event::kCeColl), 0,
    int64_t(abi::event::kAllV7),
    "NCCL profiler event mask we request (ORed into NCCL's process-global mask; bits the "
    "loaded NCCL does not know are dropped). Default Coll|KernelCh|CeColl = 4162: "
    "per-collective metadata, GPU timers and copy-engine collectives (NCCL 2.29+). Add ProxyOp "
    "(8) for proxy spans in the trace, NetPlugin (128) for per-NIC/socket bytes of NCCL's own "
    "IB/socket transports, KernelPhase (32768, NCCL 2.31+) for sync/compute phases (added by "
    "itself when a trace is written). Without KernelCh nothing marks a collective's "
    "completion, so collectives are counted but not timed. Decimal or 0x hexadecimal.",
    params::IntSyntax::kMask);
params::IntParam gPoolSize(
    "NCCL_AUTOPILOT_PROFILER_POOL", 512, 16, 65536,
    "Collectives in flight per communicator (started, not yet completed); beyond that new ones "
    "are dropped and counted.");

constexpr unsigned long kFlags = abi::subsys::kInit | abi::subsys::kProfile;
// Child events (proxy ops, NCCL net transfers) in flight, and the depth of the queues to the
// service thread, per communicator.
constexpr size_t kChildPool = 4096;
constexpr size_t kCompletionQueue = 8192;

}  // namespace

abi::Result init(void** ctx, const ProfilerInitArgs& args) {
  *ctx = nullptr;
  params::logAllOnce();
  setOwnPid(getpid());
  bool enabled = gProfilerEnable.get();
  // Only the bits of the version NCCL picked: an older NCCL must not see event types it would
  // misread as something else.
  const uint64_t known = args.abiVersion >= 7   ? abi::event::kAllV7
                         : args.abiVersion == 6 ? abi::event::kAllV6
                                                : abi::event::kAllV5;
  int requested = enabled ? int(uint64_t(gEventMask.get()) & known) : 0;
  ProfilerContext* context = enabled ? ContextRegistry::instance().acquire(
                                           size_t(gPoolSize.get()), kChildPool, kCompletionQueue)
                                     : ContextRegistry::instance().acquire(2, 2, 2);
  context->commId = args.commId;
  context->rank = args.rank;
  context->nRanks = args.nRanks;
  context->nNodes = args.nNodes;
  context->name = args.commName ? args.commName : "";
  context->kernelChTimed = (requested & abi::event::kKernelCh) != 0;
  // Only kernel-channel events mark a collective's end reliably: a Coll stop means "enqueued",
  // and proxy ops may all start after it (or not exist, within a node). Without KernelCh the
  // "durations" would be enqueue times, so none are published.
  context->measuresCompletion = context->kernelChTimed;
  context->traceSpans = false;
  context->abiVersion = args.abiVersion;
  context->ceCudaTimed = (requested & abi::event::kCeColl) != 0 && cuda::available();
  // Until the context is handed to NCCL, an exception must not lose it (guarded() in the
  // adapter turns it into an error result and a warning).
  struct RetireUnlessReleased {
    ProfilerContext* ctx;
    ~RetireUnlessReleased() {
      if (ctx == nullptr) return;
      ctx->live.store(false, std::memory_order_release);
      if (ctx->busAttached) bus::MeasurementBus::instance().detach(ctx->commId);
      ctx->busAttached = false;
      ContextRegistry::instance().retire(ctx);
    }
  } guard{context};
  if (enabled) {
    context->busAttached = bus::MeasurementBus::instance().attach(args.commId);
    if (!context->busAttached) {
      AP_WARN(kFlags,
              "profiler: measurement bus full (%d communicators): comm 0x%llx is "
              "measured but not fed to the tuner",
              bus::MeasurementBus::kMaxComms, static_cast<unsigned long long>(args.commId));
    }
    ProfilerService::instance().attach(context);
    context->traceSpans = context->state && context->state->trace != nullptr;
    // A trace shows each kernel channel's sync and compute phases when NCCL has them (v7).
    if (context->traceSpans && context->kernelChTimed && args.abiVersion >= 7) {
      requested |= int(abi::event::kKernelPhase);
    }
    // The mask is process-global and shared by every communicator: only ever OR bits in, never
    // clear what another communicator (or a later configuration) asked for.
    if (args.activationMask != nullptr) {
      std::atomic_ref<int>(*args.activationMask).fetch_or(requested, std::memory_order_relaxed);
    }
    context->live.store(true, std::memory_order_release);
  }
  AP_INFO(kFlags,
          "profiler v%d ready: comm 0x%llx '%s' rank %d/%d, event mask 0x%x%s (instance 0x%llx)",
          args.abiVersion, static_cast<unsigned long long>(args.commId),
          args.commName ? args.commName : "", args.rank, args.nRanks, requested,
          enabled ? "" : ", disabled by NCCL_AUTOPILOT_PROFILER_ENABLE=0",
          static_cast<unsigned long long>(instanceId()));
  // The rank is known only here: the tuner looks it up by commId.
  comms::CommInfo info;
  info.commId = args.commId;
  info.rank = args.rank;
  info.nRanks = args.nRanks;
  info.nNodes = args.nNodes;
  if (args.commName) info.name = args.commName;
  comms::registerComm(info);
  guard.ctx = nullptr;
  *ctx = context;
  contextCreated();
  return abi::kSuccess;
}

void startEvent(void* ctx, void** eHandle, const abi::ProfilerEventDescrV7* descr) {
  onStartEvent(static_cast<ProfilerContext*>(ctx), eHandle, *descr);
}

void stopEvent(void* eHandle) { onStopEvent(eHandle); }

void recordEventState(void* eHandle, int state, const abi::ProfilerEventStateArgsV5* args) {
  onRecordEventState(eHandle, state, args);
}

abi::Result finalize(void* ctx) {
  if (ctx == nullptr) return abi::kSuccess;
  auto* context = static_cast<ProfilerContext*>(ctx);
  bool wasLive = context->live.exchange(false, std::memory_order_acq_rel);
  if (wasLive) {
    ProfilerService::instance().detach(context);
    if (context->busAttached) bus::MeasurementBus::instance().detach(context->commId);
    context->busAttached = false;
  }
  comms::releaseComm(context->commId);
  // Not freed: late events may still name this context's records (see context.h).
  ContextRegistry::instance().retire(context);
  contextDestroyed();
  return abi::kSuccess;
}

}  // namespace autopilot::profiler

// The event callbacks' implementation (the hot path): NCCL's application, launch and proxy
// threads call these concurrently. No locks, no allocation, no logging except once-per-site
// warnings; everything a callback needs lives in the pools of its context (context.h).
#pragma once

#include <sys/types.h>

#include "common/abi/profiler_abi.h"

namespace autopilot::profiler {

struct ProfilerContext;

// This process's pid, cached at init: ProxyOp parents belong to us only when the op's pid is
// ours (under PXN another process's proxy runs the op, and its parent handle is not ours).
void setOwnPid(pid_t pid) noexcept;

void onStartEvent(ProfilerContext* ctx, void** eHandle, const abi::ProfilerEventDescrV7& d);
void onStopEvent(void* eHandle);
void onRecordEventState(void* eHandle, int state, const abi::ProfilerEventStateArgsV5* args);

// Service thread: frees collectives whose children never all arrived (stopped by NCCL more
// than `staleNs` ago); returns how many were reclaimed.
size_t reclaimStale(ProfilerContext* ctx, uint64_t nowNs, uint64_t staleNs);

// Service thread: completes the copy-engine collectives whose stop event the GPU reached (or
// that waited longer than `staleNs`), publishes their GPU durations like kernel collectives'
// and queues them for the exports; returns how many completed.
size_t pollCopyEngine(ProfilerContext* ctx, uint64_t nowNs, uint64_t staleNs);

// Publishes one completed collective's duration on the measurement bus, in the communicator's
// one clock (the first kernel collective decides it).
struct CompletedColl;
void publishToBus(ProfilerContext* ctx, const CompletedColl& c);

}  // namespace autopilot::profiler

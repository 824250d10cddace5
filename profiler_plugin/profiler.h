// The profiler's one internal interface. NCCL's v7 descriptor is the internal event form (every
// v7 union member starts with the v5/v6 member's fields at the same offsets); the v4, v5 and v6
// adapters widen their descriptors into it (profiler_abi_adapters.cc).
#pragma once

#include <cstdint>

#include "common/abi/profiler_abi.h"

namespace autopilot::profiler {

struct ProfilerInitArgs {
  int abiVersion = 5;
  uint64_t commId = 0;
  const char* commName = nullptr;  // may be NULL
  int nNodes = 0;
  int nRanks = 0;
  int rank = 0;
  int* activationMask = nullptr;  // NCCL's process-global mask
};

// On failure *ctx stays NULL; NCCL 2.28 keeps calling the plugin with that NULL context.
abi::Result init(void** ctx, const ProfilerInitArgs& args);

// Event callbacks tolerate NULL contexts, NULL handles and NULL state arguments, and always
// write *eHandle (NULL for "not tracked").
void startEvent(void* ctx, void** eHandle, const abi::ProfilerEventDescrV7* descr);
void stopEvent(void* eHandle);
void recordEventState(void* eHandle, int state, const abi::ProfilerEventStateArgsV5* args);

abi::Result finalize(void* ctx);

}  // namespace autopilot::profiler

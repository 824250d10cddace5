// The shared library's own translation unit. All plugin code comes from autopilot_core (linked
// whole-archive); this file only pins the properties the loaded library must have.
#include "common/abi/net_abi.h"
#include "common/abi/profiler_abi.h"
#include "common/abi/tuner_abi.h"

// NCCL copies at most NCCL_NET_HANDLE_MAXSIZE bytes of a listen handle between ranks.
static_assert(autopilot::abi::kNetHandleMaxSize == 128);

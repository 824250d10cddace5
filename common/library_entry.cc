// The shared library's own translation unit. All plugin code comes from autopilot_core (linked
// whole-archive); this file only pins the properties the loaded library must have.
#include "common/abi/net_abi.h"
#include "common/abi/profiler_abi.h"
#include "common/abi/tuner_abi.h"

// NCCL copies at most NCCL_NET_HANDLE_MAXSIZE bytes of a listen handle between ranks.
static_assert(autopilot::abi::kNetHandleMaxSize == 128);

#if defined(AUTOPILOT_STATIC_LIBSTDCXX)
namespace __gnu_cxx {
// libstdc++'s own hook (libsupc++/eh_alloc.cc) that frees its exception emergency pool.
void __freeres() noexcept;
}  // namespace __gnu_cxx

namespace {
// This library carries its own copy of libstdc++ (-static-libstdc++), whose emergency pool for
// exceptions is allocated when the library is loaded and, left alone, never freed: every
// dlclose/dlopen cycle NCCL makes would leak it. Freed here, the last thing run at unload.
__attribute__((destructor(101))) void releaseLibstdcxxPool() { __gnu_cxx::__freeres(); }
}  // namespace
#endif

// Identity of this loaded copy of the library. NCCL opens the net, tuner and profiler names with
// RTLD_LOCAL; the loader dedups one file, so all three must report the same identity. Each
// plugin's init logs it, which lets tests (and users reading NCCL_DEBUG=INFO) check that.
#pragma once

#include <cstdint>

namespace autopilot {

// Stable for the lifetime of one load: the address of a library-private object.
uintptr_t instanceId() noexcept;

// Number of live plugin contexts (net, tuner, profiler) across all communicators; used to
// check that finalize released everything before the library can be unloaded.
void contextCreated() noexcept;
void contextDestroyed() noexcept;
long liveContexts() noexcept;

}  // namespace autopilot

// Rails seen through NCCL's own net plugins (IB verbs and sockets), when another net plugin than
// ours carries the traffic: NCCL's NetPlugin profiler events name the IB device or the socket
// of each transfer (docs/nccl-plugin-abi.md §3.10). Each device or socket becomes a
// rail in common/rail_telemetry.h (transport "ib" or "sock"), so every consumer reads one place.
//
// Lookups run on the data path: an atomic table per kind, filled by the first transfer of each
// device or socket (which takes the registry's registration mutex once).
#pragma once

#include <cstdint>

namespace autopilot::profiler {

// Telemetry rail id for NCCL's IB device `device` / socket `fd`; -1 when it cannot be
// registered (bad index, registry full). At most kMaxSocketRails sockets become rails; the
// rest share one "sock-other" rail so that sockets cannot crowd out real NICs.
int ncclIbRail(int device) noexcept;
int ncclSocketRail(int fd) noexcept;
inline constexpr int kMaxIbDevices = 64;
inline constexpr int kMaxSocketRails = 16;

// Accounts one finished transfer on `rail`: bytes and chunks, and a bandwidth estimate (EWMA
// of length / duration for transfers large enough to measure bandwidth rather than latency).
void accountNcclNetTransfer(int rail, bool isSend, uint64_t length, uint64_t durationNs) noexcept;

// Tests only: forget the cached rail ids (after RailRegistry::resetForTesting).
void resetNcclNetRailsForTesting() noexcept;

}  // namespace autopilot::profiler

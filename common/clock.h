// Host monotonic time in nanoseconds. The one host clock of the project: GPU timestamps from
// NCCL's kernel-channel events are a different clock and are never mixed with this one.
#pragma once

#include <cstdint>
#include <ctime>

namespace autopilot {

inline uint64_t monotonicNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// CLOCK_REALTIME - CLOCK_MONOTONIC now: added to monotonic time, instants that hosts with
// synchronized clocks (NTP, PTP) agree on, to within their sync error.
inline uint64_t realtimeMinusMonotonicNs() noexcept {
  timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  const uint64_t real = uint64_t(rt.tv_sec) * 1000000000ull + uint64_t(rt.tv_nsec);
  return real - monotonicNs();  // modulo 2^64: only used as a phase
}

}  // namespace autopilot

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

}  // namespace autopilot

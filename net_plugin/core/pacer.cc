#include "net_plugin/core/pacer.h"

#include <algorithm>

namespace autopilot::net::core {

uint64_t Pacer::allowance(uint64_t nowNs, double bytesPerSec, uint64_t burstBytes) const {
  if (!(bytesPerSec > 0)) return 0;
  uint64_t tat = theoreticalNs_.load(std::memory_order_relaxed);
  double burstNs = double(burstBytes) * 1e9 / bytesPerSec;
  double debtNs = tat > nowNs ? double(tat - nowNs) : 0.0;
  if (debtNs >= burstNs) return 0;
  return uint64_t((burstNs - debtNs) * bytesPerSec / 1e9);
}

void Pacer::consume(uint64_t bytes, uint64_t nowNs, double bytesPerSec) {
  if (!(bytesPerSec > 0) || bytes == 0) return;
  uint64_t costNs = uint64_t(double(bytes) * 1e9 / bytesPerSec);
  uint64_t tat = theoreticalNs_.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    next = std::max(tat, nowNs) + costNs;
  } while (!theoreticalNs_.compare_exchange_weak(tat, next, std::memory_order_relaxed));
}

}  // namespace autopilot::net::core

// Pacer: a lock-free token bucket (generic cell rate algorithm) that limits a rail's send rate,
// for simulated rate limits. Shared by every connection on the rail, from any thread; time is
// an argument.
#pragma once

#include <atomic>
#include <cstdint>

namespace autopilot::net::core {

class Pacer {
 public:
  // Bytes that may be sent now at `bytesPerSec`, allowing bursts of `burstBytes`.
  uint64_t allowance(uint64_t nowNs, double bytesPerSec, uint64_t burstBytes) const;
  // Records `bytes` sent at `nowNs`.
  void consume(uint64_t bytes, uint64_t nowNs, double bytesPerSec);
  void reset() { theoreticalNs_.store(0, std::memory_order_relaxed); }

 private:
  // When the bucket would be full again if nothing else were sent.
  std::atomic<uint64_t> theoreticalNs_{0};
};

}  // namespace autopilot::net::core

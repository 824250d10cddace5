// DegradationDetector: is this rail persistently far slower than its peers (a gray failure)?
// A pure class; time and bandwidths are arguments.
//
// The rail is compared with a reference (the median bandwidth of the other usable rails). It
// becomes degraded when its ratio stays below `degradeBelow` for `holdNs`, and healthy again
// when the ratio stays above `recoverAbove` (> degradeBelow) for `holdNs`. Two thresholds and a
// hold time give hysteresis: a rail hovering around one threshold does not flap.
//
// The verdict is a state for telemetry, logs and the journal; the rail's share itself follows
// its measured bandwidth in the striper, so a degraded rail already carries less.
#pragma once

#include <cstdint>

namespace autopilot::net::core {

class DegradationDetector {
 public:
  struct Config {
    double degradeBelow = 0.5;
    double recoverAbove = 0.7;
    uint64_t holdNs = 300'000'000;
  };

  DegradationDetector() : DegradationDetector(Config{}) {}
  explicit DegradationDetector(const Config& config) : config_(config) {}

  void reset();
  // Returns true when the verdict changed. A reference <= 0 (no peers) never degrades a rail
  // and clears a pending change.
  bool update(double railBandwidth, double referenceBandwidth, uint64_t nowNs);
  bool degraded() const { return degraded_; }

 private:
  Config config_;
  bool degraded_ = false;
  uint64_t pendingSinceNs_ = 0;  // when the ratio first crossed toward the other verdict
  bool pending_ = false;
};

}  // namespace autopilot::net::core

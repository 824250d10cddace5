// FailureDetector: is this rail dead? A pure class, one per rail per connection end; time is
// an argument.
//
// A rail is failed on a hard error (socket error, reset, EOF, protocol violation), or when it
// holds outstanding data and has made no progress for longer than its timeout. Progress is any
// evidence that the peer consumes what we sent: an application-level acknowledgement, or the
// kernel's TCP acknowledged-bytes counter moving. Idle rails are never suspected: the clock
// starts when the rail goes from holding nothing to holding something.
//
// A dead link (veth down, cable pulled) does not error a TCP socket for minutes, so the
// timeout is what detects it. It must not mistake a slow (rate-limited) rail for a dead one,
// so it is progress-based and scales with what the rail holds: timeout = stallTimeout +
// drainFactor * outstandingBytes / measuredBandwidth, capped at maxTimeout. A slow rail keeps
// making progress (each acknowledged chunk resets the clock) and the allowance grows with the
// data queued on it.
//
// Nor must it mistake its own starvation for a dead link: on a loaded host this process (and a
// peer on a host like it) runs late, and silence while nobody ran proves nothing. The allowance
// grows by latenessFactor times the process's recent lateness beyond latenessFloor (its longest
// recent gap between two progress passes, LatenessMeter), at most by latenessCap; on an idle
// host the lateness is below the floor and the allowance is unchanged.
#pragma once

#include <cstdint>

namespace autopilot::net::core {

class FailureDetector {
 public:
  struct Config {
    uint64_t stallTimeoutNs = 100'000'000;
    double drainFactor = 1.0;
    uint64_t maxTimeoutNs = 2'000'000'000;
    double latenessFactor = 4.0;
    uint64_t latenessFloorNs = 1'000'000;
    uint64_t latenessCapNs = 1'000'000'000;  // 0: no stretch
  };

  FailureDetector() : FailureDetector(Config{}) {}
  explicit FailureDetector(const Config& config) : config_(config) {}

  // A fresh connection: no error, idle.
  void reset(uint64_t nowNs);
  void onProgress(uint64_t nowNs) {
    lastProgressNs_ = nowNs;
    lastEvidenceNs_ = nowNs;
  }
  // Called whenever the rail's "holds outstanding data" status may have changed.
  void setOutstanding(bool outstanding, uint64_t nowNs);
  void onError() { error_ = true; }
  // The process's recent lateness (LatenessMeter::recentNs), set before each check.
  void setLateness(uint64_t latenessNs);
  // What the lateness adds to every allowance now.
  uint64_t stretchNs() const { return stretchNs_; }

  bool hasError() const { return error_; }
  bool outstanding() const { return outstanding_; }
  // stallTimeout + drain time (at most maxTimeout) + the lateness stretch.
  uint64_t timeoutNs(uint64_t outstandingBytes, double bandwidthBytesPerSec) const;
  // How long the rail has held data without progress (0 when idle).
  uint64_t stalledForNs(uint64_t nowNs) const;
  // When the current stall began (meaningful while stalledForNs() > 0).
  uint64_t stallStartNs() const { return lastProgressNs_; }
  // The last time the peer demonstrably consumed data on this rail (0: never).
  uint64_t lastEvidenceNs() const { return lastEvidenceNs_; }
  bool failed(uint64_t nowNs, uint64_t outstandingBytes, double bandwidthBytesPerSec) const;

 private:
  Config config_;
  bool error_ = false;
  bool outstanding_ = false;
  uint64_t lastProgressNs_ = 0;
  uint64_t lastEvidenceNs_ = 0;
  uint64_t stretchNs_ = 0;
};

}  // namespace autopilot::net::core

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
// Nor must it fail a link that merely lost a packet: a transport that recovers losses with a
// retransmission timer (TCP: its RTO, at least 200 ms on Linux, longer behind a filled queue)
// makes no visible progress until that timer fires, however alive the link. When the transport
// tells its timer (setRetransmitTimeout), the allowance is at least one such timeout plus half
// the stall timeout (the resent bytes' round trip and acknowledgement). The timer counts up to
// maxRetransmitGraceNs: a fresh TCP connection's first timeout is 1 s (no round trip measured
// yet), and a dead link must not hide behind it. Measured in the demo's mini-cluster: rails
// rate-limited with tc tbf stalled 130-210 ms with TCP's RTO at 204-224 ms and no backoff yet,
// and were failed at the 100 ms stall timeout.
//
// Nor must it blame the path for this host's own queue: bytes that have not left this host yet
// (a slow local NIC's queue holds them, and with them the control frames and acknowledgements
// of every connection through it) say nothing about the link or the peer. While the transport
// reports such bytes (setLocallyQueued), the allowance is maxTimeout. Measured in the demo: a
// receiver's 32-byte control frame waited 324 ms behind its own bulk data in a rail's queue
// rate-limited to 25 Mbit/s, with TCP's timer at 208 ms and no timeout fired.
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
    uint64_t maxRetransmitGraceNs = 300'000'000;
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
  // The transport's retransmission timeout (0: it has none, or did not say).
  void setRetransmitTimeout(uint64_t rtoNs) { retransmitNs_ = rtoNs; }
  // Whether the transport's bytes still sit in this host's queues.
  void setLocallyQueued(bool queued) { locallyQueued_ = queued; }
  // What the lateness adds to every allowance now.
  uint64_t stretchNs() const { return stretchNs_; }

  bool hasError() const { return error_; }
  bool outstanding() const { return outstanding_; }
  // max(stallTimeout + drain time, min(retransmit timeout, maxRetransmitGrace) +
  // stallTimeout / 2), at most maxTimeout (maxTimeout while bytes are queued locally), plus the
  // lateness stretch.
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
  uint64_t retransmitNs_ = 0;
  bool locallyQueued_ = false;
};

}  // namespace autopilot::net::core

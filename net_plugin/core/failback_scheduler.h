// FailbackScheduler: when to try a failed rail again. A pure class; time is an argument.
//
// After a failure the rail is probed (reconnected and verified by a handshake) after
// `initialBackoffNs`; each failed attempt doubles the wait up to `maxBackoffNs`, and attempts
// never stop for as long as the connection lives (links are repaired after hours). A rail that
// fails again within `stableNs` of re-joining keeps its grown backoff, so a flapping link is
// retried less and less often instead of churning; one that stayed up that long starts over
// from the initial backoff.
#pragma once

#include <cstdint>

namespace autopilot::net::core {

class FailbackScheduler {
 public:
  struct Config {
    uint64_t initialBackoffNs = 50'000'000;
    uint64_t maxBackoffNs = 2'000'000'000;
    uint64_t stableNs = 10'000'000'000;
  };

  FailbackScheduler() : FailbackScheduler(Config{}) {}
  explicit FailbackScheduler(const Config& config);

  void onFailed(uint64_t nowNs);
  bool due(uint64_t nowNs) const { return waiting_ && nowNs >= nextAttemptNs_; }
  // An attempt started: not due again until it reports.
  void onAttemptStarted() { waiting_ = false; }
  void onAttemptFailed(uint64_t nowNs);
  void onRejoined(uint64_t nowNs);
  // Shortens the wait (e.g. every rail is down: try now rather than in two seconds).
  void expedite(uint64_t nowNs);
  // Due at once (the path is known to work again: another connection re-joined the rail).
  void retryNow(uint64_t nowNs);

  bool waiting() const { return waiting_; }
  uint64_t nextAttemptNs() const { return nextAttemptNs_; }
  uint64_t backoffNs() const { return backoffNs_; }
  uint64_t attempts() const { return attempts_; }

 private:
  void grow();
  Config config_;
  bool waiting_ = false;
  bool everRejoined_ = false;
  uint64_t nextAttemptNs_ = 0;
  uint64_t backoffNs_ = 0;
  uint64_t rejoinedAtNs_ = 0;
  uint64_t attempts_ = 0;
};

}  // namespace autopilot::net::core

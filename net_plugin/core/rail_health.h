// RailHealth: the state of each rail of one connection end (a send or receive comm), shared by
// every transport. It owns the per-rail failure detector, degradation detector and failback
// scheduler, and makes every transition the same way: logged once (WARN for failures, INFO
// otherwise), counted, recorded in the event journal and published to the rail telemetry.
//
//   kHealthy  <-> kDegraded   persistent slowness vs. peers (DegradationDetector; sender only)
//   any live  --> kFailed     hard error or no progress (FailureDetector), decided by the transport
//   kFailed   --> kProbing    a background probe re-connected and verified the rail
//   kProbing  --> kHealthy    after a probation period without failure
//   kStandby                  configured weight 0: carries data only when no other rail can
//
// The transport asks carriesData() when striping and calls fail()/rejoin(); evaluate() runs
// the time-based transitions. Not thread-safe: one per comm, driven by NCCL's proxy thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/rail_telemetry.h"
#include "net_plugin/core/degradation_detector.h"
#include "net_plugin/core/failback_scheduler.h"
#include "net_plugin/core/failure_detector.h"
#include "net_plugin/core/rail_striper.h"

namespace autopilot::net::core {

struct RailHealthConfig {
  FailureDetector::Config failure;
  DegradationDetector::Config degradation;
  FailbackScheduler::Config failback;
  uint64_t probationNs = 500'000'000;
  // When every rail holding data stalls at once, the peer (or this host) is slow, not the rails:
  // they are failed only after this long.
  uint64_t peerStallNs = 1'000'000'000;
};

class RailHealth {
 public:
  using State = telemetry::RailState;

  struct RailInfo {
    int telemetryId = -1;
    std::string name;
    bool standby = false;
  };

  RailHealth() = default;
  // `role` is "send" or "recv" (for messages); every rail starts kFailed until connected().
  void init(uint64_t commId, const char* role, const std::vector<RailInfo>& rails,
            const RailHealthConfig& config, uint64_t nowNs);

  int rails() const { return int(rails_.size()); }
  State state(int r) const { return rails_[r].state; }
  const RailInfo& info(int r) const { return rails_[r].info; }
  bool live(int r) const { return rails_[r].state != State::kFailed; }
  int liveCount() const;
  // The striper's view of the rail.
  RailMode mode(int r) const;
  // Since when no rail has been live (0 while some rail is).
  uint64_t noLiveRailSinceNs() const { return noLiveSinceNs_; }
  // For how long no rail has been live at `nowNs` (0 while some rail is). A rail can fail on a
  // clock read later than the caller's `nowNs` (a completion seen during the same pass): that
  // counts as no time yet, never as a difference that wraps around.
  uint64_t noLiveRailForNs(uint64_t nowNs) const {
    return noLiveSinceNs_ != 0 && nowNs > noLiveSinceNs_ ? nowNs - noLiveSinceNs_ : 0;
  }

  FailureDetector& failure(int r) { return rails_[r].failure; }
  // Every rail's failure detector allows for the process's recent lateness (LatenessMeter).
  void setLateness(uint64_t latenessNs) {
    for (Rail& rail : rails_) rail.failure.setLateness(latenessNs);
  }
  // Whether rail r's no-progress stall is its own fault: another live rail showed the peer
  // consuming data after r's stall began, or the stall outlasted peerStallNs. Without this, a
  // peer that pauses (page faults on a fresh buffer, descheduling) would fail every rail at once.
  bool stallBlamesRail(int r, uint64_t nowNs) const;
  FailbackScheduler& failback(int r) { return rails_[r].failback; }

  // Initial connection of a rail (at connect/accept time): healthy or standby, quietly.
  void connected(int r, uint64_t nowNs);
  // A rail that could not be connected at setup: stays failed, probed in the background.
  void connectFailed(int r, uint64_t nowNs, const std::string& reason);
  // Transitions; each returns false when it does not apply (already failed, not failed, ...).
  // `warn` false logs a failure at INFO (the peer closed the connection while nothing was
  // outstanding: the normal end of a connection, not an incident).
  bool fail(int r, uint64_t nowNs, const std::string& reason, bool warn = true);
  bool rejoin(int r, uint64_t nowNs);
  // Probation ends; degradation verdicts (sender side: each rail's estimated bandwidth and how
  // many times it has been measured while busy, the striper's busySamples(); NULL skips them).
  void evaluate(uint64_t nowNs, const double* bandwidth, const uint64_t* samples);

  uint64_t failures(int r) const { return rails_[r].failures; }
  uint64_t rejoins(int r) const { return rails_[r].rejoins; }
  uint64_t totalFailures() const;
  uint64_t totalRejoins() const;

 private:
  struct Rail {
    RailInfo info;
    State state = State::kFailed;
    uint64_t sinceNs = 0;
    FailureDetector failure;
    DegradationDetector degradation;
    FailbackScheduler failback;
    uint64_t failures = 0, rejoins = 0;
  };
  void transition(int r, State to, uint64_t nowNs, const char* kind, const std::string& detail,
                  bool warn = true);
  void updateNoLive(uint64_t nowNs);

  uint64_t commId_ = 0;
  const char* role_ = "";
  RailHealthConfig config_;
  std::vector<Rail> rails_;
  uint64_t noLiveSinceNs_ = 0;
};

}  // namespace autopilot::net::core

// RailNews: what one connection of this process found out about a physical rail (a NIC), for
// every other connection that uses it. A rail is one telemetry id (common/rail_telemetry.h: one
// per interface or HCA port of the process, shared by all its connections).
//
// A connection that finds a rail dead (it held data that nothing consumed while other rails
// moved theirs, a port-down event, a path error) publishes it; the others must not wait for
// their own evidence, which an idle connection never gathers and a busy one gathers only after
// its own timeout. The news is a suspicion, not a verdict: a reason can be specific to one
// connection (its peer's queue pair, its socket), so each other connection stops placing new
// data there, asks the rail itself (a liveness ping) and fails it only if nothing answers in its
// own allowance (SendEngine::followRailNews). Except where this host's own link of the rail is
// down: that is evidence for every connection over it, which each checks on the news and fails
// the rail at once (the TCP transport's send and receive comms). A connection whose rail
// re-joins publishes that too, and the others retry theirs at once instead of at their grown
// backoff.
//
// Bounded and lock-free: fixed tables of relaxed atomics, written on failures and re-joins only.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/rail_telemetry.h"

namespace autopilot::net::core {

class RailNews {
 public:
  static RailNews& instance();

  void failed(int id, uint64_t nowNs);
  void rejoined(int id);
  // Counts so far; when the latest failure was published.
  uint32_t failures(int id) const;
  uint64_t failedAtNs(int id) const;
  uint32_t rejoins(int id) const;

 private:
  static bool valid(int id) { return id >= 0 && id < telemetry::kMaxRails; }
  std::atomic<uint32_t> failures_[telemetry::kMaxRails] = {};
  std::atomic<uint64_t> failedAtNs_[telemetry::kMaxRails] = {};
  std::atomic<uint32_t> rejoins_[telemetry::kMaxRails] = {};
};

// One comm's position in the news of one rail: each event is news to it once.
class RailNewsWatch {
 public:
  // What was published before now is not news. A rail without an id (-1) never has news.
  void start(const RailNews* news, int id);
  // True once per failure published since the last look, with when it was published.
  bool failedSinceLook(uint64_t* atNs);
  bool rejoinedSinceLook();

 private:
  const RailNews* news_ = nullptr;
  int id_ = -1;
  uint32_t failures_ = 0, rejoins_ = 0;
};

}  // namespace autopilot::net::core

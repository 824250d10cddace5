// The leader's learning loop, on the tuner service thread: turns what the calling thread logged
// (first cost table per context, one record per call) and what the profiler published on the
// measurement bus into policy observations, and the policy's decisions into the desired table.
//
// Attribution of measurements. NCCL calls the tuner once per aggregate of grouped collectives,
// while the profiler reports each collective: a measurement is attributed to the oldest pending
// call with the same collective and the same nBytes (older unmatched calls are dropped: their
// measurements were lost or belonged to an aggregate). Aggregates whose nBytes matches none of
// their collectives are therefore never learned on; their decision stays NCCL's. The arm is the
// (algorithm, protocol) the profiler says NCCL ran. One clock per communicator: the first
// measurement's clock (GPU timer or host) is the only one used afterwards.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "tuner_plugin/bandit_policy.h"
#include "tuner_plugin/decision.h"
#include "tuner_plugin/tuner_comm.h"

namespace autopilot::tuner {

class Learner {
 public:
  static constexpr size_t kMaxPendingCalls = 4096;

  struct Stats {
    uint64_t samples = 0;       // drained from the bus
    uint64_t attributed = 0;    // matched to a call and observed
    uint64_t unmatched = 0;
    uint64_t otherClock = 0;
    uint64_t shifts = 0;
    uint64_t restoredUsed = 0;
    uint64_t restoredDiscarded = 0;  // saved for another topology / NCCL version
  };

  Learner(TunerComm* comm, const PolicyConfig& config);

  // Results loaded from the tuning file. A context's saved state is used once the live cost
  // table NCCL passes for it equals the saved one: the table is a function of topology and NCCL
  // version, so a mismatch means the file is from elsewhere and that context starts fresh.
  void restore(const std::vector<BanditPolicy::ContextRecord>& records, double maxSamples);

  // One round: returns true when the desired table changed.
  bool step();
  const DecisionTable& desired() const { return desired_; }
  std::vector<BanditPolicy::ContextRecord> snapshot() const { return policy_.snapshot(); }
  const Stats& stats() const { return stats_; }
  const BanditPolicy& policy() const { return policy_; }

 private:
  void reopenFor(int func, uint64_t nBytes);

  TunerComm* comm_;
  BanditPolicy policy_;
  std::deque<TunerComm::CallRecord> pending_;
  int clock_ = -1;
  uint64_t shiftEpoch_ = 0;
  std::vector<uint8_t> live_;   // contexts whose live prior the policy has
  std::vector<uint8_t> dirty_;  // contexts whose decision may have changed since the last step
  std::map<int, BanditPolicy::ContextRecord> restored_;
  double restoreCap_ = 0;
  DecisionTable desired_;
  Stats stats_;
};

}  // namespace autopilot::tuner

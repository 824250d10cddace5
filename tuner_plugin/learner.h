// The leader's learning loop, on the tuner service thread: turns what the calling thread logged
// (first cost table per context, one record per call) and what the profiler published on the
// measurement bus into policy observations, and the policy's decisions into the desired table.
//
// Attribution of measurements: bus::MeasurementMatcher lines each sample up with the call that
// made its decision by NCCL's per-function sequence number, and keeps one clock per
// communicator (docs/measurement-matching.md). Only exact matches are learned from: merged
// aggregates of grouped collectives are recognised and skipped (their decision stays NCCL's).
// The arm is the (algorithm, protocol) the profiler says NCCL ran.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "common/measurement_matcher.h"
#include "tuner_plugin/bandit_policy.h"
#include "tuner_plugin/decision.h"
#include "tuner_plugin/tuner_comm.h"

namespace autopilot::tuner {

class Learner {
 public:
  // Recorded calls remembered per function for matching (24 bytes each, on the leader only): a
  // sample trails its call by the collectives in flight (the profiler's pool, 512 by default)
  // plus what waits on the bus (1024 at most); a call pushed out unused is counted
  // (MeasurementMatcher::Stats::callsOverwritten).
  static constexpr size_t kCallsPerFunc = 2048;

  struct Stats {
    uint64_t samples = 0;     // drained from the bus
    uint64_t attributed = 0;  // matched to a call and observed
    uint64_t shifts = 0;
    uint64_t restoredUsed = 0;
    uint64_t restoredDiscarded = 0;     // saved for another topology / NCCL version
    uint64_t seededFromOtherScale = 0;  // contexts whose prior another scale's results corrected
  };

  Learner(TunerComm* comm, const PolicyConfig& config);

  // Results loaded from the tuning file. A context's saved state is used once the live cost
  // table NCCL passes for it equals the saved one: the table is a function of topology and NCCL
  // version, so a mismatch means the file is from elsewhere and that context starts fresh.
  void restore(const std::vector<BanditPolicy::ContextRecord>& records, double maxSamples);
  // Results of the same system at another scale (call nearest scale first): a context with no
  // saved state of its own gets the learned corrections of the same context there (same
  // collective, size bucket and numPipeOps bucket) as its prior's correction. Returns how many
  // contexts of `records` hold one.
  size_t addOtherScale(const std::vector<BanditPolicy::ContextRecord>& records);

  // One round: returns true when the desired table changed.
  bool step();
  const DecisionTable& desired() const { return desired_; }
  std::vector<BanditPolicy::ContextRecord> snapshot() const { return policy_.snapshot(); }
  const Stats& stats() const { return stats_; }
  const BanditPolicy& policy() const { return policy_; }
  const bus::MeasurementMatcher::Stats& matchStats() const { return matcher_.stats(); }

 private:
  void reopenFor(int func, uint64_t nBytes);

  TunerComm* comm_;
  BanditPolicy policy_;
  bus::MeasurementMatcher matcher_{kCallsPerFunc};
  uint64_t shiftsDropped_ = 0;  // the bus's count when last looked at
  std::vector<uint8_t> live_;   // contexts whose live prior the policy has
  std::vector<uint8_t> dirty_;  // contexts whose decision may have changed since the last step
  std::map<int, BanditPolicy::ContextRecord> restored_;
  std::map<int, std::array<float, kNumCells>> otherScale_;  // by context: the nearest scale's
  double restoreCap_ = 0;
  DecisionTable desired_;
  Stats stats_;
};

}  // namespace autopilot::tuner

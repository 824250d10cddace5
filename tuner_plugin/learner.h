// The leader's learning loop, on the tuner service thread: turns what the calling thread logged
// (first cost table per context, one record per call) and what the profiler published on the
// measurement bus into policy observations, and the policy's decisions into the desired table.
//
// Attribution of measurements: bus::MeasurementMatcher lines each sample up with the call that
// made its decision by NCCL's per-function sequence number, and keeps one clock per
// communicator (docs/measurement-matching.md). Only exact matches are learned from: merged
// aggregates of grouped collectives are recognised and skipped (their decision stays NCCL's).
// The arm is the (algorithm, protocol) the profiler says NCCL ran, at half its channel count
// where the call was told to play that (decision.h).
//
// Channel arms: the count NCCL runs a cell with in a context is what the profiler reports for
// calls left at NCCL's count. Once a cell has minSamples such samples and NCCL ran it with two
// channels or more, the cell at half the smallest count seen becomes an arm of the context.
// Chunk arms (where enabled): once a cell that takes a chunk size has minSamples samples, the
// cell at half NCCL's chunk becomes an arm too. Its samples are known by the arm the call was
// told to play, as for a halved-channel arm.
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
    uint64_t halvedArms = 0;            // (context, cell) pairs offered at half the channels
    uint64_t otherCell = 0;  // samples of a halved arm's call that ran another cell (not learned)
    uint64_t halfChunkArms = 0;  // (context, cell) pairs offered at half NCCL's chunk size
  };

  // learnChannels: offer cells at half NCCL's channel count (NCCL_AUTOPILOT_TUNER_CHANNELS).
  // learnChunk: offer them at half NCCL's chunk size (NCCL_AUTOPILOT_TUNER_CHUNK, tuner v6+).
  Learner(TunerComm* comm, const PolicyConfig& config, bool learnChannels = true,
          bool learnChunk = false);

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
  std::vector<BanditPolicy::ContextRecord> snapshot() const;
  // The channel count of `cell`'s halved arm in `ctx` (0: not offered).
  int halvedChannels(int ctx, int cell) const;
  const Stats& stats() const { return stats_; }
  const BanditPolicy& policy() const { return policy_; }
  const bus::MeasurementMatcher::Stats& matchStats() const { return matcher_.stats(); }

 private:
  void reopenFor(int func, uint64_t nBytes);
  // A sample of `cell` run at NCCL's own channel count `nChannels` in `ctx`.
  void noteChannels(int ctx, int cell, int nChannels);
  void fillChannels(int ctx, ContextDecision* d) const;
  // A sample of `cell` at NCCL's chunk size in `ctx`.
  void noteChunk(int ctx, int cell);

  TunerComm* comm_;
  BanditPolicy policy_;
  bus::MeasurementMatcher matcher_{kCallsPerFunc};
  uint64_t shiftsDropped_ = 0;  // the bus's count when last looked at
  std::vector<uint8_t> live_;   // contexts whose live prior the policy has
  std::vector<uint8_t> dirty_;  // contexts whose decision may have changed since the last step
  std::map<int, BanditPolicy::ContextRecord> restored_;
  std::map<int, BanditPolicy::ArmValues> otherScale_;  // by context: the nearest scale's
  const bool learnChannels_;
  const bool learnChunk_;
  // Per context and cell: the smallest channel count NCCL ran the cell with (0: none seen), and
  // the halved arm's count once offered (0: not offered). Leader-sized, 40 KiB.
  std::vector<std::array<uint8_t, kNumCells>> ncclChannels_;
  std::vector<std::array<uint8_t, kNumCells>> halved_;
  std::vector<uint32_t> halfChunk_;  // per context, a bit per cell offered at half the chunk
  double restoreCap_ = 0;
  DecisionTable desired_;
  Stats stats_;
};

}  // namespace autopilot::tuner

// The learner: a per-context bandit over arms (NCCL's cost-table cells, each also at half its
// channel count once that count is known, and at half NCCL's chunk size where enabled,
// decision.h), warm-started from the table NCCL passes
// (the prior) and driven by measured latencies. A pure class: no clocks, no
// globals, no I/O; the plugin's leader, the replay benchmark and the tests drive it alike.
//
// Model. Per (context, cell) it keeps an exponentially weighted mean and variance of log(time):
// noise is multiplicative, and the weight cap (kWindow) lets old data fade so that learning
// never stops. The cost table enters as a relative prior: arm a's log-time is expected at
// log(cost[a]) + offset, where offset calibrates the model's absolute level on the measured
// default (NCCL's own choice), with a spread of modelErrorSigma in log space, widened to half
// the calibration offset when the model misses the measured level by a large factor (a model
// 30x off in level is not trusted on ratios either). The posterior of each arm is the usual
// normal-normal combination of that prior with its samples.
//
// Decisions (decide()):
//  - Before the default has been measured: NCCL's own choice (the table untouched).
//  - Exploitation: the incumbent (initially NCCL's choice) is replaced only by an arm with at
//    least minSamples samples whose posterior is better by more than minGain and better with
//    confidence (switchZ standard deviations of the difference; where the noise level is
//    estimated from the context's own samples, the Student-t quantile for as many degrees of
//    freedom: few samples underestimate it). Contexts are re-evaluated after every sample, so
//    the test is strict: it bounds the chance of ever doing worse than NCCL.
//  - Exploration, bounded: only arms whose optimistic estimate (posterior mean - exploreZ sd)
//    beats the incumbent by minGain are probed, the most promising first, with a small
//    per-decision budget and at most maxExploreSamples samples per arm; an arm the prior places
//    far above the incumbent is never probed. A grant the global budget cannot pay in full is
//    one probe (a first probe settles most of what a far arm is).
//    A probed arm that turns out worse leaves the candidate set after one or two samples, so
//    the regret of learning is bounded by a few samples per plausible arm.
//  - Exploration pays for itself: a probe is granted only when its expected gain exceeds its
//    expected cost, both from the same posterior (model prior, measurements and noise). Gain:
//    the expected saving per call if the arm is better, E[max(0, T_I - T_c)], over the calls a
//    switch stays in force at least (refreshPlays, until the next refresh). Cost:
//    E[max(0, T_c - T_I)] per probe, for the probes of the grant. An arm the model places well
//    above the incumbent, with little uncertainty, is therefore not probed at any size.
//  - And globally: the extra time probes cost over the incumbent (measured, plus the expected
//    cost of probes granted but not yet seen, at the arm's point estimate) stays within
//    probeBudget of all the time observed in collectives; a grant whose probes turn out worse
//    than expected overshoots it by at most that grant. What stays unspent is saved for at most
//    probeWindowUs of observed time: a shift notice re-opens many contexts at once, and each
//    re-probes the arms its prior still finds plausible. Saved from the whole job, ten quiet
//    hours would leave six minutes of budget for that one moment, when the network has just
//    changed. A probe dearer than a window's savings (a large collective's) is paid from the
//    whole job's, alone, so that it is not starved. An arm that its own samples already
//    place below the incumbent is expected to save time, and is probed whatever the budget
//    holds: early in a job the first probes overspend it, and on forced-arm data an arm found
//    3x faster waited 20 calls for its next probe. The budget is the leader's alone: the
//    decisions it shapes are agreed like any other.
//  - Continued learning: reopen() (a change point reported by the profiler, or one the policy
//    detects itself on the incumbent's times with the library's change detector,
//    common/shift_detector.h) and a periodic refresh widen the other arms' posteriors again,
//    which re-opens exploration for plausibly better arms only.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "tuner_plugin/decision.h"

namespace autopilot::tuner {

struct PolicyConfig {
  double minGain = 0.02;         // smallest relative gain worth a switch or a probe
  double switchZ = 3.0;          // standard deviations of the difference required for a switch
  double exploreZ = 2.0;         // optimism of probes (standard deviations below the estimate)
  double modelErrorSigma = 0.5;  // log-space spread of the cost model's relative error
  double noiseFloor = 0.01;      // relative noise assumed at least (log space)
  double defaultNoise = 0.05;    // relative noise before any arm has two samples
  int minSamples = 3;            // samples before an arm may become the incumbent
  int maxExploreSamples = 32;    // probes per arm before it is judged on what it has
  int explorePeriod = 2;         // every 2nd call of a context may probe
  int exploreBudget = 2;         // probes per decision (a table stays in force until the next
                                 // agreed change: this bounds the probes of a round)
  int refreshPlays = 2000;       // incumbent samples between refreshes (0 = never)
  bool explore = true;           // false: exploit what is known (e.g. loaded), never probe
  double probeBudget = 0.01;     // probes' extra time, as a fraction of all observed time
  double probeWindowUs = 60e6;   // ... saved for at most this much observed time (0: the whole job)
  // Calls of a context (noteCall) after which a grant whose probes have not all been measured
  // is renewed with a fresh budget (0 = never). A probe NCCL was told to play can leave no
  // sample of its own: a question with no task (2.30's symmetric-kernel check, a simulated
  // group), a merged aggregate, a graph capture, a lost sample. Without renewal such a grant
  // would stay in force, spent and unseen, and the context would never explore again.
  int grantExpiryCalls = 256;
};

class BanditPolicy {
 public:
  static constexpr int kWindow = 64;  // weight cap: the estimate follows the last ~64 samples

  struct ArmStats {
    double n = 0;     // effective sample count, capped at kWindow
    double mean = 0;  // of log(time in us)
    double var = 0;   // exponentially weighted variance of log(time)
  };

  // A value per arm (corrections).
  using ArmValues = std::array<float, kNumArms>;

  // What persistence saves and restores for one context.
  struct ContextRecord {
    ContextRecord() { std::fill(std::begin(prior), std::end(prior), -1.0f); }
    int ctx = -1;
    float prior[kNumArms];  // < 0 for arms not offered (a halved arm: its cell's prior)
                            // (a halved-chunk arm is offered where its prior is >= 0)
    // Per cell, the channel count of its halved arm (0: not offered); the learner's, kept here
    // so that a saved halved arm means the same count when it is loaded.
    uint8_t halvedChannels[kNumCells] = {};
    int incumbent = -1;
    ArmStats arms[kNumArms];
  };

  explicit BanditPolicy(const PolicyConfig& config);
  ~BanditPolicy();
  BanditPolicy(const BanditPolicy&) = delete;
  BanditPolicy& operator=(const BanditPolicy&) = delete;

  const PolicyConfig& config() const { return config_; }

  // The cost table NCCL passed the first time the context was seen (microseconds, < 0 =
  // ignored): the prior of the arms at NCCL's channel count. The first call per context wins;
  // returns false when the table has no usable cell.
  bool setPrior(int ctx, const float cost[kNumCells]);
  bool hasPrior(int ctx) const;
  // Makes arm kNumCells + cell (the cell at half NCCL's channel count, decision.h) an arm of the
  // context, with its cell's prior: the cost model has no channel dimension, so the prior is
  // neutral on channels and the measurements decide. False when the cell is ignored.
  bool addHalvedChannelArm(int ctx, int cell);
  // The same for arm 2 * kNumCells + cell, the cell at half NCCL's chunk size; false also for a
  // cell that takes no chunk size (cellTakesChunkSize).
  bool addHalvedChunkArm(int ctx, int cell);
  // Learned corrections from another scale of the same system (log of measured / predicted,
  // per cell, relative to NCCL's choice): they shift the prior's ratios, and so which arms look
  // worth a probe, never the decisions themselves: NCCL's choice stays the default and a switch
  // still needs this context's own measurements. Call after setPrior().
  bool setPriorCorrection(int ctx, const ArmValues& correction);
  // Sharing across sizes: contexts of one group (same collective, same cell meanings) share a
  // model of the cost model's ratio error over logSize, refreshed every kShareEvery samples and
  // whenever an arm is measured for the first time in the group; its prediction is each
  // context's prior shift, and its predictive spread the prior's spread where that is narrower
  // (sizes next to ones where the model was checked need no probe to learn the same again);
  // a switch is judged without that narrowing. Group -1 (the default): no sharing.
  static constexpr int kShareEvery = 64;
  void setShareKey(int ctx, int group, double logSize);
  // The correction this context's measurements suggest for another scale (0 where an arm or the
  // default has fewer than minSamples samples); false when nothing is known.
  bool learnedCorrection(int ctx, ArmValues* correction) const;
  // The same for a saved context (a tuning file's record of another scale).
  static bool correctionOf(const ContextRecord& r, int minSamples, ArmValues* correction);
  // The prior correction in force for `ctx` and `cell` (0 where none was set).
  float priorCorrection(int ctx, int cell) const;

  // A measured time of `arm` in `ctx` (one clock per context: the caller filters).
  void observe(int ctx, int arm, double timeUs);
  // A getCollInfo call of `ctx` was made (it counts towards the expiry of a grant).
  void noteCall(int ctx);

  // A persistent shift: the learned ranking may no longer hold.
  void reopen(int ctx);
  void reopenAll();

  // The decision for `ctx` now (also advances the incumbent). Untouched when nothing is known.
  ContextDecision decide(int ctx);

  int defaultCell(int ctx) const;  // NCCL's choice in the prior, -1 when unknown
  int incumbent(int ctx) const;    // the cell exploited now, -1 when unknown
  const ArmStats* arm(int ctx, int cell) const;
  uint64_t reopenCount() const { return reopens_; }
  // Time observed in collectives and the extra time probes cost over the incumbent (us).
  double observedUs() const { return observedUs_; }
  double probeCostUs() const { return probeCostUs_; }

  // Persistence: every context with measurements; restore() keeps at most `maxSamples` of the saved
  // confidence per arm so that a loaded result is re-checked rather than trusted forever.
  std::vector<ContextRecord> snapshot() const;
  bool restore(const ContextRecord& record, double maxSamples);

 private:
  struct ContextState;
  struct ShareGroup {
    int key = -1;
    std::vector<int> members;
  };
  ContextState* state(int ctx) const;
  void refreshGroup(ShareGroup& g);
  // dof (optional): the degrees of freedom of the estimate, 0 where none was made yet.
  double noiseSigma(const ContextState& s, double* dof = nullptr) const;
  void releaseReserve(ContextState* s);
  void refreshShared();
  // How many of `probes` probes of c pay for themselves and fit the budget (`probes`, 1 or 0).
  // measured: c has samples of its own in this context.
  int probesThatPay(int c, int I, const double* mean, const double* var, bool measured, int probes,
                    double* each) const;
  // narrowed: the group's shared spread narrows the prior's (for exploration only).
  void posterior(const ContextState& s, double sigmaObs, bool narrowed, double* mean,
                 double* var) const;

  PolicyConfig config_;
  std::vector<std::unique_ptr<ContextState>> contexts_;
  std::vector<ShareGroup> groups_;
  uint64_t reopens_ = 0;
  double observedUs_ = 0;
  int sinceShare_ = 0;
  double probeCostUs_ = 0;  // measured extra time of probes
  // The budget left: probeBudget of the time observed, less the probes' measured extra time, at
  // most probeBudget * probeWindowUs (negative: overspent).
  double probeCreditUs_ = 0;
  double probeReservedUs_ = 0;  // expected extra time of probes granted and not yet seen
};

}  // namespace autopilot::tuner

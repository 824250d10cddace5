// Per-phase accounting of the demo: throughput, latency per size, decisions, exactness, and the
// cross-rank decision check, plus the tables, JSON and plot data built from them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/demo/wire.h"

namespace autopilot::demo {

struct Phase {
  std::string name;
  double startS;
  double endS;
};

struct PhaseStats {
  double busBytes = 0;  // completed in the phase (rank 0's view)
  uint64_t iterations = 0;
  std::map<uint64_t, std::vector<double>> latencyUs;  // by tuner-visible size
  std::map<std::string, uint64_t> decisions;          // "Ring/Simple" -> calls
  // Calls (rank 0) whose decision differs from what NCCL's own table picks: the tuner acted.
  uint64_t tunerChanged = 0;
  double maxGapS = 0;          // longest wait between two completions seen in the phase (rank 0)
  uint64_t wrongElements = 0;  // all ranks
  double failovers = 0;        // rail failures the plugins declared during the phase (all ranks)
  double recoveries = 0;       // ... and rails that re-joined
  bool failed = false;
  bool restarted = false;
  std::string failure;
  double gbps(double seconds) const { return seconds > 0 ? busBytes * 8 / 1e9 / seconds : 0; }
};

// Sums a metric over every Prometheus text file (*.prom) in `dir` (the profiler plugin's
// export, one file per rank process): how the demo reads the plugins' rail counters.
double sumPrometheusMetric(const std::string& dir, const std::string& metric);

// Charges the rail failovers and recoveries the plugins count (cumulative counters summed over
// the ranks' Prometheus files) to the scenario's phases. The counters are read late: a file is
// rewritten every NCCL_AUTOPILOT_PROM_INTERVAL_MS, and a repair is not instant (a heal brings a
// rail's link up host by host). A rank that finds the rail still down during the heal fails it
// over rightly, yet its count is read once the repair phase has begun. So, after a phase where a
// rail was down, failovers read until the repair's window closes are charged to that phase (where
// they are expected) and not to the repair phase (where they would count as false). The other
// way round, a false failover right at the end of a phase with every rail up, read once the next
// phase has brought a rail down, is charged to the next one: the ledger cannot tell it from the
// fault's own failovers. A total never counts down: one below what was read before (a rank's file
// missing from a read, or a restarted job's processes counting from 0 again) is charged nothing
// until it passes the old total. Only the static mode restarts a job; it runs with failover off,
// and the demo reports no failover counts for it.
class RailEventLedger {
 public:
  struct Charge {
    int failoverPhase = -1;  // where `failovers` belong
    double failovers = 0;
    double recoveries = 0;  // belong to the phase in force
  };
  // `previous` (the phase before the one now starting) had a rail down; failovers read before
  // `untilS` belong to it. Times are seconds on any one clock the caller keeps to.
  void holdFailoversFor(int previous, double untilS) {
    heldPhase_ = previous;
    holdUntilS_ = untilS;
  }
  // Whether a hold is open and its time has come at `nowS`: read the counters now to close it.
  bool holdEnded(double nowS) const { return heldPhase_ >= 0 && nowS >= holdUntilS_; }
  // The counters' totals read at `nowS`, with `phase` in force: what is new since the last read,
  // and where it belongs. While a hold is open, failovers go to the held phase; the first read
  // at or after its end is its last, and closes it.
  Charge read(int phase, double failoversTotal, double recoveriesTotal, double nowS);

 private:
  double failoversBase_ = 0, recoveriesBase_ = 0;
  int heldPhase_ = -1;
  double holdUntilS_ = 0;
};

// Everything one mode (closed loop or static) produced.
class ModeRecord {
 public:
  ModeRecord(std::string mode, std::vector<Phase> phases, int nRanks);

  // `t0Ns`: CLOCK_MONOTONIC when the phase clock started for this job; the completion's scenario
  // time is `phaseOffsetS` + its time since t0, capped at `latestS` (the end of the phase in
  // force when the report arrived: a completion never counts towards a phase not yet entered).
  void add(const wire::Iteration& it, uint64_t t0Ns, double phaseOffsetS, double latestS);
  // A new job (process set) starts: gaps are not measured across jobs.
  void startJob() { lastCompletionS_ = -1; }
  void markFailed(const std::string& phase, const std::string& why);
  void markRestarted(const std::string& phase);

  const std::string& mode() const { return mode_; }
  const std::vector<Phase>& phases() const { return phases_; }
  PhaseStats& stats(const std::string& phase) { return stats_[phase]; }
  const PhaseStats& stats(const std::string& phase) const { return stats_.at(phase); }
  // Iterations where some rank's decision differed from rank 0's.
  uint64_t decisionMismatches() const;
  uint64_t decisionsCompared() const { return compared_; }
  // Throughput over time for the plot: (seconds, Gbit/s) in `binS` bins.
  std::vector<std::pair<double, double>> timeline(double binS) const;
  // Per size, what rank 0's calls ran: the last call on NCCL's own choice and the arm of the
  // last call (the closed loop's learned switch, when the tuner made one).
  struct SizeHistory {
    double lastNcclChoiceS = -1;  // scenario time; -1: never ran NCCL's choice
    double firstS = -1;
    std::string lastArm;
    bool lastWasNcclChoice = false;
  };
  const std::map<uint64_t, SizeHistory>& sizeHistory() const { return sizes_; }
  // How long after its start phase `phase` took to settle: the end of the first `windowS`
  // window (sliding in steps of a tenth of it) that carried at least `fraction` of the phase's
  // steady throughput, taken as its second half's. -1 when the phase carried nothing.
  double settleSeconds(const std::string& phase, double windowS, double fraction) const;
  // The same for a phase whose network changes state every `periodS` from its start (a flapping
  // rail: down, up, down, ...), one recovery per change: each period is measured against the
  // steady throughput of its own state, the mean of the second halves of that state's periods
  // (a period the phase's end cuts short counts while it lasts two windows). Returns the longest
  // of them; -1 when a period never settled or the phase held no period of each state.
  double settleSecondsPerPeriod(const std::string& phase, double periodS, double windowS,
                                double fraction) const;

 private:
  std::string phaseAt(double s) const;
  const Phase* findPhase(const std::string& name) const;  // nullptr: no such phase
  double bytesIn(double fromS, double toS) const;
  // From `startS`, the end of the first `windowS` window up to `endS` that carried at least
  // `bytesPerS`, as seconds after `startS`; -1 when none did.
  double firstWindowAt(double startS, double endS, double windowS, double bytesPerS) const;
  std::string mode_;
  std::vector<Phase> phases_;
  int nRanks_;
  std::map<std::string, PhaseStats> stats_;
  std::map<uint64_t, std::vector<int64_t>> decisions_;  // iteration -> per-rank decision code
  uint64_t compared_ = 0;
  uint64_t mismatches_ = 0;
  std::vector<std::pair<double, double>> completions_;  // (seconds, bus bytes), rank 0
  double lastCompletionS_ = -1;
  std::map<uint64_t, SizeHistory> sizes_;  // by tuner-visible size
};

}  // namespace autopilot::demo

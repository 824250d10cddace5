// Which ranks of a communicator arrive late at its collectives, from every rank's arrival
// times on one clock (the reporter's; the exchange converts them with ClockOffsetEstimator).
// Pure class, run by the reporting rank: times come in as arguments.
//
// A collective is identified on every rank by (function, NCCL's per-function sequence number).
// Once every rank still present reported it, each rank's lag is its arrival minus the lower
// median of all arrivals (robust to one early or one late rank; with two ranks, the earlier
// one). A rank is late in that collective when its lag exceeds minLagNs plus the clock error
// bounds of both arrivals compared, so that clock uncertainty never names anyone, and also
// minLagShare of the collective's median duration over the ranks. The ranks that wait for a late
// one spend its lag inside the collective, so the share keeps a rank that costs the others
// little out of the report, and with it the ranks that arrive a little late only because the
// previous collective ended later for them (a slow inbound link: a victim, not a straggler).
//
// Per window (windowNs): a rank with at least minCompared collectives that was late in at least
// lateFraction of them has a late window; windowsToName late windows in a row name it, and one
// window that is not late clears it. A rank without enough collectives in a window keeps its
// state. "Since T" is the start of the first late window of the current streak.
//
// Bounded: at most maxPending collectives wait for their last rank; the oldest are dropped
// (counted as unmatched) when that fills, or after pendingTimeoutNs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

namespace autopilot::profiler {

struct ArrivalConfig {
  int nRanks = 2;
  uint64_t windowNs = 1'000'000'000;
  uint64_t minLagNs = 1'000'000;
  double minLagShare = 0.25;
  double lateFraction = 0.75;
  int windowsToName = 2;
  uint64_t minCompared = 3;
  size_t maxPending = 4096;
  uint64_t pendingTimeoutNs = 5'000'000'000;
};

struct RankArrival {
  bool present = true;
  // Since the analyzer started.
  uint64_t compared = 0, late = 0;
  // The last closed window in which the rank had collectives.
  double windowLagNs = 0;  // mean of the positive lags
  double windowMaxLagNs = 0;
  double windowLateFraction = 0;
  // The current streak of late windows (named once it is long enough).
  int lateWindows = 0;
  bool named = false;
  uint64_t sinceNs = 0;  // start of the streak's first window
  uint64_t streakCompared = 0, streakLate = 0;
  double streakLateLagSumNs = 0;
  double streakLateMeanLagNs() const {
    return streakLate ? streakLateLagSumNs / double(streakLate) : 0.0;
  }
  double streakLateFraction() const {
    return streakCompared ? double(streakLate) / double(streakCompared) : 0.0;
  }
};

struct ArrivalChange {
  int rank = -1;
  bool named = false;  // false: cleared
};

class ArrivalAnalyzer {
 public:
  ArrivalAnalyzer(const ArrivalConfig& config, uint64_t nowNs);

  // Rank `rank` arrived at collective (func, seq) at `arrivalNs` (the reporter's clock), known
  // to within `errorNs`, and spent `durationNs` in it. Duplicates and out-of-range ranks are
  // counted and ignored.
  void add(int rank, int func, uint64_t seq, int64_t arrivalNs, uint64_t errorNs,
           uint64_t durationNs, uint64_t nowNs);
  // A rank left (its channel is gone) or came back; collectives wait only for present ranks.
  void setPresent(int rank, bool present);
  // Expires old collectives and, when a window is due, closes it: true, with the ranks it named
  // or cleared appended to *changes.
  bool advance(uint64_t nowNs, std::vector<ArrivalChange>* changes);
  uint64_t nextWindowAt() const { return windowStart_ + config_.windowNs; }

  const std::vector<RankArrival>& ranks() const { return ranks_; }
  const ArrivalConfig& config() const { return config_; }
  uint64_t matched() const { return matched_; }
  uint64_t unmatched() const { return unmatched_; }
  uint64_t ignored() const { return ignored_; }
  uint64_t windows() const { return windows_; }

 private:
  struct Pending {
    uint64_t key = 0;
    uint64_t firstNs = 0;
  };
  void evaluate(uint32_t slot);
  void release(uint64_t key, uint32_t slot);
  bool complete(uint32_t slot) const;
  void closeWindow(uint64_t endNs, std::vector<ArrivalChange>* changes);

  ArrivalConfig config_;
  std::vector<RankArrival> ranks_;
  // Slot storage: nRanks arrivals, errors and flags per waiting collective.
  std::vector<int64_t> arrival_;
  std::vector<uint64_t> error_;
  std::vector<uint64_t> duration_;
  std::vector<uint8_t> have_;
  std::vector<uint32_t> haveCount_;
  std::vector<uint32_t> freeSlots_;
  std::unordered_map<uint64_t, uint32_t> slotOf_;
  std::deque<Pending> order_;  // oldest first; entries of completed collectives are skipped
  // The window in progress, per rank.
  std::vector<uint64_t> wCompared_, wLate_;
  std::vector<double> wLagSum_, wLagMax_, wLateLagSum_;
  std::vector<std::pair<int64_t, int>> scratch_;
  std::vector<uint64_t> durations_;
  uint64_t windowStart_;
  uint64_t matched_ = 0, unmatched_ = 0, ignored_ = 0, windows_ = 0;
};

}  // namespace autopilot::profiler

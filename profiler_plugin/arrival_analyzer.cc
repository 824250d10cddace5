#include "profiler_plugin/arrival_analyzer.h"

#include <algorithm>

namespace autopilot::profiler {
namespace {

uint64_t keyOf(int func, uint64_t seq) {
  return uint64_t(uint8_t(func)) << 56 | (seq & ((uint64_t(1) << 56) - 1));
}

}  // namespace

ArrivalAnalyzer::ArrivalAnalyzer(const ArrivalConfig& config, uint64_t nowNs)
    : config_(config), windowStart_(nowNs) {
  config_.nRanks = std::max(config_.nRanks, 1);
  config_.maxPending = std::max<size_t>(config_.maxPending, 1);
  const size_t n = size_t(config_.nRanks);
  ranks_.resize(n);
  arrival_.resize(config_.maxPending * n);
  error_.resize(config_.maxPending * n);
  duration_.resize(config_.maxPending * n);
  have_.resize(config_.maxPending * n);
  haveCount_.resize(config_.maxPending);
  freeSlots_.reserve(config_.maxPending);
  for (size_t s = config_.maxPending; s > 0; --s) freeSlots_.push_back(uint32_t(s - 1));
  slotOf_.reserve(config_.maxPending);
  wCompared_.assign(n, 0);
  wLate_.assign(n, 0);
  wLagSum_.assign(n, 0.0);
  wLagMax_.assign(n, 0.0);
  wLateLagSum_.assign(n, 0.0);
  scratch_.reserve(n);
  durations_.reserve(n);
}

void ArrivalAnalyzer::add(int rank, int func, uint64_t seq, int64_t arrivalNs, uint64_t errorNs,
                          uint64_t durationNs, uint64_t nowNs) {
  if (rank < 0 || rank >= config_.nRanks || !ranks_[size_t(rank)].present) {
    ++ignored_;
    return;
  }
  const size_t n = size_t(config_.nRanks);
  const uint64_t key = keyOf(func, seq);
  uint32_t slot;
  auto it = slotOf_.find(key);
  if (it != slotOf_.end()) {
    slot = it->second;
  } else {
    if (freeSlots_.empty()) {
      // Full: the oldest waiting collective will never be compared.
      while (!order_.empty() && freeSlots_.empty()) {
        Pending old = order_.front();
        order_.pop_front();
        auto o = slotOf_.find(old.key);
        if (o == slotOf_.end()) continue;
        ++unmatched_;
        release(old.key, o->second);
      }
      if (freeSlots_.empty()) {
        ++ignored_;
        return;
      }
    }
    slot = freeSlots_.back();
    freeSlots_.pop_back();
    slotOf_.emplace(key, slot);
    order_.push_back(Pending{key, nowNs});
  }
  size_t at = size_t(slot) * n + size_t(rank);
  if (have_[at]) {
    ++ignored_;  // the same rank twice: a replay or a seq counter that restarted
    return;
  }
  have_[at] = 1;
  arrival_[at] = arrivalNs;
  error_[at] = errorNs;
  duration_[at] = durationNs;
  ++haveCount_[slot];
  if (complete(slot)) {
    evaluate(slot);
    release(key, slot);
  }
}

bool ArrivalAnalyzer::complete(uint32_t slot) const {
  const size_t n = size_t(config_.nRanks);
  for (size_t r = 0; r < n; ++r) {
    if (ranks_[r].present && !have_[size_t(slot) * n + r]) return false;
  }
  return haveCount_[slot] >= 2;
}

void ArrivalAnalyzer::release(uint64_t key, uint32_t slot) {
  const size_t n = size_t(config_.nRanks);
  std::fill_n(have_.begin() + long(size_t(slot) * n), n, uint8_t(0));
  haveCount_[slot] = 0;
  slotOf_.erase(key);
  freeSlots_.push_back(slot);
}

void ArrivalAnalyzer::evaluate(uint32_t slot) {
  const size_t n = size_t(config_.nRanks);
  const size_t base = size_t(slot) * n;
  scratch_.clear();
  durations_.clear();
  for (size_t r = 0; r < n; ++r) {
    if (have_[base + r] && ranks_[r].present) {
      scratch_.emplace_back(arrival_[base + r], int(r));
      durations_.push_back(duration_[base + r]);
    }
  }
  if (scratch_.size() < 2) {
    ++unmatched_;
    return;
  }
  std::sort(scratch_.begin(), scratch_.end());
  const auto& ref = scratch_[(scratch_.size() - 1) / 2];
  // Upper median: with two ranks, the one that waited.
  auto mid = durations_.begin() + long(durations_.size() / 2);
  std::nth_element(durations_.begin(), mid, durations_.end());
  const double shareFloor = config_.minLagShare * double(*mid);
  const uint64_t refError = error_[base + size_t(ref.second)];
  ++matched_;
  for (const auto& [arrival, r] : scratch_) {
    double lag = double(arrival - ref.first);
    const size_t i = size_t(r);
    const double threshold = std::max(
        double(config_.minLagNs) + double(error_[base + i]) + double(refError), shareFloor);
    ++wCompared_[i];
    if (lag > 0) {
      wLagSum_[i] += lag;
      wLagMax_[i] = std::max(wLagMax_[i], lag);
    }
    if (lag > threshold) {
      ++wLate_[i];
      wLateLagSum_[i] += lag;
    }
  }
}

bool ArrivalAnalyzer::advance(uint64_t nowNs, std::vector<ArrivalChange>* changes) {
  // Collectives some present rank never reported (it sampled differently, or its batch was
  // lost with its channel) are compared among those that did once it is clear no more come.
  while (!order_.empty() && nowNs - order_.front().firstNs > config_.pendingTimeoutNs) {
    Pending old = order_.front();
    order_.pop_front();
    auto o = slotOf_.find(old.key);
    if (o == slotOf_.end()) continue;
    if (complete(o->second)) {
      evaluate(o->second);
    } else {
      ++unmatched_;
    }
    release(old.key, o->second);
  }
  if (nowNs < nextWindowAt()) return false;
  closeWindow(nowNs, changes);
  return true;
}

void ArrivalAnalyzer::setPresent(int rank, bool present) {
  if (rank < 0 || rank >= config_.nRanks) return;
  RankArrival& a = ranks_[size_t(rank)];
  a.present = present;
  if (!present) {
    // A rank that left is neither late nor waited for.
    a.lateWindows = 0;
    a.streakCompared = a.streakLate = 0;
    a.streakLateLagSumNs = 0;
  }
}

void ArrivalAnalyzer::closeWindow(uint64_t endNs, std::vector<ArrivalChange>* changes) {
  ++windows_;
  const uint64_t start = windowStart_;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    RankArrival& a = ranks_[r];
    const uint64_t compared = wCompared_[r], late = wLate_[r];
    a.compared += compared;
    a.late += late;
    bool wasNamed = a.named;
    if (!a.present) {
      a.named = false;
    } else if (compared >= config_.minCompared) {
      a.windowLagNs = wLagSum_[r] / double(compared);
      a.windowMaxLagNs = wLagMax_[r];
      a.windowLateFraction = double(late) / double(compared);
      if (a.windowLateFraction >= config_.lateFraction) {
        if (a.lateWindows == 0) {
          a.sinceNs = start;
          a.streakCompared = a.streakLate = 0;
          a.streakLateLagSumNs = 0;
        }
        ++a.lateWindows;
        a.streakCompared += compared;
        a.streakLate += late;
        a.streakLateLagSumNs += wLateLagSum_[r];
        a.named = a.lateWindows >= config_.windowsToName;
      } else {
        a.lateWindows = 0;
        a.named = false;
        a.streakCompared = a.streakLate = 0;
        a.streakLateLagSumNs = 0;
      }
    }
    if (a.named != wasNamed) changes->push_back(ArrivalChange{int(r), a.named});
    wCompared_[r] = wLate_[r] = 0;
    wLagSum_[r] = wLagMax_[r] = wLateLagSum_[r] = 0.0;
  }
  // Windows follow one another without gaps; a service that was held up closes one late window
  // and starts the next from now.
  windowStart_ = endNs - start >= 2 * config_.windowNs ? endNs : start + config_.windowNs;
}

}  // namespace autopilot::profiler

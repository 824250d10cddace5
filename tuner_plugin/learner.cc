#include "tuner_plugin/learner.h"

#include <cmath>
#include <cstring>

#include "common/log.h"
#include "common/measurement_bus.h"

namespace autopilot::tuner {
namespace {

bool samePrior(const float* a, const float* b) {
  for (int c = 0; c < kNumCells; ++c) {
    if ((a[c] < 0) != (b[c] < 0)) return false;
    if (a[c] >= 0 &&
        std::fabs(a[c] - b[c]) > 1e-4f * std::max(std::fabs(a[c]), std::fabs(b[c])) + 1e-6f) {
      return false;
    }
  }
  return true;
}

}  // namespace

Learner::Learner(TunerComm* comm, const PolicyConfig& config, bool learnChannels, bool learnChunk)
    : comm_(comm),
      policy_(config),
      live_(kNumContexts, 0),
      dirty_(kNumContexts, 0),
      learnChannels_(learnChannels),
      learnChunk_(learnChunk),
      ncclChannels_(kNumContexts),
      halved_(kNumContexts),
      halfChunk_(kNumContexts, 0) {}

std::vector<BanditPolicy::ContextRecord> Learner::snapshot() const {
  std::vector<BanditPolicy::ContextRecord> records = policy_.snapshot();
  for (auto& r : records) std::memcpy(r.halvedChannels, halved_[r.ctx].data(), kNumCells);
  return records;
}

int Learner::halvedChannels(int ctx, int cell) const {
  return ctx >= 0 && ctx < kNumContexts && cell >= 0 && cell < kNumCells ? halved_[ctx][cell] : 0;
}

void Learner::noteChunk(int ctx, int cell) {
  if (!learnChunk_ || (halfChunk_[ctx] >> cell & 1u) != 0 || !cellTakesChunkSize(cell)) return;
  const BanditPolicy::ArmStats* a = policy_.arm(ctx, cell);
  if (a == nullptr || a->n < policy_.config().minSamples) return;
  if (policy_.addHalvedChunkArm(ctx, cell)) {
    halfChunk_[ctx] |= 1u << cell;
    ++stats_.halfChunkArms;
  }
}

void Learner::noteChannels(int ctx, int cell, int nChannels) {
  if (!learnChannels_ || nChannels <= 0 || nChannels > 255 || halved_[ctx][cell] > 0) return;
  uint8_t& seen = ncclChannels_[ctx][cell];
  if (seen == 0 || nChannels < seen) seen = uint8_t(nChannels);
  const BanditPolicy::ArmStats* a = policy_.arm(ctx, cell);
  if (seen < 2 || !cellTakesChannelCount(cell) || a == nullptr ||
      a->n < policy_.config().minSamples) {
    return;
  }
  if (policy_.addHalvedChannelArm(ctx, cell)) {
    halved_[ctx][cell] = uint8_t(seen / 2);
    ++stats_.halvedArms;
  }
}

void Learner::fillChannels(int ctx, ContextDecision* d) const {
  auto count = [&](int arm) {
    return arm >= 0 && armHalvesChannels(arm) ? halved_[ctx][armCell(arm)] : uint8_t(0);
  };
  d->primaryChannels = count(d->primary);
  d->exploreChannels = count(d->explore);
}

void Learner::restore(const std::vector<BanditPolicy::ContextRecord>& records, double maxSamples) {
  restoreCap_ = maxSamples;
  for (const auto& r : records) {
    if (r.ctx < 0 || r.ctx >= kNumContexts) continue;
    BanditPolicy::ContextRecord& kept = restored_[r.ctx] = r;
    // With channel (chunk) learning off, saved halved (halved-chunk) arms are not arms here.
    if (!learnChannels_) std::memset(kept.halvedChannels, 0, sizeof(kept.halvedChannels));
    if (!learnChunk_) {
      for (int c = 0; c < kNumCells; ++c) kept.prior[halvedChunkArm(c)] = -1.0f;
    }
  }
}

size_t Learner::addOtherScale(const std::vector<BanditPolicy::ContextRecord>& records) {
  size_t n = 0;
  for (const auto& r : records) {
    BanditPolicy::ArmValues correction;
    if (r.ctx < 0 || r.ctx >= kNumContexts ||
        !BanditPolicy::correctionOf(r, policy_.config().minSamples, &correction)) {
      continue;
    }
    ++n;
    otherScale_.emplace(r.ctx, correction);  // a nearer scale's, added first, stays
  }
  return n;
}

void Learner::reopenFor(int func, uint64_t nBytes) {
  for (int ctx = 0; ctx < kNumContexts; ++ctx) {
    if (!live_[ctx]) continue;
    if (func < 0 || (contextFunc(ctx) == func &&
                     (nBytes == 0 || contextSizeBucket(ctx) == sizeBucket(nBytes)))) {
      policy_.reopen(ctx);
      dirty_[ctx] = 1;
    }
  }
}

bool Learner::step() {
  // New contexts: their prior (and, where the file matches, their restored state).
  int ctxs[64];
  float tables[64][kNumCells];
  for (size_t n; (n = comm_->drainNewContexts(ctxs, tables, 64)) > 0;) {
    for (size_t i = 0; i < n; ++i) {
      int ctx = ctxs[i];
      auto it = restored_.find(ctx);
      bool ownState = false;
      if (it != restored_.end()) {
        if (samePrior(it->second.prior, tables[i]) && policy_.restore(it->second, restoreCap_)) {
          ++stats_.restoredUsed;
          ownState = true;
          for (int c = 0; c < kNumCells; ++c) {
            const uint8_t n = it->second.halvedChannels[c];
            if (n > 0 && cellTakesChannelCount(c)) halved_[ctx][c] = n;
            if (it->second.prior[halvedChunkArm(c)] >= 0 && cellTakesChunkSize(c)) {
              halfChunk_[ctx] |= 1u << c;
            }
          }
        } else {
          ++stats_.restoredDiscarded;
        }
        restored_.erase(it);
      }
      policy_.setPrior(ctx, tables[i]);
      // Another scale's corrections only where this scale has nothing of its own: its own
      // measurements already say what the model gets wrong here.
      auto other = otherScale_.find(ctx);
      if (other != otherScale_.end()) {
        if (!ownState && policy_.setPriorCorrection(ctx, other->second)) {
          ++stats_.seededFromOtherScale;
        }
        otherScale_.erase(other);
      }
      // Sizes of one collective and numPipeOps bucket share what they learn (the cells mean
      // the same arms); the size bucket is log2 of the size.
      policy_.setShareKey(ctx, contextFunc(ctx) * kPipeBuckets + contextPipeBucket(ctx),
                          double(contextSizeBucket(ctx)));
      live_[ctx] = 1;
      dirty_[ctx] = 1;
    }
  }

  TunerComm::CallRecord calls[256];
  for (size_t n; (n = comm_->drainCalls(calls, 256)) > 0;) {
    for (size_t i = 0; i < n; ++i) {
      matcher_.addCall(calls[i].func, calls[i].ordinal, calls[i].nBytes, calls[i].ctx,
                       calls[i].arm);
      policy_.noteCall(calls[i].ctx);
    }
  }

  bus::MeasurementBus& bus = bus::MeasurementBus::instance();
  bus::CollectiveSample samples[256];
  for (size_t n; (n = bus.drain(comm_->commId(), samples, 256)) > 0;) {
    for (size_t i = 0; i < n; ++i) {
      const bus::CollectiveSample& s = samples[i];
      ++stats_.samples;
      int ctx = -1, played = -1;
      if (matcher_.match(s, &ctx, &played) != bus::MeasurementMatcher::Outcome::kMatched) continue;
      if (ctx < 0 || ctx >= kNumContexts) continue;
      const int cell = s.algo * abi::kNumProtocols + s.proto;
      int arm = cell;
      if (played >= 0 && (armHalvesChannels(played) || armHalvesChunk(played))) {
        // Its channel count (chunk size) was half of what NCCL runs the cell it was told to
        // play with: a sample of another cell (NCCL overrode the table) is no sample of either.
        if (armCell(played) != cell) {
          ++stats_.otherCell;
          continue;
        }
        arm = played;
      }
      policy_.observe(ctx, arm, double(s.durationNs) / 1000.0);
      if (arm == cell) {
        noteChannels(ctx, cell, s.nChannels);
        noteChunk(ctx, cell);
      }
      dirty_[ctx] = 1;
      ++stats_.attributed;
    }
  }

  // Change points reported by the profiler re-open exploration where they apply, each notice
  // on its own. Notices a full queue dropped cannot be placed: everything is re-opened.
  bus::ShiftNotice notices[16];
  for (size_t n; (n = bus.drainShifts(comm_->commId(), notices, 16)) > 0;) {
    for (size_t i = 0; i < n; ++i) {
      reopenFor(notices[i].func, notices[i].func >= 0 ? notices[i].nBytes : 0);
      ++stats_.shifts;
    }
  }
  const uint64_t dropped = bus.shiftsDropped(comm_->commId());
  if (dropped != shiftsDropped_) {
    reopenFor(-1, 0);
    stats_.shifts += dropped - shiftsDropped_;
    shiftsDropped_ = dropped;
  }

  // Only contexts that saw something new can decide differently (decide() is a function of the
  // policy's state, which only observations, priors and re-opening change).
  bool changed = false;
  for (int ctx = 0; ctx < kNumContexts; ++ctx) {
    if (!live_[ctx] || !dirty_[ctx]) continue;
    dirty_[ctx] = 0;
    ContextDecision d = policy_.decide(ctx);
    fillChannels(ctx, &d);
    if (d != desired_.entries[ctx]) {
      desired_.entries[ctx] = d;
      changed = true;
    }
  }
  return changed;
}

}  // namespace autopilot::tuner

#include "common/measurement_matcher.h"

#include <algorithm>

namespace autopilot::bus {
namespace {

size_t powerOfTwoAtLeast(size_t n) {
  if (n == 0) return 0;
  size_t cap = 2;
  while (cap < n) cap <<= 1;
  return cap;
}

}  // namespace

MeasurementMatcher::MeasurementMatcher(size_t callsPerFunc)
    : capacity_(powerOfTwoAtLeast(callsPerFunc)) {}

bool MeasurementMatcher::admitClock(DurationClock clock) noexcept {
  const uint8_t want = uint8_t(1 + int(clock));
  uint8_t have = clock_.load(std::memory_order_relaxed);
  if (have == 0 && clock_.compare_exchange_strong(have, want, std::memory_order_relaxed)) {
    return true;
  }
  return have == want;  // the CAS left the winner's clock in `have`
}

int MeasurementMatcher::clock() const noexcept {
  return int(clock_.load(std::memory_order_relaxed)) - 1;
}

void MeasurementMatcher::reset() {
  clock_.store(0, std::memory_order_relaxed);
  for (FuncState& f : funcs_) f = FuncState();
  calls_.reset();
  stats_ = Stats();
}

MeasurementMatcher::CallSlot* MeasurementMatcher::slot(int func, int64_t ordinal) {
  return &calls_[size_t(func) * capacity_ + (uint64_t(ordinal) & (capacity_ - 1))];
}

MeasurementMatcher::CallSlot* MeasurementMatcher::recorded(int func, int64_t ordinal) {
  if (!calls_ || ordinal < 0) return nullptr;
  CallSlot* s = slot(func, ordinal);
  return s->valid && s->ordinal == uint64_t(ordinal) ? s : nullptr;
}

void MeasurementMatcher::addCall(int func, uint64_t ordinal, uint64_t nBytes, int ctx, int tag) {
  if (func < 0 || func >= kFuncs || capacity_ == 0 || ordinal > uint64_t(INT64_MAX) ||
      int64_t(ordinal) <= funcs_[func].newest) {
    ++stats_.callsRejected;
    return;
  }
  // The window is made with the first call: only a communicator's leader records calls.
  if (!calls_) calls_.reset(new CallSlot[capacity_ * kFuncs]);
  FuncState& f = funcs_[func];
  CallSlot* s = slot(func, int64_t(ordinal));
  if (s->valid && !s->used && int64_t(s->ordinal) > f.lastUsed) ++stats_.callsOverwritten;
  *s = CallSlot{ordinal, nBytes, ctx, tag, true, false};
  f.newest = int64_t(ordinal);
}

// The sample's call past a run of repeated questions, or null. The calls from `ordinal` on (the
// first of which is not the sample's: other bytes) are skipped while each asks exactly what the
// used call just before `ordinal` asked (bytes and context) and is unused; the first call after
// the run is the sample's if it is unused and has exactly the sample's bytes. Such repeats are
// questions about a task already asked about (NCCL 2.30+'s symmetric-kernel fallback check), or
// leftovers of earlier ones matched in their place (same bytes and context, so no harm), never
// tasks of their own: a task of theirs would have carried the sample's sequence number.
MeasurementMatcher::CallSlot* MeasurementMatcher::afterRepeats(int func, int64_t ordinal,
                                                               uint64_t nBytes) {
  const CallSlot* anchor = recorded(func, ordinal - 1);
  if (anchor == nullptr || !anchor->used) return nullptr;
  // Every remembered call may be looked at: while the size stays the same each sample matches
  // a repeat (one call early), so the run of repeats grows with it, up to the window.
  for (int64_t q = ordinal; q < ordinal + int64_t(capacity_); ++q) {
    CallSlot* call = recorded(func, q);
    if (call == nullptr || call->used) return nullptr;
    if (call->nBytes == anchor->nBytes && call->ctx == anchor->ctx) continue;
    return q > ordinal && call->nBytes == nBytes ? call : nullptr;
  }
  return nullptr;
}

// Sums one more task into the aggregate being summed. Returns false when the sample does not
// continue it: the aggregate is then abandoned and the sample is classified afresh.
bool MeasurementMatcher::continueAggregate(FuncState& f, int func, int64_t seq, uint64_t nBytes,
                                           Outcome* out) {
  f.summing = false;
  CallSlot* call = recorded(func, f.aggCall);
  // The tasks of one aggregate carry consecutive sequence numbers, come in ascending size and
  // their bytes add up to the call's (docs/measurement-matching.md).
  if (call == nullptr || call->used || seq != f.aggNextSeq || nBytes < f.aggLastBytes) {
    return false;
  }
  const uint64_t sum = f.aggBytes + nBytes;
  if (sum > call->nBytes || sum < f.aggBytes) return false;
  ++stats_.aggregateParts;
  if (sum < call->nBytes) {
    f.summing = true;
    f.aggBytes = sum;
    f.aggLastBytes = nBytes;
    f.aggNextSeq = seq + 1;
    *out = Outcome::kAggregatePart;
    return true;
  }
  // Complete: k tasks took k sequence numbers for one call, so the calls after it sit k - 1
  // further back than before.
  call->used = true;
  f.alignment += seq - f.aggFirstSeq;
  if (f.aggCall > f.lastUsed) f.lastUsed = f.aggCall;
  ++stats_.aggregates;
  *out = Outcome::kAggregated;
  return true;
}

// The correspondence moved for a reason the tuner cannot see (a task without a call, a call
// without a task, a reordered group): re-anchor on the oldest unused recorded call after the
// last one used that has the sample's bytes, looking at most kRealignWindow calls ahead.
MeasurementMatcher::Outcome MeasurementMatcher::realign(FuncState& f, int func, int64_t seq,
                                                        uint64_t nBytes) {
  int64_t first = f.lastUsed + 1;
  if (f.newest - first >= int64_t(capacity_)) first = f.newest - int64_t(capacity_) + 1;
  const int64_t last = std::min<int64_t>(f.newest, first + int64_t(kRealignWindow) - 1);
  for (int64_t q = first; q <= last; ++q) {
    CallSlot* call = recorded(func, q);
    if (call == nullptr || call->used || call->nBytes != nBytes) continue;
    return anchorOn(f, call, q, seq);
  }
  ++stats_.noCall;
  return Outcome::kNoCall;
}

// Re-anchors the alignment on call `q`, which this sample uses up without being learned from.
MeasurementMatcher::Outcome MeasurementMatcher::anchorOn(FuncState& f, CallSlot* call, int64_t q,
                                                         int64_t seq) {
  call->used = true;
  f.alignment = seq - q;
  f.lastUsed = q;
  ++stats_.realigned;
  return Outcome::kRealigned;
}

MeasurementMatcher::Outcome MeasurementMatcher::match(const CollectiveSample& s, int* ctx,
                                                      int* tag) {
  int unused;
  if (tag == nullptr) tag = &unused;
  *ctx = -1;
  *tag = -1;
  // Validated before the clock rule, so that a sample nobody can use never decides the clock.
  if (s.func < 0 || s.func >= kFuncs ||
      (s.clock != DurationClock::kHost && s.clock != DurationClock::kGpu) || s.algo < 0 ||
      s.algo >= abi::kNumAlgorithms || s.proto < 0 || s.proto >= abi::kNumProtocols ||
      s.durationNs == 0 || s.nBytes == 0 || s.seqNumber > uint64_t(INT64_MAX / 2)) {
    ++stats_.badSample;
    return Outcome::kBadSample;
  }
  if (!admitClock(s.clock)) {
    ++stats_.otherClock;
    return Outcome::kOtherClock;
  }
  if (capacity_ == 0) {
    ++stats_.noCall;
    return Outcome::kNoCall;
  }
  FuncState& f = funcs_[s.func];
  const int64_t seq = int64_t(s.seqNumber);
  Outcome out;
  if (f.summing) {
    if (continueAggregate(f, s.func, seq, s.nBytes, &out)) return out;
    // An aggregate that did not complete leaves the alignment in doubt (a task was lost, or it
    // was no aggregate): re-anchor rather than trust it.
    return realign(f, s.func, seq, s.nBytes);
  }

  const int64_t ordinal = seq - f.alignment;
  if (CallSlot* call = recorded(s.func, ordinal)) {
    if (call->used) {  // a duplicate, or a sample of a call already accounted for
      ++stats_.noCall;
      return Outcome::kNoCall;
    }
    if (call->nBytes == s.nBytes) {
      call->used = true;
      if (ordinal > f.lastUsed) f.lastUsed = ordinal;
      ++stats_.matched;
      *ctx = call->ctx;
      *tag = call->tag;
      return Outcome::kMatched;
    }
    if (CallSlot* next = afterRepeats(s.func, ordinal, s.nBytes)) {
      // Past questions with no task of their own (docs/measurement-matching.md): the calls
      // after the sample's sit that many further back.
      const int64_t q = int64_t(next->ordinal);
      next->used = true;
      f.alignment = seq - q;
      if (q > f.lastUsed) f.lastUsed = q;
      ++stats_.matched;
      ++stats_.repeatsSkipped;
      *ctx = next->ctx;
      *tag = next->tag;
      return Outcome::kMatched;
    }
    if (s.nBytes < call->nBytes) {  // maybe the first task of a merged aggregate
      f.summing = true;
      f.aggCall = ordinal;
      f.aggFirstSeq = seq;
      f.aggNextSeq = seq + 1;
      f.aggBytes = s.nBytes;
      f.aggLastBytes = s.nBytes;
      ++stats_.aggregateParts;
      return Outcome::kAggregatePart;
    }
    return realign(f, s.func, seq, s.nBytes);
  }
  // A hole among the recorded ordinals: that call was made but not recorded. (A slot holding
  // a newer ordinal means the call was pushed out of the window: nothing to match.)
  if (ordinal >= 0 && ordinal <= f.newest && f.newest - ordinal < int64_t(capacity_)) {
    const CallSlot* held = slot(s.func, ordinal);
    if (!held->valid || int64_t(held->ordinal) < ordinal) {
      ++stats_.notRecorded;
      return Outcome::kNotRecorded;
    }
  }
  if (calls_ && f.newest - ordinal >= int64_t(capacity_))
    return realignNewest(f, s.func, seq, s.nBytes);
  return realign(f, s.func, seq, s.nBytes);
}

// The call the sample's position points to was pushed out of the window: the samples trail the
// calls by a whole window, which only calls without a task of their own can cause (a long run of
// one size under 2.30's symmetric-kernel check, each matched one question early). Re-anchoring
// on the oldest call would leave the next sample pushed out too, and every one after it; the
// newest unused call with the sample's bytes puts the anchor as far from the window's edge as
// it can be (the sample's own call is recent: samples are drained soon after their calls).
MeasurementMatcher::Outcome MeasurementMatcher::realignNewest(FuncState& f, int func, int64_t seq,
                                                              uint64_t nBytes) {
  const int64_t oldest = std::max<int64_t>(f.lastUsed + 1, f.newest - int64_t(capacity_) + 1);
  for (int64_t q = f.newest; q >= oldest; --q) {
    CallSlot* call = recorded(func, q);
    if (call == nullptr || call->used || call->nBytes != nBytes) continue;
    return anchorOn(f, call, q, seq);
  }
  ++stats_.noCall;
  return Outcome::kNoCall;
}

}  // namespace autopilot::bus

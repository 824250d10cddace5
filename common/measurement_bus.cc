#include "common/measurement_bus.h"

namespace autopilot::bus {

MeasurementBus& MeasurementBus::instance() {
  static MeasurementBus bus;
  return bus;
}

MeasurementBus::Slot* MeasurementBus::find(uint64_t commId) const {
  if (commId == 0) return nullptr;
  size_t start = size_t(commId * 0x9E3779B97F4A7C15ull >> 58);  // 6 bits: 0..63
  for (int i = 0; i < kMaxComms; ++i) {
    const Slot& s = slots_[(start + i) % kMaxComms];
    if (s.commId.load(std::memory_order_acquire) == commId) return const_cast<Slot*>(&s);
  }
  return nullptr;
}

bool MeasurementBus::attach(uint64_t commId) {
  if (commId == 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (Slot* s = find(commId)) {
    ++s->refs;
    return true;
  }
  size_t start = size_t(commId * 0x9E3779B97F4A7C15ull >> 58);
  for (int i = 0; i < kMaxComms; ++i) {
    Slot& s = slots_[(start + i) % kMaxComms];
    if (s.commId.load(std::memory_order_relaxed) != 0) continue;
    if (!s.ring) s.ring = std::make_unique<Ring<CollectiveSample>>(kRingCapacity);
    if (!s.shifts) s.shifts = std::make_unique<Ring<ShiftNotice>>(kShiftCapacity);
    // A reused slot starts empty; samples and notices of the previous owner still carry its
    // commId and are filtered out by the drains if a late producer raced the reuse.
    s.ring->reset();
    s.shifts->reset();
    s.published.store(0, std::memory_order_relaxed);
    s.dropped.store(0, std::memory_order_relaxed);
    s.shiftsReported.store(0, std::memory_order_relaxed);
    s.shiftsDropped.store(0, std::memory_order_relaxed);
    s.refs = 1;
    s.commId.store(commId, std::memory_order_release);
    return true;
  }
  return false;
}

void MeasurementBus::detach(uint64_t commId) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot* s = find(commId);
  if (s != nullptr && --s->refs == 0) s->commId.store(0, std::memory_order_release);
}

bool MeasurementBus::attached(uint64_t commId) const { return find(commId) != nullptr; }

bool MeasurementBus::publish(const CollectiveSample& sample) {
  Slot* s = find(sample.commId);
  if (s == nullptr) return false;
  if (!s->ring->push(sample)) {
    s->dropped.fetch_add(1, std::memory_order_relaxed);  // full: drop, never block or grow
    return false;
  }
  s->published.fetch_add(1, std::memory_order_relaxed);
  return true;
}

size_t MeasurementBus::drain(uint64_t commId, CollectiveSample* out, size_t max) {
  Slot* s = find(commId);
  if (s == nullptr) return 0;
  size_t n = 0;
  CollectiveSample sample;
  while (n < max && s->ring->pop(&sample)) {
    if (sample.commId == commId) out[n++] = sample;
  }
  return n;
}

uint64_t MeasurementBus::published(uint64_t commId) const {
  Slot* s = find(commId);
  return s ? s->published.load(std::memory_order_relaxed) : 0;
}

uint64_t MeasurementBus::dropped(uint64_t commId) const {
  Slot* s = find(commId);
  return s ? s->dropped.load(std::memory_order_relaxed) : 0;
}

bool MeasurementBus::reportShift(uint64_t commId, const ShiftNotice& notice) {
  Slot* s = find(commId);
  if (s == nullptr) return false;
  ShiftNotice n = notice;
  n.commId = commId;
  if (!s->shifts->push(n)) {
    s->shiftsDropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  s->shiftsReported.fetch_add(1, std::memory_order_relaxed);
  return true;
}

size_t MeasurementBus::drainShifts(uint64_t commId, ShiftNotice* out, size_t max) {
  Slot* s = find(commId);
  if (s == nullptr) return 0;
  size_t n = 0;
  ShiftNotice notice;
  while (n < max && s->shifts->pop(&notice)) {
    if (notice.commId == commId) out[n++] = notice;
  }
  return n;
}

uint64_t MeasurementBus::shiftsReported(uint64_t commId) const {
  Slot* s = find(commId);
  return s ? s->shiftsReported.load(std::memory_order_relaxed) : 0;
}

uint64_t MeasurementBus::shiftsDropped(uint64_t commId) const {
  Slot* s = find(commId);
  return s ? s->shiftsDropped.load(std::memory_order_relaxed) : 0;
}

void MeasurementBus::resetForTesting() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Slot& s : slots_) {
    s.commId.store(0);
    s.refs = 0;
  }
}

}  // namespace autopilot::bus

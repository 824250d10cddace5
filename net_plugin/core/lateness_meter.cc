#include "net_plugin/core/lateness_meter.h"

#include <algorithm>

namespace autopilot::net::core {

namespace {

constexpr uint64_t kHalfLifeMs = LatenessMeter::kHalfLifeNs / 1'000'000;

uint64_t decayedUs(uint64_t word, uint64_t nowNs) {
  uint64_t us = word >> 32;
  uint32_t atMs = uint32_t(word);
  // Modular (the millisecond count wraps); negative when another thread stored a later time.
  int32_t ageMs = int32_t(uint32_t(nowNs / 1'000'000) - atMs);
  uint64_t halvings = ageMs <= 0 ? 0 : uint64_t(ageMs) / kHalfLifeMs;
  return halvings >= 32 ? 0 : us >> halvings;
}

}  // namespace

LatenessMeter& LatenessMeter::process() {
  static LatenessMeter meter;
  return meter;
}

void LatenessMeter::onGap(uint64_t gapNs, uint64_t nowNs) noexcept {
  uint64_t gapUs = std::min<uint64_t>(gapNs / 1000, UINT32_MAX);
  uint64_t word = word_.load(std::memory_order_relaxed);
  for (;;) {
    if (gapUs <= decayedUs(word, nowNs)) return;
    uint64_t next = gapUs << 32 | uint32_t(nowNs / 1'000'000);
    if (word_.compare_exchange_weak(word, next, std::memory_order_relaxed)) return;
  }
}

uint64_t LatenessMeter::recentNs(uint64_t nowNs) const noexcept {
  return decayedUs(word_.load(std::memory_order_relaxed), nowNs) * 1000;
}

}  // namespace autopilot::net::core

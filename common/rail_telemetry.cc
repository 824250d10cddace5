#include "common/rail_telemetry.h"

#include <cstring>
#include <mutex>

#include "common/clock.h"

namespace autopilot::telemetry {
namespace {
std::mutex gRegisterMutex;  // registration only; never taken on the data path
}

const char* railStateName(RailState s) {
  switch (s) {
    case RailState::kHealthy:
      return "healthy";
    case RailState::kDegraded:
      return "degraded";
    case RailState::kFailed:
      return "failed";
    case RailState::kProbing:
      return "probing";
    case RailState::kStandby:
      return "standby";
  }
  return "?";
}

RailRegistry& RailRegistry::instance() {
  static RailRegistry registry;
  return registry;
}

int RailRegistry::registerRail(const RailIdentity& identity) {
  std::lock_guard<std::mutex> lock(gRegisterMutex);
  int n = count_.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    const RailIdentity& e = entries_[i].identity;
    if (std::strncmp(e.name, identity.name, kRailNameLen) == 0 &&
        std::strncmp(e.transport, identity.transport, sizeof(e.transport)) == 0) {
      return i;
    }
  }
  if (n >= kMaxRails) return -1;
  Entry& e = entries_[n];
  e.identity = identity;
  e.identity.name[kRailNameLen - 1] = '\0';
  e.identity.transport[sizeof(e.identity.transport) - 1] = '\0';
  e.state.store(uint8_t(RailState::kHealthy), std::memory_order_relaxed);
  e.stateSinceNs.store(monotonicNs(), std::memory_order_relaxed);
  count_.store(n + 1, std::memory_order_release);  // publishes the identity to readers
  return n;
}

RailCounters* RailRegistry::counters(int id) {
  if (id < 0 || id >= count_.load(std::memory_order_acquire)) return nullptr;
  return &entries_[id].counters;
}

bool RailRegistry::setState(int id, RailState state, uint64_t nowNs) {
  if (id < 0 || id >= count_.load(std::memory_order_acquire)) return false;
  Entry& e = entries_[id];
  uint8_t old = e.state.exchange(uint8_t(state), std::memory_order_acq_rel);
  if (old == uint8_t(state)) return false;
  uint64_t since = e.stateSinceNs.exchange(nowNs, std::memory_order_acq_rel);
  if (old < kNumRailStates && nowNs > since) {
    e.timeInStateNs[old].fetch_add(nowNs - since, std::memory_order_relaxed);
  }
  e.counters.stateChanges.fetch_add(1, std::memory_order_relaxed);
  if (state == RailState::kFailed) e.counters.failovers.fetch_add(1, std::memory_order_relaxed);
  if (old == uint8_t(RailState::kFailed) || old == uint8_t(RailState::kProbing)) {
    if (state == RailState::kHealthy) e.counters.recoveries.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

RailState RailRegistry::state(int id) const {
  if (id < 0 || id >= count_.load(std::memory_order_acquire)) return RailState::kFailed;
  return RailState(entries_[id].state.load(std::memory_order_acquire));
}

size_t RailRegistry::snapshot(RailSnapshot* out, size_t max, uint64_t nowNs) const {
  int n = count_.load(std::memory_order_acquire);
  size_t written = 0;
  for (int i = 0; i < n && written < max; ++i) {
    const Entry& e = entries_[i];
    RailSnapshot& s = out[written++];
    s.id = i;
    s.identity = e.identity;
    s.state = RailState(e.state.load(std::memory_order_acquire));
    const RailCounters& c = e.counters;
    s.bytesSent = c.bytesSent.load(std::memory_order_relaxed);
    s.bytesReceived = c.bytesReceived.load(std::memory_order_relaxed);
    s.chunksSent = c.chunksSent.load(std::memory_order_relaxed);
    s.chunksReceived = c.chunksReceived.load(std::memory_order_relaxed);
    s.retransmittedChunks = c.retransmittedChunks.load(std::memory_order_relaxed);
    s.retransmittedBytes = c.retransmittedBytes.load(std::memory_order_relaxed);
    s.probeCopyBytes = c.probeCopyBytes.load(std::memory_order_relaxed);
    s.failovers = c.failovers.load(std::memory_order_relaxed);
    s.recoveries = c.recoveries.load(std::memory_order_relaxed);
    s.stateChanges = c.stateChanges.load(std::memory_order_relaxed);
    s.bandwidthBytesPerSec = c.bandwidthBytesPerSec.load(std::memory_order_relaxed);
    s.sharePermille = c.sharePermille.load(std::memory_order_relaxed);
    for (int k = 0; k < kNumRailStates; ++k) {
      s.timeInStateNs[k] = e.timeInStateNs[k].load(std::memory_order_relaxed);
    }
    uint64_t since = e.stateSinceNs.load(std::memory_order_relaxed);
    if (nowNs > since && uint8_t(s.state) < kNumRailStates) {
      s.timeInStateNs[uint8_t(s.state)] += nowNs - since;
    }
    s.atNs = nowNs;
  }
  return written;
}

void RailRegistry::resetForTesting() {
  std::lock_guard<std::mutex> lock(gRegisterMutex);
  int n = count_.exchange(0);
  for (int i = 0; i < n; ++i) {
    Entry& e = entries_[i];
    e.counters.bytesSent = 0;
    e.counters.bytesReceived = 0;
    e.counters.chunksSent = 0;
    e.counters.chunksReceived = 0;
    e.counters.retransmittedChunks = 0;
    e.counters.retransmittedBytes = 0;
    e.counters.probeCopyBytes = 0;
    e.counters.failovers = 0;
    e.counters.recoveries = 0;
    e.counters.stateChanges = 0;
    e.counters.bandwidthBytesPerSec = 0;
    e.counters.sharePermille = 0;
    for (auto& t : e.timeInStateNs) t = 0;
  }
}

}  // namespace autopilot::telemetry

#include "profiler_plugin/nccl_net_rails.h"

#include <atomic>
#include <cstdio>

#include "common/rail_telemetry.h"

namespace autopilot::profiler {
namespace {

constexpr int kMaxFds = 4096;

// Cells hold rail id + 2, so that zero-initialised storage means "not looked up yet" and -1
// ("could not register") is stored as 1. Static zero-initialisation: no constructor runs.
std::atomic<int> gIbRails[kMaxIbDevices];
std::atomic<int> gSocketRails[kMaxFds];
std::atomic<int> gSocketRailCount{0};
std::atomic<int> gSocketOtherRail{0};

int registerRail(const char* transport, const char* name, int device) noexcept {
  telemetry::RailIdentity id{};
  std::snprintf(id.name, sizeof(id.name), "%s", name);
  std::snprintf(id.transport, sizeof(id.transport), "%s", transport);
  id.device = device;
  id.railIndex = 0;
  id.speedMbps = 0;
  return telemetry::RailRegistry::instance().registerRail(id);
}

// Resolves a cache cell: the first caller registers (registration is idempotent, so a race
// between two first callers registers the same rail twice harmlessly).
template <typename MakeRail>
int cached(std::atomic<int>& cell, MakeRail&& make) noexcept {
  int stored = cell.load(std::memory_order_acquire);
  if (stored != 0) return stored - 2;
  int rail = make();
  cell.store(rail + 2, std::memory_order_release);
  return rail;
}

}  // namespace

int ncclIbRail(int device) noexcept {
  if (device < 0 || device >= kMaxIbDevices) return -1;
  return cached(gIbRails[device], [&] {
    char name[telemetry::kRailNameLen];
    std::snprintf(name, sizeof(name), "nccl-ib%d", device);
    return registerRail("ib", name, device);
  });
}

int ncclSocketRail(int fd) noexcept {
  if (fd < 0) return -1;
  auto other = [] {
    return cached(gSocketOtherRail, [] { return registerRail("sock", "nccl-sock-other", -1); });
  };
  if (fd >= kMaxFds) return other();
  return cached(gSocketRails[fd], [&] {
    if (gSocketRailCount.fetch_add(1, std::memory_order_relaxed) >= kMaxSocketRails) {
      return other();
    }
    char name[telemetry::kRailNameLen];
    std::snprintf(name, sizeof(name), "nccl-sock-fd%d", fd);
    return registerRail("sock", name, -1);
  });
}

void accountNcclNetTransfer(int rail, bool isSend, uint64_t length, uint64_t durationNs) noexcept {
  telemetry::RailCounters* c = telemetry::RailRegistry::instance().counters(rail);
  if (c == nullptr) return;
  if (isSend) {
    c->bytesSent.fetch_add(length, std::memory_order_relaxed);
    c->chunksSent.fetch_add(1, std::memory_order_relaxed);
  } else {
    c->bytesReceived.fetch_add(length, std::memory_order_relaxed);
    c->chunksReceived.fetch_add(1, std::memory_order_relaxed);
  }
  // Below 64 KiB a transfer's time is dominated by latency, not bandwidth.
  constexpr uint64_t kMinBandwidthBytes = 64 * 1024;
  if (length < kMinBandwidthBytes || durationNs == 0) return;
  uint64_t sample = length * 1000000000ull / durationNs;
  // EWMA (1/8 weight). Concurrent updaters may lose one sample's weight: an estimate, not a count.
  uint64_t old = c->bandwidthBytesPerSec.load(std::memory_order_relaxed);
  uint64_t next = old == 0 ? sample : old - old / 8 + sample / 8;
  c->bandwidthBytesPerSec.store(next, std::memory_order_relaxed);
}

void resetNcclNetRailsForTesting() noexcept {
  for (auto& r : gIbRails) r.store(0, std::memory_order_relaxed);
  for (auto& r : gSocketRails) r.store(0, std::memory_order_relaxed);
  gSocketRailCount.store(0, std::memory_order_relaxed);
  gSocketOtherRail.store(0, std::memory_order_relaxed);
}

}  // namespace autopilot::profiler

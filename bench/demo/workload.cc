#include "bench/demo/workload.h"

#include <algorithm>

namespace autopilot::demo {
namespace {
// Small integers keep every float sum exact, whatever order the reduction ran in.
inline float value(uint64_t iteration, int rank, size_t i) {
  return float(int((iteration * 7 + uint64_t(rank) * 13 + i) % 251) - 125);
}
}  // namespace

Workload::Workload(int nRanks, std::vector<size_t> sizes, bool allReduceOnly) : nRanks_(nRanks) {
  std::vector<CollectiveKind> kinds = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                       CollectiveKind::kReduceScatter, CollectiveKind::kBroadcast};
  if (allReduceOnly) kinds.resize(1);
  for (size_t bytes : sizes) {
    for (CollectiveKind k : kinds) {
      size_t count = bytes / sizeof(float);
      if (k == CollectiveKind::kAllGather || k == CollectiveKind::kReduceScatter) {
        count /= size_t(nRanks);
      }
      if (count == 0) count = 1;
      WorkItem item{k, count, int(items_.size()) % nRanks};
      items_.push_back(item);
      CollectiveCall call{k, Algorithm::kRing, 0, count, 0};
      maxElements_ = std::max(maxElements_, bufferElements(call, nRanks));
    }
  }
}

void Workload::fillInput(const WorkItem& item, uint64_t iteration, int rank, float* data) const {
  CollectiveCall call{item.kind, Algorithm::kRing, 0, item.count, item.root};
  size_t n = bufferElements(call, nRanks_);
  for (size_t i = 0; i < n; ++i) data[i] = -1000.0f;  // poison: missed writes show up
  switch (item.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduceScatter:
      for (size_t i = 0; i < n; ++i) data[i] = value(iteration, rank, i);
      break;
    case CollectiveKind::kAllGather:
      for (size_t i = 0; i < item.count; ++i) {
        data[size_t(rank) * item.count + i] = value(iteration, rank, i);
      }
      break;
    case CollectiveKind::kBroadcast:
      if (rank == item.root) {
        for (size_t i = 0; i < item.count; ++i) data[i] = value(iteration, rank, i);
      }
      break;
  }
}

uint64_t Workload::countWrong(const WorkItem& item, uint64_t iteration, int rank,
                              const float* data) const {
  uint64_t wrong = 0;
  auto sum = [&](size_t i) {
    float s = 0;
    for (int r = 0; r < nRanks_; ++r) s += value(iteration, r, i);
    return s;
  };
  switch (item.kind) {
    case CollectiveKind::kAllReduce:
      for (size_t i = 0; i < item.count; ++i) wrong += data[i] != sum(i);
      break;
    case CollectiveKind::kReduceScatter:
      for (size_t i = 0; i < item.count; ++i) {
        size_t at = size_t(rank) * item.count + i;
        wrong += data[at] != sum(at);
      }
      break;
    case CollectiveKind::kAllGather:
      for (int r = 0; r < nRanks_; ++r) {
        for (size_t i = 0; i < item.count; ++i) {
          wrong += data[size_t(r) * item.count + i] != value(iteration, r, i);
        }
      }
      break;
    case CollectiveKind::kBroadcast:
      for (size_t i = 0; i < item.count; ++i) wrong += data[i] != value(iteration, item.root, i);
      break;
  }
  return wrong;
}

uint64_t Workload::busBytes(const WorkItem& item) const {
  CollectiveCall call{item.kind, Algorithm::kRing, 0, item.count, item.root};
  double bytes = double(tunerBytes(call, nRanks_));
  double n = nRanks_;
  switch (item.kind) {
    case CollectiveKind::kAllReduce:
      return uint64_t(bytes * 2 * (n - 1) / n);
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      return uint64_t(bytes * (n - 1) / n);
    case CollectiveKind::kBroadcast:
      return uint64_t(bytes);
  }
  return uint64_t(bytes);
}

}  // namespace autopilot::demo

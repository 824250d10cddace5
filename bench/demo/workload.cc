#include "bench/demo/workload.h"

#include <algorithm>

namespace autopilot::demo {
namespace {
// Small integers keep every float sum exact, whatever order the reduction ran in.
constexpr size_t kPeriod = 251;
inline float value(uint64_t iteration, int rank, size_t i) {
  return float(int((iteration * 7 + uint64_t(rank) * 13 + i) % kPeriod) - 125);
}

// value() repeats every kPeriod elements, and so do sums of it over ranks: a buffer is filled
// and checked against a table of one period, a copy and a compare per element. Computed per
// element (kPeriod is no power of two: a division each, and one per rank in a sum) the fill
// and the check took 5.5-6.8 ms per collective on a rank of the demo's loaded 2-core machine
// (0.8-1.6 ms now): 11-26% of each phase spent outside the collectives, and CPU the ranks'
// transports needed.
struct Period {
  float v[kPeriod];
};

Period inputOf(uint64_t iteration, int rank) {
  Period p;
  for (size_t j = 0; j < kPeriod; ++j) p.v[j] = value(iteration, rank, j);
  return p;
}

Period sumsOf(uint64_t iteration, int nRanks) {
  Period p;
  for (size_t j = 0; j < kPeriod; ++j) {
    float s = 0;
    for (int r = 0; r < nRanks; ++r) s += value(iteration, r, j);
    p.v[j] = s;
  }
  return p;
}

// data[k] = element first + k of the periodic sequence, for k < n.
void write(const Period& p, size_t first, float* data, size_t n) {
  size_t j = first % kPeriod;
  while (n > 0) {
    const size_t len = std::min(n, kPeriod - j);
    std::copy_n(p.v + j, len, data);
    data += len;
    n -= len;
    j = 0;
  }
}

// How many of data[k], k < n, differ from element first + k of the periodic sequence.
uint64_t mismatches(const Period& p, size_t first, const float* data, size_t n) {
  uint64_t wrong = 0;
  size_t j = first % kPeriod;
  while (n > 0) {
    const size_t len = std::min(n, kPeriod - j);
    for (size_t k = 0; k < len; ++k) wrong += data[k] != p.v[j + k];
    data += len;
    n -= len;
    j = 0;
  }
  return wrong;
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
  const size_t n = bufferElements(call, nRanks_);
  const Period mine = inputOf(iteration, rank);
  switch (item.kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduceScatter:
      write(mine, 0, data, n);
      break;
    case CollectiveKind::kAllGather:
      std::fill_n(data, n, -1000.0f);  // poison: missed writes show up
      write(mine, 0, data + size_t(rank) * item.count, item.count);
      break;
    case CollectiveKind::kBroadcast:
      if (rank == item.root) {
        write(mine, 0, data, item.count);
      } else {
        std::fill_n(data, n, -1000.0f);
      }
      break;
  }
}

uint64_t Workload::countWrong(const WorkItem& item, uint64_t iteration, int rank,
                              const float* data) const {
  switch (item.kind) {
    case CollectiveKind::kAllReduce:
      return mismatches(sumsOf(iteration, nRanks_), 0, data, item.count);
    case CollectiveKind::kReduceScatter: {
      const size_t at = size_t(rank) * item.count;
      return mismatches(sumsOf(iteration, nRanks_), at, data + at, item.count);
    }
    case CollectiveKind::kAllGather: {
      uint64_t wrong = 0;
      for (int r = 0; r < nRanks_; ++r) {
        wrong += mismatches(inputOf(iteration, r), 0, data + size_t(r) * item.count, item.count);
      }
      return wrong;
    }
    case CollectiveKind::kBroadcast:
      return mismatches(inputOf(iteration, item.root), 0, data, item.count);
  }
  return 0;
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

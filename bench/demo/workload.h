// The demo's workload: a fixed, rank-independent schedule of collectives (the same sequence on
// every rank, as in any data-parallel job), deterministic inputs and an exact result check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench/demo/collectives.h"

namespace autopilot::demo {

struct WorkItem {
  CollectiveKind kind;
  size_t count;  // elements (per rank for all-gather / reduce-scatter)
  int root;
};

class Workload {
 public:
  // sizes in bytes of the tuner-visible operation; every collective kind at every size, or
  // all-reduce alone (a data-parallel job's gradient reduction).
  Workload(int nRanks, std::vector<size_t> sizes, bool allReduceOnly = false);
  const WorkItem& at(uint64_t iteration) const { return items_[iteration % items_.size()]; }
  size_t maxElements() const { return maxElements_; }
  size_t contexts() const { return items_.size(); }

  // Fills `data` with this rank's input for `item` (iteration-dependent, exact in float).
  void fillInput(const WorkItem& item, uint64_t iteration, int rank, float* data) const;
  // Number of elements of this rank's output that differ from the exact result.
  uint64_t countWrong(const WorkItem& item, uint64_t iteration, int rank, const float* data) const;
  // Bytes for bus bandwidth, as nccl-tests reports it.
  uint64_t busBytes(const WorkItem& item) const;

 private:
  int nRanks_;
  std::vector<WorkItem> items_;
  size_t maxElements_ = 0;
};

}  // namespace autopilot::demo

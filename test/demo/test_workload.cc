// The demo's inputs and result check, filled and compared a period at a time, against their
// definition element by element: every rank's input, every exact result, and every wrong
// element counted, for each collective kind, awkward sizes and rank counts.
#include <catch2/catch.hpp>
#include <vector>

#include "bench/demo/workload.h"

using namespace autopilot::demo;

namespace {

// The definition (what bench/demo/workload.cc computes a period at a time).
float value(uint64_t iteration, int rank, size_t i) {
  return float(int((iteration * 7 + uint64_t(rank) * 13 + i) % 251) - 125);
}

float sum(uint64_t iteration, int nRanks, size_t i) {
  float s = 0;
  for (int r = 0; r < nRanks; ++r) s += value(iteration, r, i);
  return s;
}

// What `rank` holds after the collective ran right.
std::vector<float> exactOutput(const WorkItem& item, uint64_t it, int rank, int nRanks) {
  CollectiveCall call{item.kind, Algorithm::kRing, 0, item.count, item.root};
  std::vector<float> out(bufferElements(call, nRanks));
  for (size_t i = 0; i < out.size(); ++i) out[i] = value(it, rank, i);  // reduce-scatter: rest
  switch (item.kind) {
    case CollectiveKind::kAllReduce:
      for (size_t i = 0; i < item.count; ++i) out[i] = sum(it, nRanks, i);
      break;
    case CollectiveKind::kReduceScatter:
      for (size_t i = 0; i < item.count; ++i) {
        const size_t at = size_t(rank) * item.count + i;
        out[at] = sum(it, nRanks, at);
      }
      break;
    case CollectiveKind::kAllGather:
      for (int r = 0; r < nRanks; ++r) {
        for (size_t i = 0; i < item.count; ++i) out[size_t(r) * item.count + i] = value(it, r, i);
      }
      break;
    case CollectiveKind::kBroadcast:
      for (size_t i = 0; i < item.count; ++i) out[i] = value(it, item.root, i);
      break;
  }
  return out;
}

}  // namespace

TEST_CASE("demo workload: inputs and the exact check match their element-wise definition",
          "[demo][workload]") {
  const int nRanks = GENERATE(2, 3, 4, 7);
  // 251 is the period; sizes below, at and across it, and one of the demo's.
  const size_t bytes =
      GENERATE(size_t(4), size_t(1000), size_t(1004), size_t(4 * 251 * 7 + 12), size_t(256 << 10));
  Workload w(nRanks, {bytes});
  for (size_t k = 0; k < w.contexts(); ++k) {
    for (uint64_t it : {uint64_t(k), uint64_t(k + 4 * 250 + 1), uint64_t(k + 1234567)}) {
      const WorkItem& item = w.at(it);
      CollectiveCall call{item.kind, Algorithm::kRing, 0, item.count, item.root};
      const size_t n = bufferElements(call, nRanks);
      for (int rank = 0; rank < nRanks; ++rank) {
        INFO("kind " << int(item.kind) << ", " << nRanks << " ranks, " << item.count
                     << " elements, iteration " << it << ", rank " << rank);
        // The input: this rank's values where the collective reads them, poison elsewhere.
        std::vector<float> data(w.maxElements(), 7.0f);
        w.fillInput(item, it, rank, data.data());
        for (size_t i = 0; i < n; ++i) {
          float want = -1000.0f;
          switch (item.kind) {
            case CollectiveKind::kAllReduce:
            case CollectiveKind::kReduceScatter:
              want = value(it, rank, i);
              break;
            case CollectiveKind::kAllGather:
              if (i / item.count == size_t(rank)) want = value(it, rank, i % item.count);
              break;
            case CollectiveKind::kBroadcast:
              if (rank == item.root) want = value(it, rank, i);
              break;
          }
          if (data[i] != want) {
            FAIL_CHECK("input element " << i << ": " << data[i] << ", want " << want);
            break;
          }
        }
        // The exact output passes; every corrupted element of the checked part is counted.
        std::vector<float> out = exactOutput(item, it, rank, nRanks);
        CHECK(w.countWrong(item, it, rank, out.data()) == 0);
        size_t first = 0, checked = n;
        if (item.kind == CollectiveKind::kAllReduce || item.kind == CollectiveKind::kBroadcast) {
          checked = item.count;
        } else if (item.kind == CollectiveKind::kReduceScatter) {
          first = size_t(rank) * item.count;
          checked = item.count;
        }
        uint64_t corrupted = 0;
        for (size_t i = first; i < first + checked; i += 1 + (i % 5)) {
          out[i] += 1.0f;
          ++corrupted;
        }
        out[first + checked - 1] = -1000.0f;  // a missed write at the very end
        const std::vector<float> ref = exactOutput(item, it, rank, nRanks);
        uint64_t want = 0;
        for (size_t i = first; i < first + checked; ++i) want += out[i] != ref[i];
        CHECK(want >= corrupted);
        CHECK(w.countWrong(item, it, rank, out.data()) == want);
      }
    }
  }
}

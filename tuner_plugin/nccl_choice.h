// NCCL's rule for picking a cell of a filled cost table, which the tuner needs to know what
// NCCL would run without us (the bandit's default arm) and the test hook to publish it.
#pragma once

#include "common/abi/tuner_abi.h"

namespace autopilot::tuner {

// The first strict minimum among cells >= 0 and below an hour (3.6e9 us), algorithms in index
// order, then protocols. Returns the cell index algo * numProto + proto, or -1 when no cell
// qualifies.
int ncclChoice(const float* table, int numAlgo = abi::kNumAlgorithms,
               int numProto = abi::kNumProtocols);

}  // namespace autopilot::tuner

#include "tuner_plugin/nccl_choice.h"

namespace autopilot::tuner {

int ncclChoice(const float* table, int numAlgo, int numProto) {
  int best = -1;
  float bestValue = 0;
  for (int a = 0; a < numAlgo; ++a) {
    for (int p = 0; p < numProto; ++p) {
      float v = table[a * numProto + p];
      // NCCL considers values >= 0 and < 3.6e9 (an hour in us); ties keep the first.
      if (v < 0 || v >= 3.6e9f) continue;
      if (best < 0 || v < bestValue) {
        best = a * numProto + p;
        bestValue = v;
      }
    }
  }
  return best;
}

}  // namespace autopilot::tuner

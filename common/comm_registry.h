// What each plugin learns about a communicator at init, shared in-process by commId. NCCL tells
// each plugin a different subset: the profiler's init gets the rank and the name, the tuner's
// and the net plugin's get only the commId (and the tuner nRanks/nNodes). NCCL initialises the
// profiler before the tuner on the same thread, so the tuner can look up its rank here.
#pragma once

#include <cstdint>
#include <string>

namespace autopilot::comms {

struct CommInfo {
  uint64_t commId = 0;
  int rank = -1;  // -1: unknown (no profiler plugin of ours on this communicator, or several
                  // ranks of it in this process)
  int nRanks = 0;
  int nNodes = 0;
  std::string name;
};

// Records or updates what is known (fields left at their defaults do not overwrite known
// values). Reference-counted: each plugin that registers must release.
void registerComm(const CommInfo& info);
void releaseComm(uint64_t commId);
// Returns false when nothing is known about commId.
bool lookup(uint64_t commId, CommInfo* out);

}  // namespace autopilot::comms

#include "common/comm_registry.h"

#include <map>
#include <mutex>

namespace autopilot::comms {
namespace {

struct Entry {
  CommInfo info;
  int refs = 0;
  bool rankAmbiguous = false;  // two ranks of this communicator live in this process
};

// Touched only at plugin init/finalize, never on a hot path.
std::mutex gMutex;
std::map<uint64_t, Entry>& table() {
  static std::map<uint64_t, Entry> entries;
  return entries;
}

}  // namespace

void registerComm(const CommInfo& info) {
  std::lock_guard<std::mutex> lock(gMutex);
  Entry& e = table()[info.commId];
  e.info.commId = info.commId;
  // Several GPUs per process (ncclCommInitAll, nccl-tests -g N): the communicator's ranks in
  // this process share the commId, so a rank looked up by commId could be a sibling's. Once two
  // different ranks registered, the rank is unknown (-1) rather than possibly wrong: the tuner's
  // rendezvous checks known ranks for duplicate claims.
  if (info.rank >= 0 && e.info.rank >= 0 && info.rank != e.info.rank) e.rankAmbiguous = true;
  if (info.rank >= 0) e.info.rank = e.rankAmbiguous ? -1 : info.rank;
  if (info.nRanks > 0) e.info.nRanks = info.nRanks;
  if (info.nNodes > 0) e.info.nNodes = info.nNodes;
  if (!info.name.empty()) e.info.name = info.name;
  ++e.refs;
}

void releaseComm(uint64_t commId) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = table().find(commId);
  if (it != table().end() && --it->second.refs <= 0) table().erase(it);
}

bool lookup(uint64_t commId, CommInfo* out) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = table().find(commId);
  if (it == table().end()) return false;
  *out = it->second.info;
  return true;
}

}  // namespace autopilot::comms

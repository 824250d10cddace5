#include "common/comm_registry.h"

#include <map>
#include <mutex>

namespace autopilot::comms {
namespace {

struct Entry {
  CommInfo info;
  int refs = 0;
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
  if (info.rank >= 0) e.info.rank = info.rank;
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

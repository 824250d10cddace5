// What each NCCL release looks for in a plugin library: the versioned symbols it tries, newest
// first (it takes the first one found), per plugin kind. Read from NVIDIA/nccl's loaders at the
// release tags (src/plugin/{net,tuner,profiler}.cc and their per-version files; before 2.26,
// src/net.cc, src/misc/tuner.cc, src/misc/profiler.cc). The harness loads plugins in a release's
// order, `autopilot info --nccl X.Y` reports what that release would pick, and the symbol-check
// test checks our library against every release we claim.
#pragma once

#include <string>
#include <vector>

namespace autopilot::host {

struct NcclRelease {
  int major = 2, minor = 0;
  // Versions tried, newest first; empty: the release has no plugins of that kind.
  std::vector<int> net, tuner, profiler;
  std::string label() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// 2.19 .. 2.32, oldest first.
const std::vector<NcclRelease>& ncclReleases();
// "2.31", "2.31.2" or "v2.31.2-1"; NULL when unknown.
const NcclRelease* findNcclRelease(const std::string& version);
const NcclRelease& newestNcclRelease();

// The symbol name of `version` for a plugin kind (0 net, 1 tuner, 2 profiler).
std::string pluginSymbol(int kind, int version);

}  // namespace autopilot::host

#include "common/host/nccl_releases.h"

#include <cstdio>

namespace autopilot::host {

const std::vector<NcclRelease>& ncclReleases() {
  static const std::vector<NcclRelease> releases = {
      {2, 19, {7, 6, 5}, {1}, {}},
      {2, 20, {8, 7, 6, 5}, {1}, {}},
      {2, 21, {8, 7, 6, 5}, {2}, {}},
      {2, 22, {8, 7, 6, 5}, {3, 2}, {}},
      {2, 23, {8, 7, 6, 5}, {3, 2}, {1}},
      {2, 24, {9, 8, 7, 6, 5}, {4, 3, 2}, {2, 1}},
      {2, 25, {9, 8, 7, 6, 5}, {4, 3, 2}, {2, 1}},
      {2, 26, {10, 9, 8, 7, 6}, {4, 3, 2}, {3, 2, 1}},
      {2, 27, {10, 9, 8, 7, 6}, {4, 3, 2}, {4, 3, 2, 1}},
      {2, 28, {11, 10, 9, 8, 7, 6}, {5, 4, 3, 2}, {5, 4, 3, 2, 1}},
      {2, 29, {11, 10, 9, 8, 7, 6}, {5, 4, 3, 2}, {6, 5, 4, 3, 2, 1}},
      {2, 30, {12, 11, 10, 9, 8, 7, 6}, {6, 5, 4, 3, 2}, {6, 5, 4, 3, 2, 1}},
      {2, 31, {12, 11, 10, 9, 8, 7, 6}, {6, 5, 4, 3, 2}, {7, 6, 5, 4, 3, 2, 1}},
      {2, 32, {12, 11, 10, 9, 8, 7, 6}, {7, 6, 5, 4, 3, 2}, {7, 6, 5, 4, 3, 2, 1}},
  };
  return releases;
}

const NcclRelease* findNcclRelease(const std::string& version) {
  int major = 0, minor = 0;
  const char* s = version.c_str();
  if (*s == 'v') ++s;
  if (std::sscanf(s, "%d.%d", &major, &minor) != 2) return nullptr;
  for (const NcclRelease& r : ncclReleases()) {
    if (r.major == major && r.minor == minor) return &r;
  }
  return nullptr;
}

const NcclRelease& newestNcclRelease() { return ncclReleases().back(); }

std::string pluginSymbol(int kind, int version) {
  static const char* const kPrefix[3] = {"ncclNetPlugin_v", "ncclTunerPlugin_v", "ncclProfiler_v"};
  return std::string(kPrefix[kind < 0 || kind > 2 ? 0 : kind]) + std::to_string(version);
}

}  // namespace autopilot::host

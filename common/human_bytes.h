// Byte counts as people read them ("512 B", "1.5 KiB", "4.0 MiB"): the one formatter of the
// plugins' log lines and reports.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace autopilot {

inline std::string humanBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, kUnits[u]);
  return buf;
}

}  // namespace autopilot

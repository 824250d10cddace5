// Reading a folder of Prometheus files for `autopilot top` (and the demo's --top view).
#pragma once

#include <string>
#include <vector>

#include "bench/top/top_model.h"

namespace autopilot::top {

// Every .prom file of `dir` and of its sub-folders (one level: a folder per host), parsed, with
// its modification time. A file removed while reading is skipped (its process ended).
std::vector<FileVersion> readPromFolder(const std::string& dir);

// Wall-clock seconds (the epoch of file modification times).
double wallSeconds();

}  // namespace autopilot::top

// Reader for forced-arm measurement files in the format of ../shared/data/forced-arm/ (see its
// INDEX.md): one row per (system, collective, forced arm, size) with out-of-place and in-place
// times, or only bus/algorithm bandwidth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace autopilot::replay {

struct ForcedArmRow {
  std::string system;
  std::string collective;  // nccl-tests name: all_reduce, all_gather, ...
  std::string armAlgo;     // "AUTO" = not forced
  std::string armProto;
  uint64_t sizeBytes = 0;
  double timeOutOfPlaceUs = -1;  // -1: not given
  double timeInPlaceUs = -1;
  double algbwGBps = -1;
  double busbwGBps = -1;
};

// Splits one CSV record (RFC 4180 quoting; no embedded newlines in this format).
std::vector<std::string> splitCsvLine(const std::string& line);

// Reads a whole file. Rows with an unknown size or no usable number are skipped and counted in
// *skipped; a missing or unreadable file, or a header without the required columns, fails.
bool readForcedArmCsv(const std::string& path, std::vector<ForcedArmRow>* rows, int* skipped,
                      std::string* error);

// abi::Func index for an nccl-tests collective name, -1 when the tuner never sees it.
int collectiveFunc(const std::string& name);

}  // namespace autopilot::replay

// Reader for forced-arm measurement files: nccl-tests results as CSV, one row per (system,
// collective, forced arm, size) with out-of-place and in-place times, or only bus/algorithm
// bandwidth. The header names at least system, collective (nccl-tests name: all_reduce, ...),
// arm_algo and arm_proto (AUTO: not forced), size_bytes, time_us_out_of_place,
// time_us_in_place, algbw_GBps and busbw_GBps; other columns are ignored. The data set the
// replay tests read is in this format and lies beside the checkout (../shared/data/forced-arm/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace autopilot::replay {

struct ForcedArmRow {
  std::string system;      // without a "; channels forced to N" suffix (see channels)
  std::string collective;  // nccl-tests name: all_reduce, all_gather, ...
  std::string armAlgo;     // "AUTO" = not forced
  std::string armProto;
  int channels = 0;  // 0: NCCL's own channel count; N: the row's system ended with
                     // "; channels forced to N" (the arm (algo, proto, N channels))
  uint64_t sizeBytes = 0;
  double timeOutOfPlaceUs = -1;  // -1: not given
  double timeInPlaceUs = -1;
  double algbwGBps = -1;
  double busbwGBps = -1;
};

// Splits one CSV record (RFC 4180 quoting; no embedded newlines in this format).
std::vector<std::string> splitCsvLine(const std::string& line);

// The largest channel count a forced-channel row may name: NCCL's channel arrays hold 64.
inline constexpr int kMaxForcedChannels = 64;

// Splits "SYSTEM; channels forced to N" into SYSTEM and N (1..kMaxForcedChannels). Returns 0 and
// leaves *system whole without the suffix, -1 when the suffix is there but N is not a valid count.
int splitForcedChannels(std::string* system);

// Reads a whole file. Rows with an unknown size, no usable number or an invalid forced channel
// count are skipped and counted in *skipped; a missing or unreadable file, or a header without the
// required columns, fails.
bool readForcedArmCsv(const std::string& path, std::vector<ForcedArmRow>* rows, int* skipped,
                      std::string* error);

// abi::Func index for an nccl-tests collective name, -1 when the tuner never sees it.
int collectiveFunc(const std::string& name);

}  // namespace autopilot::replay

// The logger the plugin-host harness hands to plugins in place of NCCL's ncclDebugLog. It keeps
// a bounded record of every message (tests assert on them) and echoes to stderr the way NCCL
// would print them, honouring NCCL_DEBUG and NCCL_DEBUG_SUBSYS.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/abi/nccl_abi.h"

namespace autopilot::host {

struct LogRecord {
  int level;
  unsigned long flags;
  std::string function;
  int line;
  std::string message;
  double steadySeconds = 0;  // std::chrono::steady_clock at capture (CLOCK_MONOTONIC: comparable
                             // across the processes of one host)
};

class LogCapture {
 public:
  static abi::Logger logger();
  static std::vector<LogRecord> records();
  static void clear();
  // Number of captured records at `level` (or any level when level < 0) containing `needle`.
  static size_t count(int level, const std::string& needle);
  // Echo configuration: messages at or below `level` whose flags intersect `subsysMask` are
  // printed to stderr. configureEchoFromEnv() reads NCCL_DEBUG / NCCL_DEBUG_SUBSYS as NCCL does
  // (default: WARN only; INFO shows INIT|BOOTSTRAP|ENV unless NCCL_DEBUG_SUBSYS says otherwise).
  static void setEcho(int level, unsigned long subsysMask);
  static void configureEchoFromEnv();
  static constexpr size_t kMaxRecords = 200000;
};

// Parses an NCCL_DEBUG_SUBSYS value ("INIT,NET", "^ENV", "ALL") into a flag mask.
unsigned long parseSubsysList(const std::string& value);

}  // namespace autopilot::host

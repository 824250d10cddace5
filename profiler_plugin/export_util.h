// Small helpers shared by the exporters (trace, Inspector JSON lines, Prometheus, summary).
// Used off the hot path only (service thread, init, finalize).
#pragma once

#include <cstdint>
#include <string>

#include "common/human_bytes.h"

namespace autopilot::profiler {

// Appends `text` as the body of a JSON string (quotes not included), escaping as RFC 8259 asks.
void appendJsonEscaped(std::string* out, const char* text);
// Appends `text` as a Prometheus label value body (escapes backslash, quote and newline).
void appendLabelEscaped(std::string* out, const char* text);

struct PathFields {
  int rank = 0;
  uint64_t commId = 0;
  std::string job;  // NCCL_AUTOPILOT_JOB_NAME
};
// Expands %r (rank), %c (communicator tag), %p (pid), %h (host name), %j (the job name, with
// every character but letters, digits, '.', '-' and '_' replaced by '_'; "job" when unset) and
// %% in a path pattern. Unknown % sequences are kept verbatim.
std::string expandPathPattern(const std::string& pattern, const PathFields& fields);

std::string hostName();

}  // namespace autopilot::profiler

// Journal of the plugins' decisions and state changes (rail failed / re-weighted / re-joined,
// tuner policy published, exploration re-opened, ...). The profiler exports it to the trace and
// the finalize summary; tests and the demo read it to check what happened.
//
// For rare events only, never for per-call or per-chunk activity: recording takes a mutex.
// Bounded: a ring of kCapacity events; when full the oldest are overwritten, and a reader that
// fell behind sees the gap in sequence numbers (and `overwritten()` counts it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace autopilot::journal {

enum class Source : uint8_t { kNet = 0, kTuner = 1, kProfiler = 2 };
const char* sourceName(Source s);

struct Event {
  uint64_t seq;     // 1, 2, 3, ... per load of the library
  uint64_t timeNs;  // host monotonic clock (common/clock.h)
  Source source;
  uint64_t commId;   // 0 when not tied to a communicator
  int rail;          // telemetry rail id, -1 when not tied to a rail
  char kind[24];     // short machine-readable tag, e.g. "rail_failed", "policy_published"
  char detail[104];  // human-readable, NUL-terminated
};

// Every kind the plugins record: the profiler's Prometheus export writes each one at 0 until it
// first happens, so that rate() and increase() see the first occurrence. A kind missing here is
// still counted, from its first occurrence on.
struct KnownKind {
  Source source;
  const char* kind;
};
inline constexpr KnownKind kKnownKinds[] = {
    {Source::kNet, "rail_failed"},
    {Source::kNet, "rail_degraded"},
    {Source::kNet, "rail_recovered"},
    {Source::kNet, "rail_rejoined"},
    {Source::kNet, "rail_healthy"},
    {Source::kNet, "port_down"},
    {Source::kNet, "port_active"},
    {Source::kTuner, "tuner_choice"},
    {Source::kTuner, "tuner_frozen"},
    {Source::kProfiler, "latency_shift"},
    {Source::kProfiler, "rail_bw_shift"},
    {Source::kProfiler, "straggler"},
    {Source::kProfiler, "straggler_cleared"},
};

class EventJournal {
 public:
  static constexpr size_t kCapacity = 4096;
  static EventJournal& instance();

  void record(Source source, uint64_t commId, int rail, const char* kind, const char* fmt, ...)
      __attribute__((format(printf, 6, 7)));
  // Copies events with seq > cursor (oldest first) into out; returns the count. *cursor is
  // advanced to the last copied seq.
  size_t readSince(uint64_t* cursor, Event* out, size_t max) const;
  uint64_t lastSeq() const;
  uint64_t overwritten() const;
  void resetForTesting();

 private:
  mutable std::mutex mu_;
  Event ring_[kCapacity];
  uint64_t next_ = 1;  // seq of the next event
};

}  // namespace autopilot::journal

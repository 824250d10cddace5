// Per-rail telemetry of the net plugin (TCP or verbs), readable in-process by the profiler,
// the benchmarks and the demo. A rail is one NIC (an interface, or an HCA port) as the net
// plugin uses it; counters are process-wide per rail, summed over every connection using it.
//
// Bounded by construction: a fixed table of kMaxRails entries, claimed at device discovery
// (never on the data path). Writers update relaxed atomics on the data path (no locks, no
// allocation); readers take snapshots at any time from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace autopilot::telemetry {

enum class RailState : uint8_t {
  kHealthy = 0,   // carrying its share
  kDegraded = 1,  // alive but persistently slow: share reduced
  kFailed = 2,    // no longer carrying data; being probed in the background
  kProbing = 3,   // re-admitted on trial with a small share
  kStandby = 4,   // configured weight 0: carries data only when others fail
};
inline constexpr int kNumRailStates = 5;
const char* railStateName(RailState s);

inline constexpr int kMaxRails = 64;
inline constexpr size_t kRailNameLen = 32;

struct RailIdentity {
  char name[kRailNameLen];  // interface or HCA:port name, NUL-terminated
  char transport[8];        // "tcp", "ib"
  int device;               // NCCL device index the rail belongs to
  int railIndex;            // position within that device
  int speedMbps;            // nominal line rate (0 when unknown)
};

struct RailCounters {
  std::atomic<uint64_t> bytesSent{0};
  std::atomic<uint64_t> bytesReceived{0};
  std::atomic<uint64_t> chunksSent{0};
  std::atomic<uint64_t> chunksReceived{0};
  std::atomic<uint64_t> retransmittedChunks{0};  // re-sent here: another rail failed or was late
  std::atomic<uint64_t> retransmittedBytes{0};
  // Given to this rail only to measure it: copies of chunks that travel on another rail, the
  // probes and checks of a rail far slower than its peers (the receiver keeps whichever copy
  // lands first). Counted when placed, on an idle rail, so they leave at once (and count in
  // bytesSent as they do).
  std::atomic<uint64_t> probeCopyBytes{0};
  std::atomic<uint64_t> failovers{0};   // times this rail was declared failed
  std::atomic<uint64_t> recoveries{0};  // times it re-joined after a failure
  std::atomic<uint64_t> stateChanges{0};
  std::atomic<uint64_t> bandwidthBytesPerSec{0};  // latest measured estimate (EWMA)
  std::atomic<uint64_t> sharePermille{0};         // current share of striped bytes, 0..1000
};

struct RailSnapshot {
  int id;
  RailIdentity identity;
  RailState state;
  uint64_t bytesSent, bytesReceived, chunksSent, chunksReceived;
  uint64_t retransmittedChunks, retransmittedBytes, probeCopyBytes, failovers, recoveries,
      stateChanges;
  uint64_t bandwidthBytesPerSec, sharePermille;
  uint64_t timeInStateNs[kNumRailStates];  // including the current state up to `atNs`
  uint64_t atNs;
};

class RailRegistry {
 public:
  static RailRegistry& instance();

  // Returns the id of the rail with this (transport, name), registering it if new; -1 when the
  // table is full. Idempotent, so every communicator can call it.
  int registerRail(const RailIdentity& identity);
  RailCounters* counters(int id);  // NULL for an invalid id
  // Records a state transition (counted, timed). Returns false when the state is unchanged.
  bool setState(int id, RailState state, uint64_t nowNs);
  RailState state(int id) const;

  // Copies up to `max` registered rails; returns how many were written.
  size_t snapshot(RailSnapshot* out, size_t max, uint64_t nowNs) const;
  int count() const { return count_.load(std::memory_order_acquire); }

  // Tests only: forget every rail.
  void resetForTesting();

 private:
  struct Entry {
    RailIdentity identity;
    RailCounters counters;
    std::atomic<uint8_t> state{0};
    std::atomic<uint64_t> stateSinceNs{0};
    std::atomic<uint64_t> timeInStateNs[kNumRailStates] = {};
  };
  Entry entries_[kMaxRails];
  std::atomic<int> count_{0};
};

}  // namespace autopilot::telemetry

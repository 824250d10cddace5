// One communicator's tuner state, split by thread:
//
//  - NCCL's calling thread runs getCollInfo(): allocation-free and lock-free in the common case.
//    It counts calls, applies the agreed decision table, and on the leader records what the
//    learner needs (first cost table of each context, one small record per call).
//  - The tuner service thread (tuner_service.h) runs the coordinator and the learner and talks
//    to the calling thread only through stage()/resolve()/orphan() and the two logs.
//
// Rank consistency. Decisions are a pure function of (decision table, call arguments,
// exploration counters). The table changes only at an agreed call index E: the service thread
// stages a proposal with stage(), which publishes E as the next switch point; the calling thread
// reaching call E applies the staged table if it was committed, drops it if it was aborted, and
// waits (bounded by NCCL_AUTOPILOT_TUNER_SYNC_TIMEOUT_MS) while the verdict is still open. A rank
// that already made E calls refuses the proposal (stage() returns false), which makes the leader
// abort it everywhere. The calls counter and the switch point form a Dekker pair (each side
// stores its own, then loads the other's, both sequentially consistent), so a proposal is
// either refused or certainly seen by the calling thread at E.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "common/abi/nccl_abi.h"
#include "common/ring.h"
#include "tuner_plugin/decision.h"

namespace autopilot::tuner {

class SyntheticMeasurements;

class TunerComm {
 public:
  static constexpr uint64_t kNever = ~uint64_t(0);
  static constexpr size_t kCallLogSize = 1024;  // power of two

  // One recorded call. `ordinal` numbers every call of `func` on this communicator from 0,
  // recorded or not, which is what lines calls up with NCCL's per-function sequence numbers
  // (docs/measurement-matching.md).
  // `arm`: what the call was told to play (decision.h), -1 when NCCL's choice stood.
  struct CallRecord {
    uint64_t ordinal;
    uint64_t nBytes;
    int16_t ctx;
    int8_t func;
    int8_t arm;
  };

  struct SwapStats {
    uint64_t applied = 0;       // tables that took effect here
    uint64_t dropped = 0;       // staged tables aborted or orphaned
    uint64_t waits = 0;         // times the calling thread waited for a verdict at E
    uint64_t timeouts = 0;      // ... and gave up (the comm then freezes)
    uint64_t latencySumNs = 0;  // proposal (leader's clock) to effect here; same host only
    uint64_t latencyMaxNs = 0;
  };

  TunerComm(uint64_t commId, uint64_t minBytes, uint64_t syncTimeoutNs,
            SyntheticMeasurements* synthetic);
  ~TunerComm();
  TunerComm(const TunerComm&) = delete;
  TunerComm& operator=(const TunerComm&) = delete;

  uint64_t commId() const { return commId_; }

  // ---- NCCL's calling thread ----
  void getCollInfo(int collType, size_t nBytes, int numPipeOps, float** table, int numAlgo,
                   int numProto, int* nChannels);
  // Tuner v6+: the chunk size of one scheduled task. NCCL asks after getCollInfo, for each
  // channel part of the task (decision.h, docs/nccl-cost-model.md §8), with the task's `algo`
  // and `proto` but not the size getCollInfo saw; the task is taken to be the last one
  // getCollInfo answered for `collType`. A pure function of the call sequence and the agreed
  // table, so every rank answers alike. Where NCCL grouped several tasks of one collective and
  // cell, all of them take the last one's chunk variant: still the same on every rank, but a
  // sample of the others may then be learned under the wrong variant.
  void getChunkSize(int collType, int algo, int proto, size_t* chunkSize);

  struct ChunkStats {
    uint64_t halved = 0;  // tasks given half NCCL's chunk
    uint64_t kept = 0;    // tasks of a halved-chunk arm whose chunk was already too small
  };
  ChunkStats chunkStats() const {
    return ChunkStats{chunksHalved_.load(std::memory_order_relaxed),
                      chunksKept_.load(std::memory_order_relaxed)};
  }

  // ---- the tuner service thread ----
  // Stages table `version` to take effect at call index `effectiveAt`. kTooLate: this rank
  // already made that many calls; kBusy: the previous committed table has not reached its
  // index yet; kFrozen: no more changes here. *callsNow is this rank's call count then.
  enum class StageResult { kStaged, kTooLate, kBusy, kFrozen };
  StageResult stage(uint32_t version, uint64_t effectiveAt, uint64_t proposedAtNs,
                    const DecisionTable& table, uint64_t* callsNow);
  void resolve(uint32_t version, bool commit);
  // No verdict can arrive any more (the channel is gone): drop a staged proposal and take no
  // more. The table in effect stays: it is the last one every rank agreed on.
  void orphan();
  bool frozen() const;
  uint64_t calls() const { return publishedCalls_.load(std::memory_order_seq_cst); }

  // Leader only: record first cost tables and calls for the learner from now on.
  void setRecording(bool on) { recording_.store(on, std::memory_order_release); }
  size_t drainCalls(CallRecord* out, size_t max);
  // New contexts with the cost table NCCL passed on their first recorded call.
  size_t drainNewContexts(int* ctx, float (*tables)[kNumCells], size_t max);

  SwapStats swapStats() const;
  uint32_t appliedVersion() const;

 private:
  enum class Verdict { kOpen, kCommitted, kAborted };
  struct Staged {
    bool present = false;
    uint32_t version = 0;
    uint64_t at = 0;
    uint64_t proposedAtNs = 0;
    Verdict verdict = Verdict::kOpen;
    DecisionTable table;
  };

  void atSwitchPoint(uint64_t n);
  void notePrior(int ctx, float** table);

  const uint64_t commId_;
  const uint64_t minBytes_;
  const uint64_t syncTimeoutNs_;
  SyntheticMeasurements* const synthetic_;

  // Calling thread only.
  uint64_t callCount_ = 0;
  int active_ = 0;
  DecisionTable tables_[2];
  ExplorationCounters counters_;
  uint8_t seen_[kNumContexts] = {};
  uint64_t funcCalls_[abi::kNumTunedFuncs] = {};  // calls per function, the next ordinal
  // Per function, the cell whose chunk the last getCollInfo answer halved (-1: none).
  int8_t chunkCell_[abi::kNumTunedFuncs];
  std::atomic<uint64_t> chunksHalved_{0};
  std::atomic<uint64_t> chunksKept_{0};

  // Shared: the Dekker pair, and the logs (the calling thread pushes, the service thread pops).
  std::atomic<uint64_t> publishedCalls_{0};
  std::atomic<uint64_t> switchAt_{kNever};
  std::atomic<bool> recording_{false};
  Ring<CallRecord, RingProducers::kSingle> callLog_{kCallLogSize};
  // A context's prior table is written once, before its index is pushed (the push releases it).
  float priorTables_[kNumContexts][kNumCells];
  Ring<int, RingProducers::kSingle> newContexts_{kNumContexts};

  // Guarded by mu_ (the staged proposal and the verdict; never touched in the common case).
  mutable std::mutex mu_;
  std::condition_variable verdictCv_;
  Staged staged_;
  bool frozen_ = false;
  uint32_t appliedVersion_ = 0;
  SwapStats stats_;
};

}  // namespace autopilot::tuner

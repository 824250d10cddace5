#include "tuner_plugin/tuner_comm.h"

#include <chrono>
#include <cstring>

#include "common/abi/tuner_abi.h"
#include "common/clock.h"
#include "common/log.h"
#include "tuner_plugin/nccl_choice.h"
#include "tuner_plugin/synthetic_measurements.h"

namespace autopilot::tuner {
namespace {

constexpr unsigned long kFlags = abi::subsys::kTuning;

// Makes `cell` NCCL's choice: 0 is below every modelled time, and NCCL keeps the first strict
// minimum, so an earlier cell that is itself 0 (only seen with one rank) is raised a hair. Only
// cells >= 0 are written, so no IGNORE cell is ever re-enabled.
inline void force(float* cells, int cell) {
  cells[cell] = 0.0f;
  for (int c = 0; c < cell; ++c) {
    if (cells[c] == 0.0f) cells[c] = 1e-6f;
  }
}

}  // namespace

TunerComm::TunerComm(uint64_t commId, uint64_t minBytes, uint64_t syncTimeoutNs,
                     SyntheticMeasurements* synthetic)
    : commId_(commId), minBytes_(minBytes), syncTimeoutNs_(syncTimeoutNs), synthetic_(synthetic) {
  counters_.reset();
  std::memset(chunkCell_, -1, sizeof(chunkCell_));
}

TunerComm::~TunerComm() = default;

void TunerComm::getCollInfo(int collType, size_t nBytes, int numPipeOps, float** table, int numAlgo,
                            int numProto, int* nChannels) {
  const uint64_t n = ++callCount_;
  publishedCalls_.store(n, std::memory_order_seq_cst);
  if (n >= switchAt_.load(std::memory_order_seq_cst)) atSwitchPoint(n);

  // Every call of a tuned function takes the next ordinal, whether or not it is recorded, so
  // that the learner can tell an unrecorded call from a missing one.
  if (collType < 0 || collType >= abi::kNumTunedFuncs) return;
  const uint64_t ordinal = funcCalls_[collType]++;
  chunkCell_[collType] = -1;  // NCCL's chunk unless this call plays a halved-chunk arm

  if (numAlgo != abi::kNumAlgorithms || numProto != abi::kNumProtocols) return;
  const int ctx = contextIndex(collType, nBytes, numPipeOps);
  if (ctx < 0 || nBytes < minBytes_) return;
  const bool recording = recording_.load(std::memory_order_relaxed);
  if (recording && !seen_[ctx]) notePrior(ctx, table);

  float* cells = reinterpret_cast<float*>(table);
  float original[kNumCells];
  if (synthetic_ != nullptr) std::memcpy(original, cells, sizeof(original));
  const ContextDecision& d = tables_[active_].entries[ctx];
  int played = -1, channels = 0;
  if (!d.untouched()) {
    const int arm = armForCall(d, ctx, &counters_, Question{n, nBytes});
    const int cell = arm >= 0 ? armCell(arm) : -1;
    if (cell >= 0 && cells[cell] >= 0) {  // an IGNORE cell stays NCCL's to rule out
      force(cells, cell);
      played = arm;
      // Only ever a lower count than NCCL's (decision.h); never for CollNet, which takes the
      // value unclamped.
      channels = channelsForArm(d, arm);
      if (channels > 0 && nChannels != nullptr && cellTakesChannelCount(cell)) {
        *nChannels = channels;
      } else if (armHalvesChunk(arm) && cellTakesChunkSize(cell)) {
        channels = 0;
        chunkCell_[collType] = int8_t(cell);
      } else {
        channels = 0;
        played = cell;
      }
    }
  }
  if (recording) {
    callLog_.push(CallRecord{ordinal, nBytes, int16_t(ctx), int8_t(collType),
                             int8_t(played)});  // full: dropped
  }
  if (synthetic_ != nullptr) {
    synthetic_->publish(commId_, collType, ordinal, nBytes, original, ncclChoice(cells), channels,
                        chunkCell_[collType] >= 0);
  }
}

void TunerComm::getChunkSize(int collType, int algo, int proto, size_t* chunkSize) {
  if (collType < 0 || collType >= abi::kNumTunedFuncs || algo < 0 || algo >= abi::kNumAlgorithms ||
      proto < 0 || proto >= abi::kNumProtocols) {
    return;
  }
  const int cell = chunkCell_[collType];
  // NCCL ran another cell than the table asked for (its own rules overrode it): its chunk.
  if (cell < 0 || cell != algo * abi::kNumProtocols + proto) return;
  const size_t half = halvedChunk(*chunkSize);
  if (half != *chunkSize) {
    *chunkSize = half;
    chunksHalved_.fetch_add(1, std::memory_order_relaxed);
  } else {
    chunksKept_.fetch_add(1, std::memory_order_relaxed);
  }
}

void TunerComm::notePrior(int ctx, float** table) {
  seen_[ctx] = 1;
  // Each context is announced once, so this log (at least one slot per context) never fills.
  std::memcpy(priorTables_[ctx], table, sizeof(priorTables_[ctx]));
  newContexts_.push(ctx);
}

void TunerComm::atSwitchPoint(uint64_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  // Only the proposal staged for exactly this call may take effect here. While we wait for its
  // verdict it can be aborted and the next one staged (and even committed) for a later index:
  // that one must wait for its own index.
  const uint32_t version = staged_.version;
  auto ours = [&] { return staged_.present && staged_.version == version && staged_.at == n; };
  if (ours() && staged_.verdict == Verdict::kOpen) {
    ++stats_.waits;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::nanoseconds(syncTimeoutNs_);
    while (ours() && staged_.verdict == Verdict::kOpen) {
      if (verdictCv_.wait_until(lock, deadline) == std::cv_status::timeout && ours() &&
          staged_.verdict == Verdict::kOpen) {
        // Every other rank that acknowledged is waiting on the same verdict; the leader gives
        // up on its own side earlier (ack timeout < sync timeout) and keeps the old table too.
        ++stats_.timeouts;
        frozen_ = true;
        staged_.verdict = Verdict::kAborted;
        AP_WARN(kFlags,
                "tuner: comm 0x%llx: no verdict for policy v%u within %llu ms at call %llu; "
                "keeping the current table and freezing (no further changes)",
                static_cast<unsigned long long>(commId_), staged_.version,
                static_cast<unsigned long long>(syncTimeoutNs_ / 1000000),
                static_cast<unsigned long long>(n));
      }
    }
  }
  if (!ours()) {
    // Dropped (or replaced) before or while we waited: keep the table, re-arm for what is
    // staged now.
    switchAt_.store(staged_.present && staged_.at > n ? staged_.at : kNever,
                    std::memory_order_seq_cst);
    return;
  }
  if (staged_.verdict == Verdict::kCommitted) {
    const int next = 1 - active_;
    tables_[next] = staged_.table;
    for (int ctx = 0; ctx < kNumContexts; ++ctx) {
      if (tables_[next].entries[ctx] != tables_[active_].entries[ctx]) {
        counters_.calls[ctx] = 0;
        counters_.explored[ctx] = 0;
      }
    }
    active_ = next;
    appliedVersion_ = staged_.version;
    ++stats_.applied;
    uint64_t now = monotonicNs();
    if (now > staged_.proposedAtNs) {
      uint64_t latency = now - staged_.proposedAtNs;
      stats_.latencySumNs += latency;
      if (latency > stats_.latencyMaxNs) stats_.latencyMaxNs = latency;
    }
  } else {
    ++stats_.dropped;
  }
  staged_.present = false;
  switchAt_.store(kNever, std::memory_order_seq_cst);
}

TunerComm::StageResult TunerComm::stage(uint32_t version, uint64_t effectiveAt,
                                        uint64_t proposedAtNs, const DecisionTable& table,
                                        uint64_t* callsNow) {
  std::lock_guard<std::mutex> lock(mu_);
  *callsNow = publishedCalls_.load(std::memory_order_seq_cst);
  if (frozen_) return StageResult::kFrozen;
  if (staged_.present) return StageResult::kBusy;
  staged_.present = true;
  staged_.version = version;
  staged_.at = effectiveAt;
  staged_.proposedAtNs = proposedAtNs;
  staged_.verdict = Verdict::kOpen;
  staged_.table = table;
  switchAt_.store(effectiveAt, std::memory_order_seq_cst);
  // Dekker: our store of the switch point precedes this load; the calling thread's store of
  // its count precedes its load of the switch point. If it already made effectiveAt calls we
  // see it here and refuse; otherwise it will see the switch point at call effectiveAt.
  *callsNow = publishedCalls_.load(std::memory_order_seq_cst);
  if (*callsNow >= effectiveAt) {
    staged_.present = false;
    switchAt_.store(kNever, std::memory_order_seq_cst);
    return StageResult::kTooLate;
  }
  return StageResult::kStaged;
}

void TunerComm::resolve(uint32_t version, bool commit) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!staged_.present || staged_.version != version || staged_.verdict != Verdict::kOpen) return;
  if (commit) {
    staged_.verdict = Verdict::kCommitted;  // applied by the calling thread at its index
  } else {
    // Dropped now, so that the next proposal can be staged at once; a calling thread that is
    // at the switch point finds nothing staged and keeps its table.
    staged_.present = false;
    ++stats_.dropped;
    switchAt_.store(kNever, std::memory_order_seq_cst);
  }
  verdictCv_.notify_all();
}

void TunerComm::orphan() {
  std::lock_guard<std::mutex> lock(mu_);
  frozen_ = true;
  if (staged_.present && staged_.verdict == Verdict::kOpen) {
    staged_.present = false;
    ++stats_.dropped;
    switchAt_.store(kNever, std::memory_order_seq_cst);
    verdictCv_.notify_all();
  }
}

bool TunerComm::frozen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return frozen_;
}

size_t TunerComm::drainCalls(CallRecord* out, size_t max) { return callLog_.popMany(out, max); }

size_t TunerComm::drainNewContexts(int* ctx, float (*tables)[kNumCells], size_t max) {
  size_t n = 0;
  while (n < max && newContexts_.pop(&ctx[n])) {
    std::memcpy(tables[n], priorTables_[ctx[n]], sizeof(priorTables_[ctx[n]]));
    ++n;
  }
  return n;
}

TunerComm::SwapStats TunerComm::swapStats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

uint32_t TunerComm::appliedVersion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return appliedVersion_;
}

}  // namespace autopilot::tuner

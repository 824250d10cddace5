// Contexts and decisions: the vocabulary shared by the policy (which computes decisions), the
// consensus layer (which agrees on them across ranks) and the hot path (which applies them).
//
// A context is (collective, size bucket, numPipeOps bucket): every input of it is identical on
// all ranks of a communicator (docs/nccl-plugin-abi.md §2.7), so every rank maps a call to the same
// context. nRanks and nNodes are per communicator and so implicit. regBuff is deliberately not
// part of it: it can differ per rank.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/abi/nccl_abi.h"

namespace autopilot::tuner {

inline constexpr int kNumCells = abi::kNumAlgorithms * abi::kNumProtocols;  // 21
inline constexpr int kSizeBuckets = 48;  // floor(log2(nBytes)), 1 B .. 128 TiB and above
inline constexpr int kPipeBuckets = 4;   // numPipeOps 1, 2, 3-4, >= 5
inline constexpr int kNumContexts = abi::kNumTunedFuncs * kSizeBuckets * kPipeBuckets;

inline int sizeBucket(uint64_t nBytes) {
  int b = 63 - __builtin_clzll(nBytes | 1);
  return b < kSizeBuckets ? b : kSizeBuckets - 1;
}

inline int pipeBucket(int numPipeOps) {
  return numPipeOps <= 1 ? 0 : numPipeOps == 2 ? 1 : numPipeOps <= 4 ? 2 : 3;
}

// Dense context index, or -1 for calls the tuner never learns on (unknown collectives, 0 bytes).
inline int contextIndex(int func, uint64_t nBytes, int numPipeOps) {
  if (func < 0 || func >= abi::kNumTunedFuncs || nBytes == 0) return -1;
  return (func * kSizeBuckets + sizeBucket(nBytes)) * kPipeBuckets + pipeBucket(numPipeOps);
}

// Arms: what the policy learns over, a cell in one of three variants:
//  - arm `cell`: the cell as NCCL would run it;
//  - arm kNumCells + cell: with half the channels NCCL used for that cell in the context (the
//    count travels in the decision, so it is agreed like the cell). Half, because NCCL's own
//    count shrinks about linearly with the size below saturation (one channel fewer per step of
//    its threshold loop, docs/nccl-plugin-abi.md §2.6): over a size bucket (a factor of two) it
//    varies by at most a factor of two, so half of any count seen in the bucket never raises
//    what NCCL would run at another size of it. A tuner may only lower the count (its value
//    replaces NCCL's upper bound); CollNet cells use the value unclamped and are never given one.
//  - arm 2 * kNumCells + cell: at half the chunk size NCCL computes for each of its tasks
//    (tuner v6+ getChunkSize, docs/nccl-plugin-abi.md §2.2). Half of NCCL's own value, which is
//    the same on every rank, so only the variant travels; never below kMinChunkBytes, and only
//    for ring and tree with LL128 or Simple, where NCCL's chunk is its buffer's ceiling or a
//    power-of-two step below it (docs/nccl-cost-model.md §8).
// Arms below 2 * kNumCells keep the meaning they had before chunk arms existed, so tuning
// files and decision tables of either age mean the same.
inline constexpr int kArmVariants = 3;
inline constexpr int kNumArms = kNumCells * kArmVariants;  // 63
inline int armCell(int arm) { return arm % kNumCells; }
inline int armVariant(int arm) { return arm / kNumCells; }
inline bool armHalvesChannels(int arm) { return armVariant(arm) == 1; }
inline bool armHalvesChunk(int arm) { return armVariant(arm) == 2; }
inline constexpr int halvedChannelArm(int cell) { return kNumCells + cell; }
inline constexpr int halvedChunkArm(int cell) { return 2 * kNumCells + cell; }
inline bool cellTakesChannelCount(int cell) {
  const int algo = cell / abi::kNumProtocols;
  return algo != abi::kAlgoCollNetDirect && algo != abi::kAlgoCollNetChain;
}
inline bool cellTakesChunkSize(int cell) {
  const int algo = cell / abi::kNumProtocols, proto = cell % abi::kNumProtocols;
  return (algo == abi::kAlgoTree || algo == abi::kAlgoRing) &&
         (proto == abi::kProtoLL128 || proto == abi::kProtoSimple);
}
// The smallest chunk a halved-chunk arm asks for: NCCL rounds the value down to its protocol's
// grain (at most 1,920 bytes, LL128), and a step much smaller than this spends more on per-step
// overhead than any pipelining gains.
inline constexpr size_t kMinChunkBytes = 64u << 10;
// What a halved-chunk arm makes of NCCL's chunk size: half of it, or NCCL's own where half
// would be below kMinChunkBytes.
inline size_t halvedChunk(size_t ncclChunk) {
  return ncclChunk / 2 >= kMinChunkBytes ? ncclChunk / 2 : ncclChunk;
}

inline int contextFunc(int ctx) { return ctx / (kSizeBuckets * kPipeBuckets); }
inline int contextSizeBucket(int ctx) { return ctx / kPipeBuckets % kSizeBuckets; }
inline int contextPipeBucket(int ctx) { return ctx % kPipeBuckets; }

// What every rank does for one context, until the next agreed change. Plain bytes so that the
// table travels over the wire as is.
//  - primary < 0: leave NCCL's choice (the table untouched); else play that arm (its cell, and
//    for a halved arm primaryChannels as the channel count; 0 for an arm at NCCL's count).
//  - explore >= 0: on every `period`-th call of the context (counted from the moment this
//    entry took effect), up to `budget` times, force `explore` instead. Counting from an agreed
//    call index keeps exploration identical on all ranks. exploreChannels as primaryChannels.
//  - generation: bumped by the policy to grant a fresh budget for the same probe; an entry that
//    differs in any field restarts its counters when it takes effect.
struct ContextDecision {
  int8_t primary = -1;
  int8_t explore = -1;
  uint8_t period = 0;
  uint8_t budget = 0;
  uint16_t generation = 0;
  uint8_t primaryChannels = 0;
  uint8_t exploreChannels = 0;

  bool untouched() const { return primary < 0 && explore < 0; }
  bool operator==(const ContextDecision& o) const {
    return primary == o.primary && explore == o.explore && period == o.period &&
           budget == o.budget && generation == o.generation &&
           primaryChannels == o.primaryChannels && exploreChannels == o.exploreChannels;
  }
  bool operator!=(const ContextDecision& o) const { return !(*this == o); }
};
static_assert(sizeof(ContextDecision) == 8, "decisions travel over the wire as 8 bytes");

struct DecisionTable {
  ContextDecision entries[kNumContexts];
  bool operator==(const DecisionTable& o) const {
    return std::memcmp(entries, o.entries, sizeof(entries)) == 0;
  }
};

// Per-rank counters that make exploration turns deterministic; reset when a table takes effect.
struct ExplorationCounters {
  uint32_t calls[kNumContexts];
  uint8_t explored[kNumContexts];
  // The last probe turn: its question's number on the communicator (0: none), context, bytes.
  uint64_t probeQuestion;
  uint64_t probeBytes;
  int32_t probeCtx;
  void reset() {
    std::memset(calls, 0, sizeof(calls));
    std::memset(explored, 0, sizeof(explored));
    probeQuestion = 0;
    probeBytes = 0;
    probeCtx = -1;
  }
};

// One getCollInfo question as the hot path numbers it: its number among the communicator's
// questions (from 1; 0 = unnumbered, never taken for a repeat) and its byte count.
struct Question {
  uint64_t number = 0;
  uint64_t nBytes = 0;
};

// The arm to play for this call of `ctx` under `d` (or -1 for NCCL's choice), advancing the
// counters. Pure arithmetic on agreed state: the same on every rank.
//
// A question that repeats the one just before it (same context and bytes, the very next
// question) when that one was a probe turn plays the same probe, without a turn of its own.
// NCCL 2.30+ asks twice about one task when its symmetric-kernel scheduler checks whether to
// fall back (docs/measurement-matching.md): only the second answer runs, and turns counted per
// question would otherwise fall on the first in step with the pairs and never be measured.
// Two genuine back-to-back tasks of one size then both play the probe, and both are measured.
inline int armForCall(const ContextDecision& d, int ctx, ExplorationCounters* c,
                      const Question& q = Question()) {
  const bool repeatOfProbe = q.number != 0 && c->probeQuestion != 0 &&
                             q.number == c->probeQuestion + 1 && c->probeCtx == ctx &&
                             c->probeBytes == q.nBytes;
  uint32_t n = c->calls[ctx]++;
  if (repeatOfProbe) {
    c->probeQuestion = 0;  // one repeat per turn
    return d.explore;
  }
  if (d.explore >= 0 && d.period > 0 && c->explored[ctx] < d.budget &&
      n % d.period == uint32_t(d.period - 1)) {
    ++c->explored[ctx];
    c->probeQuestion = q.number;
    c->probeBytes = q.nBytes;
    c->probeCtx = ctx;
    return d.explore;
  }
  return d.primary;
}

// The channel count to set for `arm` (armForCall's answer under `d`): 0 keeps NCCL's.
inline int channelsForArm(const ContextDecision& d, int arm) {
  if (arm < 0 || !armHalvesChannels(arm)) return 0;
  return arm == d.explore ? d.exploreChannels : arm == d.primary ? d.primaryChannels : 0;
}

}  // namespace autopilot::tuner

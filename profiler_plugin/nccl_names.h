// NCCL's name strings (descriptor `func`, `datatype`, `algo`, `proto`) mapped to the indices the
// tuner and the measurement bus use, and the size rules of NCCL's tuner call
// (docs/nccl-plugin-abi.md §2.4). Parsing happens once per collective at Coll start,
// so the functions are short switch-based comparisons, never allocations.
#pragma once

#include <cstdint>

#include "common/abi/nccl_abi.h"

namespace autopilot::profiler {

// abi::Func index of "AllReduce", "Broadcast", ... or -1 when unknown.
int parseFunc(const char* name) noexcept;
// abi::Algo index of "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE",
// "PAT" (the Coll descriptor's spelling) or of "Tree", "Ring", "CollNetDirect", ... (the tuner
// table's); case and underscores do not matter. -1 when unknown.
int parseAlgo(const char* name) noexcept;
// abi::Proto index of "LL", "LL128", "SIMPLE" (or "Simple"); -1 when unknown.
int parseProto(const char* name) noexcept;

// NCCL datatypes ("ncclInt8" ... "ncclFloat8e5m2"), indexed like ncclDataType_t.
inline constexpr int kNumDatatypes = 12;
int parseDatatype(const char* name) noexcept;  // -1 when unknown
int datatypeSize(int datatype) noexcept;       // bytes per element; 0 when unknown

const char* funcName(int func) noexcept;          // "AllReduce"; "Unknown" out of range
const char* algoName(int algo) noexcept;          // "Ring"; "Unknown"
const char* protoName(int proto) noexcept;        // "Simple"; "Unknown"
const char* datatypeName(int datatype) noexcept;  // "ncclFloat32"; "unknown"

// The nBytes NCCL passes to the tuner's getCollInfo for a collective with this descriptor:
// element size × count, times nRanks for AllGather and ReduceScatter. AllGather and Broadcast
// counts already arrive in bytes (datatype int8), so no special case is needed for them.
uint64_t tunerBytes(int func, int datatype, uint64_t count, int nRanks) noexcept;

// nccl-tests' bus-bandwidth factor: busbw = algbw × factor (AllReduce 2(n-1)/n; AllGather,
// ReduceScatter (n-1)/n; others 1).
double busBandwidthFactor(int func, int nRanks) noexcept;

// Power-of-two size bucket: floor(log2(nBytes)), 0 for nBytes <= 1.
inline int sizeBucket(uint64_t nBytes) noexcept {
  return nBytes <= 1 ? 0 : 63 - __builtin_clzll(nBytes);
}

}  // namespace autopilot::profiler

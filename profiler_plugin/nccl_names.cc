#include "profiler_plugin/nccl_names.h"

#include <cstring>

namespace autopilot::profiler {
namespace {

// ncclFunc_t order; the last four exist from NCCL 2.29 on.
constexpr const char* kFuncNames[abi::kNumFuncs229] = {
    "Broadcast", "Reduce",     "AllGather", "ReduceScatter", "AllReduce",
    "SendRecv",  "Send",       "Recv",      "AllToAll",      "Scatter",
    "Gather",    "AllGatherV", "PutSignal", "Signal",        "WaitSignal"};
constexpr const char* kAlgoNames[abi::kNumAlgorithms] = {
    "Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
constexpr const char* kProtoNames[abi::kNumProtocols] = {"LL", "LL128", "Simple"};
// ncclDataType_t order: Int8, Uint8, Int32, Uint32, Int64, Uint64, Float16, Float32, Float64,
// Bfloat16, Float8e4m3, Float8e5m2.
constexpr const char* kDatatypeNames[kNumDatatypes] = {
    "ncclInt8",    "ncclUint8",    "ncclInt32",      "ncclUint32",
    "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
    "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
constexpr int kDatatypeSizes[kNumDatatypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

constexpr char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }

// Algorithm and protocol names come in two spellings (docs/nccl-plugin-abi.md, "Name strings"):
// the profiler's Coll descriptor carries NCCL's upper-case names with underscores ("RING",
// "NVLS_TREE", "SIMPLE"), its logs and cost tables the mixed-case ones ("Ring", "NVLSTree",
// "Simple"). Both are accepted: letters compare without case, underscores are skipped.
bool sameName(const char* table, const char* name) noexcept {
  for (;;) {
    while (*name == '_') ++name;
    const char a = *table, b = *name;
    if (a == '\0' || b == '\0') return a == b;
    if (lower(a) != lower(b)) return false;
    ++table;
    ++name;
  }
}

// Every Coll start parses an algorithm and a protocol: the first letters (no table name starts
// with an underscore) reject all but one or two candidates before the full comparison.
template <size_t N>
int lookupAnyCase(const char* name, const char* const (&names)[N]) noexcept {
  if (name == nullptr) return -1;
  const char* letters = name;
  while (*letters == '_') ++letters;
  const char first = lower(*letters);
  for (size_t i = 0; i < N; ++i) {
    if (lower(names[i][0]) == first && sameName(names[i], name)) return int(i);
  }
  return -1;
}

template <size_t N>
int lookup(const char* name, const char* const (&names)[N]) noexcept {
  if (name == nullptr) return -1;
  for (size_t i = 0; i < N; ++i) {
    // First characters differ for most pairs, so this rejects quickly.
    if (names[i][0] == name[0] && std::strcmp(names[i], name) == 0) return int(i);
  }
  return -1;
}

}  // namespace

int parseFunc(const char* name) noexcept { return lookup(name, kFuncNames); }
int parseAlgo(const char* name) noexcept { return lookupAnyCase(name, kAlgoNames); }
int parseProto(const char* name) noexcept { return lookupAnyCase(name, kProtoNames); }

int parseDatatype(const char* name) noexcept {
  // Every name starts with "nccl": compare what follows, first character first.
  if (name == nullptr || std::strncmp(name, "nccl", 4) != 0) return -1;
  const char* rest = name + 4;
  for (int i = 0; i < kNumDatatypes; ++i) {
    const char* candidate = kDatatypeNames[i] + 4;
    if (candidate[0] == rest[0] && std::strcmp(candidate, rest) == 0) return i;
  }
  return -1;
}

int datatypeSize(int datatype) noexcept {
  return datatype >= 0 && datatype < kNumDatatypes ? kDatatypeSizes[datatype] : 0;
}

const char* funcName(int func) noexcept {
  return func >= 0 && func < abi::kNumFuncs229 ? kFuncNames[func] : "Unknown";
}
const char* algoName(int algo) noexcept {
  return algo >= 0 && algo < abi::kNumAlgorithms ? kAlgoNames[algo] : "Unknown";
}
const char* protoName(int proto) noexcept {
  return proto >= 0 && proto < abi::kNumProtocols ? kProtoNames[proto] : "Unknown";
}
const char* datatypeName(int datatype) noexcept {
  return datatype >= 0 && datatype < kNumDatatypes ? kDatatypeNames[datatype] : "unknown";
}

uint64_t tunerBytes(int func, int datatype, uint64_t count, int nRanks) noexcept {
  uint64_t bytes = count * uint64_t(datatypeSize(datatype));
  if ((func == abi::kFuncAllGather || func == abi::kFuncReduceScatter) && nRanks > 0) {
    bytes *= uint64_t(nRanks);
  }
  return bytes;
}

double busBandwidthFactor(int func, int nRanks) noexcept {
  if (nRanks <= 0) return 1.0;
  double n = nRanks;
  switch (func) {
    case abi::kFuncAllReduce:
      return 2.0 * (n - 1) / n;
    case abi::kFuncAllGather:
    case abi::kFuncReduceScatter:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

}  // namespace autopilot::profiler

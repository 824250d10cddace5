// Our own declarations of the parts of NCCL's plugin ABI that all three plugin kinds share.
// Facts in docs/nccl-plugin-abi.md (§2.1, §5); layouts are checked by
// test/unit/test_abi_layout.cc and the enum values against the installed nccl.h by
// test/unit/test_abi_nccl_h.cc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace autopilot::abi {

// ncclResult_t. Every exported entry point returns one of these as a plain int-sized enum.
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
  kNumResults = 8,
};

// ncclDebugLogLevel.
enum LogLevel : int {
  kLogNone = 0,
  kLogVersion = 1,
  kLogWarn = 2,
  kLogInfo = 3,
  kLogAbort = 4,
  kLogTrace = 5,
};

// ncclDebugLogSubSys bit flags.
namespace subsys {
inline constexpr unsigned long kInit = 0x1;
inline constexpr unsigned long kColl = 0x2;
inline constexpr unsigned long kP2p = 0x4;
inline constexpr unsigned long kShm = 0x8;
inline constexpr unsigned long kNet = 0x10;
inline constexpr unsigned long kGraph = 0x20;
inline constexpr unsigned long kTuning = 0x40;
inline constexpr unsigned long kEnv = 0x80;
inline constexpr unsigned long kAlloc = 0x100;
inline constexpr unsigned long kCall = 0x200;
inline constexpr unsigned long kProxy = 0x400;
inline constexpr unsigned long kNvls = 0x800;
inline constexpr unsigned long kBootstrap = 0x1000;
inline constexpr unsigned long kReg = 0x2000;
inline constexpr unsigned long kProfile = 0x4000;
inline constexpr unsigned long kRas = 0x8000;
inline constexpr unsigned long kDestroy = 0x10000;  // NCCL 2.30+
inline constexpr unsigned long kAll = ~0ul;
}  // namespace subsys

// ncclDebugLogger_t: printf-style; the third argument carries the caller's function name.
using Logger = void (*)(LogLevel level, unsigned long flags, const char* filefunc, int line,
                        const char* fmt, ...);

// ncclFunc_t. Values >= kNumFuncsV5 appear from NCCL 2.29 on; callers must bounds-check.
enum Func : int {
  kFuncBroadcast = 0,
  kFuncReduce = 1,
  kFuncAllGather = 2,
  kFuncReduceScatter = 3,
  kFuncAllReduce = 4,
  kFuncSendRecv = 5,
  kFuncSend = 6,
  kFuncRecv = 7,
  kFuncAllToAll = 8,
  kFuncScatter = 9,
  kFuncGather = 10,
  kNumFuncsV5 = 11,
  // NCCL 2.29+.
  kFuncAllGatherV = 11,
  kFuncPutSignal = 12,
  kFuncSignal = 13,
  kFuncWaitSignal = 14,
  kNumFuncs229 = 15,
};
// Only these collectives reach the tuner (NCCL_NUM_FUNCTIONS).
inline constexpr int kNumTunedFuncs = 5;

// NCCL_ALGO_* / NCCL_PROTO_* indices of the cost table.
enum Algo : int {
  kAlgoUndef = -1,
  kAlgoTree = 0,
  kAlgoRing = 1,
  kAlgoCollNetDirect = 2,
  kAlgoCollNetChain = 3,
  kAlgoNvls = 4,
  kAlgoNvlsTree = 5,
  kAlgoPat = 6,
};
inline constexpr int kNumAlgorithms = 7;

enum Proto : int {
  kProtoUndef = -1,
  kProtoLL = 0,
  kProtoLL128 = 1,
  kProtoSimple = 2,
};
inline constexpr int kNumProtocols = 3;

// NCCL_ALGO_PROTO_IGNORE: a cost-table cell NCCL ruled out. Never raise such a cell.
inline constexpr float kAlgoProtoIgnore = -1.0f;

// NCCL_HW_*, compute-capability and scale indices of the v5 tuner constants.
inline constexpr int kNumHwLinks = 3;       // NVLINK, PCI, NET
inline constexpr int kNumCompCaps = 4;      // VOLTA, AMPERE, HOPPER, BLACKWELL
inline constexpr int kNumCompCapsV7 = 5;    // tuner v7 (NCCL 2.32.6+) adds a fifth row
inline constexpr int kNumTuningScales = 3;  // 1 node, 2 nodes, 4 nodes

}  // namespace autopilot::abi

// Defines an exported plugin table: C linkage (no mangling) and default visibility, so dlsym
// finds it although everything else is built with -fvisibility=hidden. The objects are
// non-const: a namespace-scope const object would have internal linkage and silently vanish.
// Use as: AP_EXPORT_TABLE(abi::NetV11, ncclNetPlugin_v11) = {...};
#define AP_EXPORT_TABLE(Type, symbol)                            \
  extern "C" __attribute__((visibility("default"))) Type symbol; \
  Type symbol

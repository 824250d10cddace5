// Profiler plugin ABI, versions 4 and 5 (NCCL 2.25 .. 2.28+), plus the net-plugin event
// callback. Our declarations, from ../shared/docs/nccl-plugin-abi.md §3.
#pragma once

#include <sys/types.h>

#include "common/abi/nccl_abi.h"

namespace autopilot::abi {

// Event type bits (descriptor `type` and the activation mask).
namespace event {
inline constexpr uint64_t kGroup = 1u << 0;
inline constexpr uint64_t kColl = 1u << 1;
inline constexpr uint64_t kP2p = 1u << 2;
inline constexpr uint64_t kProxyOp = 1u << 3;
inline constexpr uint64_t kProxyStep = 1u << 4;
inline constexpr uint64_t kProxyCtrl = 1u << 5;
inline constexpr uint64_t kKernelCh = 1u << 6;
inline constexpr uint64_t kNetPlugin = 1u << 7;
inline constexpr uint64_t kGroupApi = 1u << 8;
inline constexpr uint64_t kCollApi = 1u << 9;
inline constexpr uint64_t kP2pApi = 1u << 10;
inline constexpr uint64_t kKernelLaunch = 1u << 11;
inline constexpr uint64_t kAllV5 = 4095;
}  // namespace event

// ncclProfilerEventState_v5_t values.
namespace state {
inline constexpr int kProxyOpSendPosted = 0;  // 0..7 deprecated since v4
inline constexpr int kProxyStepSendGPUWait = 8;
inline constexpr int kProxyStepSendWait = 9;
inline constexpr int kProxyStepRecvWait = 10;
inline constexpr int kProxyStepRecvFlushWait = 11;
inline constexpr int kProxyStepRecvGPUWait = 12;
inline constexpr int kProxyCtrlIdle = 13;
inline constexpr int kProxyCtrlActive = 14;
inline constexpr int kProxyCtrlSleep = 15;
inline constexpr int kProxyCtrlWakeup = 16;
inline constexpr int kProxyCtrlAppend = 17;
inline constexpr int kProxyCtrlAppendEnd = 18;
inline constexpr int kProxyOpInProgress = 19;
inline constexpr int kProxyStepSendPeerWait = 20;
inline constexpr int kNetPluginUpdate = 21;
inline constexpr int kKernelChStop = 22;
inline constexpr int kGroupStartApiStop = 23;
inline constexpr int kGroupEndApiStart = 24;
}  // namespace state

struct ProfilerEventDescrV5 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

struct ProfilerEventDescrV4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

// The v4 and v5 state-argument unions are identical.
union ProfilerEventStateArgsV5 {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
};
using ProfilerEventStateArgsV4 = ProfilerEventStateArgsV5;

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                 int nNodes, int nranks, int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, ProfilerEventDescrV5* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, ProfilerEventStateArgsV5* eStateArgs);
  Result (*finalize)(void* context);
};

struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash,
                 int nNodes, int nranks, int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, ProfilerEventDescrV4* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, ProfilerEventStateArgsV4* eStateArgs);
  Result (*finalize)(void* context);
};

// ncclProfilerCallback_t, handed to net plugins (v10+) so they can emit NetPlugin events.
using ProfilerCallback = Result (*)(void** eHandle, int type, void* pHandle, int64_t pluginId,
                                    void* extData);
namespace net_event {
inline constexpr int kStart = 0;
inline constexpr int kStop = 1;
inline constexpr int kUpdate = 2;
inline constexpr int kUpdateAndStop = 3;
inline constexpr int64_t kVersionMask = 0xFFFF;
inline constexpr int64_t kTypeMask = 0xFFFF0000;
inline constexpr int64_t kTypeIb = 0x10000;
inline constexpr int64_t kTypeSocket = 0x20000;
}  // namespace net_event

// Payloads NCCL's own net plugins attach to NetPlugin events (version 1).
struct ProfilerNetIbDescrV1 {
  uint8_t type;  // 1 = QP
  union {
    struct {
      int device;
      uint64_t wr_id;
      int opcode;
      int qpNum;
      size_t length;
    } qp;
  };
};
struct ProfilerNetSockDescrV1 {
  uint8_t type;  // 1 = socket
  union {
    struct {
      int fd;
      int op;
      size_t length;
    } sock;
  };
};

}  // namespace autopilot::abi

// Profiler plugin ABI, versions 4 to 7 (NCCL 2.27 .. 2.32+), plus the net-plugin event
// callback. Our declarations; the facts are in docs/nccl-plugin-abi.md §3.
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
// v6 (NCCL 2.29.2+): copy-engine collectives and their children.
inline constexpr uint64_t kCeColl = 1u << 12;
inline constexpr uint64_t kCeSync = 1u << 13;
inline constexpr uint64_t kCeBatch = 1u << 14;
// v7 (NCCL 2.31.2+): phases of a kernel channel (asking for it turns KernelCh on as well).
inline constexpr uint64_t kKernelPhase = 1u << 15;
inline constexpr uint64_t kAllV6 = (1u << 15) - 1;
inline constexpr uint64_t kAllV7 = (1u << 16) - 1;
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
// v6.
inline constexpr int kCeCollStart = 25;
inline constexpr int kCeCollComplete = 26;
inline constexpr int kCeSyncStart = 27;
inline constexpr int kCeSyncComplete = 28;
inline constexpr int kCeBatchStart = 29;
inline constexpr int kCeBatchComplete = 30;
// v7: a phase's stop; its timestamp arrives in the kernelCh member of the state arguments.
inline constexpr int kKernelPhaseStop = 31;
inline constexpr int kMaxKnown = 31;
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

// v6 (NCCL 2.29.2+): v5 plus three union members for copy-engine collectives. The largest
// member is still 88 bytes, so the struct keeps v5's 112 bytes.
struct ProfilerEventDescrV6 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    decltype(ProfilerEventDescrV5::groupApi) groupApi;
    decltype(ProfilerEventDescrV5::collApi) collApi;
    decltype(ProfilerEventDescrV5::p2pApi) p2pApi;
    decltype(ProfilerEventDescrV5::kernelLaunch) kernelLaunch;
    decltype(ProfilerEventDescrV5::coll) coll;
    decltype(ProfilerEventDescrV5::p2p) p2p;
    decltype(ProfilerEventDescrV5::proxyOp) proxyOp;
    decltype(ProfilerEventDescrV5::proxyStep) proxyStep;
    decltype(ProfilerEventDescrV5::kernelCh) kernelCh;
    decltype(ProfilerEventDescrV5::netPlugin) netPlugin;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
    } ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
};

// v7 (NCCL 2.31.2+): a per-call userTag (0 = untagged) appended to collApi, p2pApi, coll, p2p
// and ceColl; coll also gains kernelVariant and isSymColl; a new kernelPhase member. Every
// member keeps v6's leading fields at v6's offsets, so a v5 or v6 descriptor becomes a v7 one
// by copying it and clearing the appended fields. This is the profiler's internal event form.
struct ProfilerEventDescrV7 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    decltype(ProfilerEventDescrV5::groupApi) groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
      uint64_t userTag;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
      uint64_t userTag;
    } p2pApi;
    decltype(ProfilerEventDescrV5::kernelLaunch) kernelLaunch;
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
      const char* kernelVariant;
      bool isSymColl;
      uint64_t userTag;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
      uint64_t userTag;
    } p2p;
    decltype(ProfilerEventDescrV5::proxyOp) proxyOp;
    decltype(ProfilerEventDescrV5::proxyStep) proxyStep;
    decltype(ProfilerEventDescrV5::kernelCh) kernelCh;
    decltype(ProfilerEventDescrV5::netPlugin) netPlugin;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      const char* syncStrategy;
      bool intraBatchSync;
      uint32_t batchSize;
      uint32_t numBatches;
      uint32_t ceSeqNum;
      void* stream;
      uint64_t userTag;
    } ceColl;
    decltype(ProfilerEventDescrV6::ceCollSync) ceCollSync;
    decltype(ProfilerEventDescrV6::ceCollBatch) ceCollBatch;
    struct {
      uint8_t channelId;
      uint8_t phaseId;  // 0 initial sync, 1 compute, 2 final sync
      const char* phaseName;
      uint64_t pTimer;  // GPU globaltimer at the phase's start
    } kernelPhase;
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
// v6 and v7 keep the same 8-byte union (a kernel phase's stop uses the kernelCh member).
using ProfilerEventStateArgsV6 = ProfilerEventStateArgsV5;
using ProfilerEventStateArgsV7 = ProfilerEventStateArgsV5;

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                 int nNodes, int nranks, int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, ProfilerEventDescrV5* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, ProfilerEventStateArgsV5* eStateArgs);
  Result (*finalize)(void* context);
};

// v6 and v7: the v5 functions over the v6 / v7 descriptors.
struct ProfilerV6 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                 int nNodes, int nranks, int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, ProfilerEventDescrV6* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, ProfilerEventStateArgsV6* eStateArgs);
  Result (*finalize)(void* context);
};

struct ProfilerV7 {
  const char* name;
  Result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                 int nNodes, int nranks, int rank, Logger logfn);
  Result (*startEvent)(void* context, void** eHandle, ProfilerEventDescrV7* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, int eState, ProfilerEventStateArgsV7* eStateArgs);
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

// Net plugin ABI, versions 8 to 12 (NCCL 2.20 .. 2.32+). Our declarations; the facts are in
// docs/nccl-plugin-abi.md §4.
#pragma once

#include "common/abi/nccl_abi.h"
#include "common/abi/profiler_abi.h"

namespace autopilot::abi {

inline constexpr int kNetHandleMaxSize = 128;
inline constexpr int kPtrHost = 0x1;
inline constexpr int kPtrCuda = 0x2;
inline constexpr int kPtrDmaBuf = 0x4;
inline constexpr int kNetMaxRequests = 32;
inline constexpr uintptr_t kNetOptionalRecvCompletion = 0x1;
inline constexpr size_t kMaxNetSizeBytes = size_t(1) << 40;
inline constexpr size_t kMaxNetSizeV8 = size_t(1) << 30;
inline constexpr size_t kMaxCollNetSize = size_t(512) << 20;
inline constexpr int kNetMaxDevsPerNic = 4;     // v9..v11
inline constexpr int kNetMaxDevsPerNicV12 = 8;  // v12 (NCCL 2.30.3+)
inline constexpr int16_t kNetIdUndef = -1;      // railId / planeId not known
inline constexpr int kProxyMaxSubs = 64;  // length of the sizes[] array test() gets for receives

enum NetDeviceType : int {
  kNetDeviceHost = 0,
  kNetDeviceUnpack = 1,
  kNetDeviceGinProxy = 2,
  kNetDeviceGinGdaki = 3,
};

struct NetVDevicePropsV11 {
  int ndevs;
  int devs[kNetMaxDevsPerNic];
};
using NetVDevicePropsV10 = NetVDevicePropsV11;
struct NetVDevicePropsV12 {
  int ndevs;
  int devs[kNetMaxDevsPerNicV12];
};
using NetVDevicePropsV9 = NetVDevicePropsV11;

struct NetCommConfigV11 {
  int trafficClass;  // -1: undefined
};
using NetCommConfigV10 = NetCommConfigV11;

struct NetCommAttrV11 {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
};

struct NetAttrV11 {
  NetCommAttrV11 sendCommAttr;
  NetCommAttrV11 recvCommAttr;
  uint32_t op;     // 1 << ncclFunc_t
  uint32_t algo;   // 1 << algorithm
  uint32_t proto;  // 1 << protocol
};

// Unchanged since v7.
struct NetDeviceHandleV11 {
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};
using NetDeviceHandleV10 = NetDeviceHandleV11;
using NetDeviceHandleV9 = NetDeviceHandleV11;
using NetDeviceHandleV8 = NetDeviceHandleV11;

struct NetPropertiesV11 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;  // Mbps
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDevicePropsV11 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};

// v12: v11 with the wider vProps and two trailing ids NCCL copies into its topology.
struct NetPropertiesV12 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDevicePropsV12 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;   // kNetIdUndef: none
  int16_t planeId;  // kNetIdUndef: none
};

// v9 and v10: the v11 field list without maxMultiRequestSize.
struct NetPropertiesV10 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDevicePropsV10 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
};
using NetPropertiesV9 = NetPropertiesV10;

struct NetPropertiesV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
};

struct NetV11 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, NetCommConfigV11* config, Logger logFunction,
                 ProfilerCallback profFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV11* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  Result (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                    NetDeviceHandleV11** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, NetDeviceHandleV11** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                  void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                  void** phandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, NetVDevicePropsV11* props);
  Result (*finalize)(void* ctx);
  Result (*setNetAttr)(void* ctx, NetAttrV11* netAttr);
};

// v12: the v11 function table over the v12 properties and vProps; config, attributes and
// device handles are unchanged.
struct NetV12 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, NetCommConfigV11* config, Logger logFunction,
                 ProfilerCallback profFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV12* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  Result (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                    NetDeviceHandleV11** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, NetDeviceHandleV11** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                  void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                  void** phandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, NetVDevicePropsV12* props);
  Result (*finalize)(void* ctx);
  Result (*setNetAttr)(void* ctx, NetAttrV11* netAttr);
};

struct NetV10 {
  const char* name;
  Result (*init)(Logger logFunction, ProfilerCallback profFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV10* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, NetCommConfigV10* config, void* handle, void** sendComm,
                    NetDeviceHandleV10** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, NetDeviceHandleV10** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                  void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                  void** phandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, NetVDevicePropsV10* props);
};

struct NetV9 {
  const char* name;
  Result (*init)(Logger logFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV9* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, void* handle, void** sendComm, NetDeviceHandleV9** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, NetDeviceHandleV9** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                  void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, NetVDevicePropsV9* props);
};

struct NetV8 {
  const char* name;
  Result (*init)(Logger logFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV8* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, void* handle, void** sendComm, NetDeviceHandleV8** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, NetDeviceHandleV8** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                  void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
};

}  // namespace autopilot::abi

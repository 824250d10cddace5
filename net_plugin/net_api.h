// The net plugin's one internal interface, with v12 semantics. Every exported ABI version
// (v8..v12) is a thin adapter over it in net_abi_adapters.cc. Contracts NCCL relies on
// (docs/nccl-plugin-abi.md §4.6):
//  - listen/connect/accept never block; connect/accept return success with a NULL comm until
//    the connection is ready and are called again with the same handle / listenComm;
//  - isend/irecv always write *request; NULL means "cannot post now, retry later";
//  - test() is the only progress hook;
//  - errors are returned only when no path is left.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/abi/net_abi.h"

namespace autopilot::net {

// Superset of the properties of every exported version. Strings are owned by the plugin and
// stay valid for the lifetime of the loaded library.
struct DeviceProperties {
  const char* name = nullptr;
  const char* pciPath = nullptr;
  uint64_t guid = 0;
  int ptrSupport = abi::kPtrHost;
  int regIsGlobal = 0;
  int forceFlush = 0;
  int speedMbps = 0;
  int port = 0;
  float latencyUs = 0.0f;
  int maxComms = 0;
  int maxRecvs = 1;
  abi::NetVDevicePropsV12 vProps{1, {0, 0, 0, 0, 0, 0, 0, 0}};
  size_t maxP2pBytes = abi::kMaxNetSizeBytes;
  size_t maxCollBytes = abi::kMaxCollNetSize;
  // v12: NICs with the same railId on different nodes reach each other on the same network.
  // Our physical devices are numbered in the same rail-grouping order on every node, so a
  // physical device's index is its railId; a virtual device spans several (kNetIdUndef). Our
  // devices are not multi-plane NICs: planeId stays kNetIdUndef.
  int16_t railId = abi::kNetIdUndef;
  int16_t planeId = abi::kNetIdUndef;
};

struct InitArgs {
  int abiVersion = 12;
  uint64_t commId = 0;
  int trafficClass = -1;
  abi::ProfilerCallback profilerCallback = nullptr;  // v10+
};

abi::Result init(void** ctx, const InitArgs& args);
abi::Result finalize(void* ctx);
abi::Result devices(int* ndev);
abi::Result getProperties(int dev, DeviceProperties* props);
abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV12& props);
abi::Result listen(void* ctx, int dev, void* handle, void** listenComm);
// trafficClass < -1 means "use the one given at init" (v11); v10 passes its per-call config.
abi::Result connect(void* ctx, int dev, void* handle, void** sendComm, int trafficClass);
abi::Result accept(void* listenComm, void** recvComm);
abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle);
// Only called by NCCL when a device advertises NCCL_PTR_DMABUF (verbs transport with GPU memory).
abi::Result regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle);
abi::Result deregMr(void* comm, void* mhandle);
abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                  void** request);
abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                  void** mhandles, void** phandles, void** request);
abi::Result iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                   void** request);
abi::Result test(void* request, int* done, int* sizes);
abi::Result irecvConsumed(void* recvComm, int n, void* request);
abi::Result closeSend(void* sendComm);
abi::Result closeRecv(void* recvComm);
abi::Result closeListen(void* listenComm);
abi::Result setNetAttr(void* ctx, const abi::NetAttrV11& attr);

inline constexpr int kTrafficClassFromInit = -2;

}  // namespace autopilot::net

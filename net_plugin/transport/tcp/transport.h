// The TCP transport behind net_api.h: devices and properties, connection setup, the data path
// and teardown. net_api.cc forwards the NCCL-facing calls here; every pointer NCCL hands back
// is checked for its kind before use.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/abi/net_abi.h"
#include "net_plugin/net_api.h"
#include "net_plugin/transport/tcp/connection.h"

namespace autopilot::net::tcp {

// Per-NCCL-context state of the transport (connections in progress).
struct ContextState {
  PendingConnects connects;
};

abi::Result devices(int* ndev);
abi::Result getProperties(int dev, DeviceProperties* props);
abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV12& props);
abi::Result listen(uint64_t commId, int dev, void* handle, void** listenComm);
abi::Result connect(ContextState& ctx, uint64_t commId, int dev, void* handle, void** sendComm);
abi::Result accept(void* listenComm, void** recvComm);
abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle);
abi::Result deregMr(void* comm, void* mhandle);
abi::Result isend(void* sendComm, void* data, size_t size, int tag, void** request);
abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                  void** request);
abi::Result iflush(void* recvComm, void** request);
abi::Result test(void* request, int* done, int* sizes);
abi::Result closeSend(void* sendComm);
abi::Result closeRecv(void* recvComm);
abi::Result closeListen(void* listenComm);

}  // namespace autopilot::net::tcp

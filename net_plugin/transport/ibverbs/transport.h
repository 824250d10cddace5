// The verbs (RDMA) transport behind net_api.h: devices and properties, connection setup, the
// data path and teardown. net_api.cc forwards the NCCL-facing calls here when it chose this
// transport (NCCL_AUTOPILOT_TRANSPORT, or RDMA rails present); every pointer NCCL hands back is
// checked for its kind before use.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/abi/net_abi.h"
#include "net_plugin/core/pending_connects.h"
#include "net_plugin/net_api.h"
#include "net_plugin/transport/ibverbs/connection.h"

namespace autopilot::net::ib {

// Per-NCCL-context state of the transport (connections in progress).
struct ContextState {
  core::PendingConnects<Connector> connects;
};

// The rail names, in global rail order (for the fault injector); empty without devices.
std::vector<std::string> railNames();

abi::Result devices(int* ndev);
abi::Result getProperties(int dev, DeviceProperties* props);
abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV12& props);
abi::Result listen(uint64_t commId, int dev, int trafficClass, void* handle, void** listenComm);
abi::Result connect(ContextState& ctx, uint64_t commId, int dev, int trafficClass, void* handle,
                    void** sendComm);
abi::Result accept(void* listenComm, void** recvComm);
abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle);
// dmabufFd < 0: virtual memory (as regMr).
abi::Result regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                        int dmabufFd, void** mhandle);
abi::Result deregMr(void* comm, void* mhandle);
abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                  void** request);
abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                  void** mhandles, void** request);
abi::Result iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                   void** request);
abi::Result test(void* request, int* done, int* sizes);
abi::Result closeSend(void* sendComm);
abi::Result closeRecv(void* recvComm);
abi::Result closeListen(void* listenComm);

}  // namespace autopilot::net::ib

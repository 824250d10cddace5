// Transport: what one network transport (transport/tcp/, transport/ibverbs/) offers behind
// net_api.h. net_api.cc chooses one for the whole process, once, at the first call that needs
// it, and forwards every NCCL call to it without asking which one it is: NCCL only knows the
// devices that transport reported, so every comm, request and registration it hands back
// belongs to that transport.
//
// Each transport checks the kind of every pointer NCCL hands back before using it
// (core/opaque_handles.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/abi/net_abi.h"
#include "net_plugin/net_api.h"

namespace autopilot::net::core {

// A transport's state per NCCL context (init() to finalize()): connections in progress, which
// NCCL may abandon half-way; destroying the context drops them.
struct TransportContext {
  virtual ~TransportContext() = default;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // "TCP" or "RDMA (ibverbs)", for logs.
  virtual const char* name() const = 0;
  // The rail names, in the process's global rail order (the fault injector's indices); empty
  // without devices.
  virtual std::vector<std::string> railNames() = 0;
  virtual std::unique_ptr<TransportContext> newContext() = 0;

  virtual abi::Result devices(int* ndev) = 0;
  virtual abi::Result getProperties(int dev, DeviceProperties* props) = 0;
  virtual abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV12& props) = 0;
  virtual abi::Result listen(uint64_t commId, int dev, int trafficClass, void* handle,
                             void** listenComm) = 0;
  virtual abi::Result connect(TransportContext& ctx, uint64_t commId, int dev, int trafficClass,
                              void* handle, void** sendComm) = 0;
  virtual abi::Result accept(void* listenComm, void** recvComm) = 0;
  // dmabufFd < 0: virtual memory (regMr).
  virtual abi::Result regMr(void* comm, void* data, size_t size, int type, uint64_t offset,
                            int dmabufFd, void** mhandle) = 0;
  virtual abi::Result deregMr(void* comm, void* mhandle) = 0;
  virtual abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                            void** request) = 0;
  virtual abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes,
                            const int* tags, void** mhandles, void** request) = 0;
  virtual abi::Result iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                             void** request) = 0;
  virtual abi::Result test(void* request, int* done, int* sizes) = 0;
  virtual abi::Result closeSend(void* sendComm) = 0;
  virtual abi::Result closeRecv(void* recvComm) = 0;
  virtual abi::Result closeListen(void* listenComm) = 0;
};

}  // namespace autopilot::net::core

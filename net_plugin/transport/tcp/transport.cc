#include "net_plugin/transport/tcp/transport.h"

#include <memory>

#include "common/log.h"
#include "net_plugin/core/comm_config.h"
#include "net_plugin/core/transport_glue.h"
#include "net_plugin/transport/tcp/discovery.h"
#include "net_plugin/transport/tcp/recv_comm.h"
#include "net_plugin/transport/tcp/send_comm.h"

namespace autopilot::net::tcp {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
const FlushRequest gFlushDone;  // iflush on host memory: nothing to wait for

using core::closeComm;
using core::commOf;

}  // namespace

abi::Result devices(int* ndev) {
  TcpRails::instance().ensureDiscovered();
  *ndev = TcpRails::instance().devices().count();
  return abi::kSuccess;
}

abi::Result getProperties(int dev, DeviceProperties* props) {
  TcpRails& rails = TcpRails::instance();
  rails.ensureDiscovered();
  const core::NetDevice* d = rails.devices().device(dev);
  if (d == nullptr) {
    AP_WARN(kFlags, "getProperties: device %d does not exist (%d devices)", dev,
            rails.devices().count());
    return abi::kInvalidArgument;
  }
  props->name = d->name.c_str();
  props->pciPath = d->pciPath.empty() ? nullptr : d->pciPath.c_str();
  props->guid = d->guid;
  props->ptrSupport = abi::kPtrHost;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speedMbps = d->speedMbps;
  props->port = 0;
  props->latencyUs = 0;  // unknown: NCCL then uses its own default for the network
  props->maxComms = rails.maxComms(int(d->rails.size()));
  props->maxRecvs = core::commConfig().maxRecvs;
  core::describeDeviceLayout(*d, dev, props);
  props->maxP2pBytes = abi::kMaxNetSizeBytes;
  props->maxCollBytes = abi::kMaxCollNetSize;
  return abi::kSuccess;
}

abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV12& props) {
  TcpRails& rails = TcpRails::instance();
  rails.ensureDiscovered();
  return core::makeVirtualDevice(rails.devices(), props, d);
}

abi::Result listen(uint64_t commId, int dev, void* handle, void** listenComm) {
  TcpRails::instance().ensureDiscovered();
  auto comm = std::make_unique<ListenComm>(commId, dev);
  abi::Result r = comm->listen(handle);
  if (r != abi::kSuccess) return r;
  *listenComm = static_cast<CommBase*>(comm.release());
  return abi::kSuccess;
}

abi::Result connect(ContextState& ctx, uint64_t commId, int dev, void* handle, void** sendComm) {
  TcpRails::instance().ensureDiscovered();
  return core::connectStep<SendComm>(
      ctx.connects, handle,
      [&](std::unique_ptr<Connector>* fresh) {
        *fresh = std::make_unique<Connector>(commId, dev);
        return (*fresh)->start(static_cast<const uint8_t*>(handle));
      },
      sendComm);
}

abi::Result accept(void* listenComm, void** recvComm) {
  return core::acceptStep<ListenComm, RecvComm>(listenComm, recvComm);
}

abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  auto* base = static_cast<CommBase*>(comm);
  if (base->magic != SendComm::kMagic && base->magic != RecvComm::kMagic) {
    AP_WARN(kFlags, "regMr: not a comm of this plugin (%p)", comm);
    return abi::kInvalidArgument;
  }
  if (type != abi::kPtrHost) {
    AP_WARN(kFlags, "regMr: memory type %d is not supported: this transport reads and writes "
            "host memory only", type);
    return abi::kInternalError;
  }
  // Sockets need no registration; any non-NULL handle will do.
  *mhandle = comm;
  return abi::kSuccess;
}

abi::Result deregMr(void*, void*) { return abi::kSuccess; }

abi::Result isend(void* sendComm, void* data, size_t size, int tag, void** request) {
  SendComm* c = commOf<SendComm>(sendComm, "isend");
  if (c == nullptr) return abi::kInvalidArgument;
  void* q = nullptr;
  abi::Result r = c->isend(data, size, tag, &q);
  *request = q ? static_cast<RequestHeader*>(static_cast<SendRequest*>(q)) : nullptr;
  return r;
}

abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                  void** request) {
  RecvComm* c = commOf<RecvComm>(recvComm, "irecv");
  if (c == nullptr) return abi::kInvalidArgument;
  void* q = nullptr;
  abi::Result r = c->irecv(n, data, sizes, tags, &q);
  *request = q ? static_cast<RequestHeader*>(static_cast<RecvRequest*>(q)) : nullptr;
  return r;
}

abi::Result iflush(void* recvComm, void** request) {
  RecvComm* c = commOf<RecvComm>(recvComm, "iflush");
  if (c == nullptr) return abi::kInvalidArgument;
  *request = const_cast<RequestHeader*>(static_cast<const RequestHeader*>(&gFlushDone));
  return abi::kSuccess;
}

abi::Result test(void* request, int* done, int* sizes) {
  auto* h = static_cast<RequestHeader*>(request);
  if (h->magic != kRequestMagic) {
    *done = 0;
    AP_WARN_ONCE(kFlags, "test: %p is not a request of this plugin", request);
    return abi::kInvalidArgument;
  }
  switch (h->kind) {
    case RequestKind::kSend: {
      auto* q = static_cast<SendRequest*>(h);
      return static_cast<SendComm*>(q->owner)->test(q, done, sizes);
    }
    case RequestKind::kRecv: {
      auto* q = static_cast<RecvRequest*>(h);
      return static_cast<RecvComm*>(q->owner)->test(q, done, sizes);
    }
    case RequestKind::kFlush:
      *done = 1;
      return abi::kSuccess;
  }
  *done = 0;
  return abi::kInvalidArgument;
}

abi::Result closeSend(void* sendComm) { return closeComm<SendComm>(sendComm, "closeSend"); }
abi::Result closeRecv(void* recvComm) { return closeComm<RecvComm>(recvComm, "closeRecv"); }
abi::Result closeListen(void* listenComm) {
  return closeComm<ListenComm>(listenComm, "closeListen");
}

}  // namespace autopilot::net::tcp

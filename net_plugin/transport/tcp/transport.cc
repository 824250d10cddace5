#include "net_plugin/transport/tcp/transport.h"

#include <memory>

#include "common/log.h"
#include "net_plugin/core/comm_config.h"
#include "net_plugin/core/transport_glue.h"
#include "net_plugin/transport/tcp/connection.h"
#include "net_plugin/transport/tcp/discovery.h"
#include "net_plugin/transport/tcp/recv_comm.h"
#include "net_plugin/transport/tcp/send_comm.h"

namespace autopilot::net::tcp {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
const FlushRequest gFlushDone;  // iflush on host memory: nothing to wait for

using core::closeComm;
using core::commOf;

struct Context : core::TransportContext {
  PendingConnects connects;
};

class TcpTransport final : public core::Transport {
 public:
  const char* name() const override { return "TCP"; }
  std::vector<std::string> railNames() override;
  std::unique_ptr<core::TransportContext> newContext() override {
    return std::make_unique<Context>();
  }
  abi::Result devices(int* ndev) override;
  abi::Result getProperties(int dev, DeviceProperties* props) override;
  abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV12& props) override;
  abi::Result listen(uint64_t commId, int dev, int trafficClass, void* handle,
                     void** listenComm) override;
  abi::Result connect(core::TransportContext& ctx, uint64_t commId, int dev, int trafficClass,
                      void* handle, void** sendComm) override;
  abi::Result accept(void* listenComm, void** recvComm) override;
  abi::Result regMr(void* comm, void* data, size_t size, int type, uint64_t offset, int dmabufFd,
                    void** mhandle) override;
  abi::Result deregMr(void* comm, void* mhandle) override;
  abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                    void** request) override;
  abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                    void** mhandles, void** request) override;
  abi::Result iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                     void** request) override;
  abi::Result test(void* request, int* done, int* sizes) override;
  abi::Result closeSend(void* sendComm) override;
  abi::Result closeRecv(void* recvComm) override;
  abi::Result closeListen(void* listenComm) override;
};

}  // namespace

core::Transport& transport() {
  static TcpTransport t;
  return t;
}

std::vector<std::string> TcpTransport::railNames() {
  TcpRails::instance().ensureDiscovered();
  std::vector<std::string> names;
  for (const TcpRail& r : TcpRails::instance().rails()) names.push_back(r.name);
  return names;
}

abi::Result TcpTransport::devices(int* ndev) {
  TcpRails::instance().ensureDiscovered();
  *ndev = TcpRails::instance().devices().count();
  return abi::kSuccess;
}

abi::Result TcpTransport::getProperties(int dev, DeviceProperties* props) {
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

abi::Result TcpTransport::makeVDevice(int* d, const abi::NetVDevicePropsV12& props) {
  TcpRails& rails = TcpRails::instance();
  rails.ensureDiscovered();
  return core::makeVirtualDevice(rails.devices(), props, d);
}

abi::Result TcpTransport::listen(uint64_t commId, int dev, int /*trafficClass*/, void* handle,
                                 void** listenComm) {
  TcpRails::instance().ensureDiscovered();
  auto comm = std::make_unique<ListenComm>(commId, dev);
  abi::Result r = comm->listen(handle);
  if (r != abi::kSuccess) return r;
  *listenComm = static_cast<CommBase*>(comm.release());
  return abi::kSuccess;
}

abi::Result TcpTransport::connect(core::TransportContext& ctx, uint64_t commId, int dev,
                                  int /*trafficClass*/, void* handle, void** sendComm) {
  TcpRails::instance().ensureDiscovered();
  return core::connectStep<SendComm>(
      static_cast<Context&>(ctx).connects, handle,
      [&](std::unique_ptr<Connector>* fresh) {
        *fresh = std::make_unique<Connector>(commId, dev);
        return (*fresh)->start(static_cast<const uint8_t*>(handle));
      },
      sendComm);
}

abi::Result TcpTransport::accept(void* listenComm, void** recvComm) {
  return core::acceptStep<ListenComm, RecvComm>(listenComm, recvComm);
}

abi::Result TcpTransport::regMr(void* comm, void* /*data*/, size_t /*size*/, int type,
                                uint64_t /*offset*/, int dmabufFd, void** mhandle) {
  if (dmabufFd >= 0) {
    AP_WARN(kFlags, "regMrDmaBuf: the TCP transport does not take dma-buf memory");
    return abi::kInternalError;
  }
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

abi::Result TcpTransport::deregMr(void*, void*) { return abi::kSuccess; }

abi::Result TcpTransport::isend(void* sendComm, void* data, size_t size, int tag,
                                void* /*mhandle*/, void** request) {
  SendComm* c = commOf<SendComm>(sendComm, "isend");
  if (c == nullptr) return abi::kInvalidArgument;
  void* q = nullptr;
  abi::Result r = c->isend(data, size, tag, &q);
  *request = q ? static_cast<RequestHeader*>(static_cast<SendRequest*>(q)) : nullptr;
  return r;
}

abi::Result TcpTransport::irecv(void* recvComm, int n, void** data, const size_t* sizes,
                                const int* tags, void** /*mhandles*/, void** request) {
  RecvComm* c = commOf<RecvComm>(recvComm, "irecv");
  if (c == nullptr) return abi::kInvalidArgument;
  void* q = nullptr;
  abi::Result r = c->irecv(n, data, sizes, tags, &q);
  *request = q ? static_cast<RequestHeader*>(static_cast<RecvRequest*>(q)) : nullptr;
  return r;
}

abi::Result TcpTransport::iflush(void* recvComm, int /*n*/, void** /*data*/, const int* /*sizes*/,
                                 void** /*mhandles*/, void** request) {
  RecvComm* c = commOf<RecvComm>(recvComm, "iflush");
  if (c == nullptr) return abi::kInvalidArgument;
  *request = const_cast<RequestHeader*>(static_cast<const RequestHeader*>(&gFlushDone));
  return abi::kSuccess;
}

abi::Result TcpTransport::test(void* request, int* done, int* sizes) {
  RequestHeader* h = core::requestOf(request, done);
  if (h == nullptr) return abi::kInvalidArgument;
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
  return abi::kInvalidArgument;
}

abi::Result TcpTransport::closeSend(void* sendComm) {
  return closeComm<SendComm>(sendComm, "closeSend");
}
abi::Result TcpTransport::closeRecv(void* recvComm) {
  return closeComm<RecvComm>(recvComm, "closeRecv");
}
abi::Result TcpTransport::closeListen(void* listenComm) {
  return closeComm<ListenComm>(listenComm, "closeListen");
}

}  // namespace autopilot::net::tcp

#include "net_plugin/transport/tcp/transport.h"

#include <memory>

#include "common/log.h"
#include "net_plugin/core/transport_base.h"
#include "net_plugin/transport/tcp/connection.h"
#include "net_plugin/transport/tcp/discovery.h"
#include "net_plugin/transport/tcp/recv_comm.h"
#include "net_plugin/transport/tcp/send_comm.h"

namespace autopilot::net::tcp {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
const FlushRequest gFlushDone;  // iflush on host memory: nothing to wait for

using core::commOf;

struct Context : core::TransportContext {
  PendingConnects connects;
};

class TcpTransport final : public core::TransportBase<TcpRails, SendComm, RecvComm, ListenComm> {
 public:
  const char* name() const override { return "TCP"; }

  std::unique_ptr<core::TransportContext> newContext() override {
    return std::make_unique<Context>();
  }

  abi::Result getProperties(int dev, DeviceProperties* props) override {
    const core::NetDevice* d = device(dev);
    if (d == nullptr) return abi::kInvalidArgument;
    commonProperties(*d, dev, props);
    props->ptrSupport = abi::kPtrHost;
    props->port = 0;
    props->maxComms = TcpRails::instance().maxComms(int(d->rails.size()));
    props->maxP2pBytes = abi::kMaxNetSizeBytes;
    props->maxCollBytes = abi::kMaxCollNetSize;
    return abi::kSuccess;
  }

  abi::Result listen(uint64_t commId, int dev, int /*trafficClass*/, void* handle,
                     void** listenComm) override {
    TcpRails::instance().ensureDiscovered();
    auto comm = std::make_unique<ListenComm>(commId, dev);
    abi::Result r = comm->listen(handle);
    if (r != abi::kSuccess) return r;
    *listenComm = static_cast<CommBase*>(comm.release());
    return abi::kSuccess;
  }

  abi::Result connect(core::TransportContext& ctx, uint64_t commId, int dev, int /*trafficClass*/,
                      void* handle, void** sendComm) override {
    TcpRails::instance().ensureDiscovered();
    return core::connectStep<SendComm>(
        static_cast<Context&>(ctx).connects, handle,
        [&](std::unique_ptr<Connector>* fresh) {
          *fresh = std::make_unique<Connector>(commId, dev);
          return (*fresh)->start(static_cast<const uint8_t*>(handle));
        },
        sendComm);
  }

  abi::Result regMr(void* comm, void* /*data*/, size_t /*size*/, int type, uint64_t /*offset*/,
                    int dmabufFd, void** mhandle) override {
    auto* base = static_cast<CommBase*>(comm);
    if (base == nullptr || (base->magic != SendComm::kMagic && base->magic != RecvComm::kMagic)) {
      AP_WARN(kFlags, "regMr: not a comm of this plugin (%p)", comm);
      return abi::kInvalidArgument;
    }
    if (type != abi::kPtrHost || dmabufFd >= 0) {
      AP_WARN(kFlags,
              "regMr: memory type %d%s is not supported: this transport reads and "
              "writes host memory only",
              type, dmabufFd >= 0 ? " (dma-buf)" : "");
      return abi::kInternalError;
    }
    // Sockets need no registration; any non-NULL handle will do.
    *mhandle = comm;
    return abi::kSuccess;
  }

  abi::Result deregMr(void*, void*) override { return abi::kSuccess; }

  abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* /*mhandle*/,
                    void** request) override {
    SendComm* c = commOf<SendComm>(sendComm, "isend");
    if (c == nullptr) return abi::kInvalidArgument;
    return c->isend(data, size, tag, request);
  }

  abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                    void** /*mhandles*/, void** request) override {
    RecvComm* c = commOf<RecvComm>(recvComm, "irecv");
    if (c == nullptr) return abi::kInvalidArgument;
    return c->irecv(n, data, sizes, tags, request);
  }

  abi::Result iflush(void* recvComm, int /*n*/, void** /*data*/, const int* /*sizes*/,
                     void** /*mhandles*/, void** request) override {
    RecvComm* c = commOf<RecvComm>(recvComm, "iflush");
    if (c == nullptr) return abi::kInvalidArgument;
    *request = const_cast<RequestHeader*>(static_cast<const RequestHeader*>(&gFlushDone));
    return abi::kSuccess;
  }
};

}  // namespace

core::Transport& transport() {
  static TcpTransport t;
  return t;
}

}  // namespace autopilot::net::tcp

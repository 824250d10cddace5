#include "net_plugin/transport/tcp/transport.h"

#include <memory>

#include "common/log.h"
#include "net_plugin/core/comm_config.h"
#include "net_plugin/transport/tcp/discovery.h"
#include "net_plugin/transport/tcp/recv_comm.h"
#include "net_plugin/transport/tcp/send_comm.h"

namespace autopilot::net::tcp {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
const FlushRequest gFlushDone;  // iflush on host memory: nothing to wait for

template <typename T>
T* commOf(void* p, const char* what) {
  auto* base = static_cast<CommBase*>(p);
  if (base == nullptr || base->magic != T::kMagic) {
    AP_WARN(kFlags, "%s: not a %s comm of this plugin (%p)", what,
            T::kMagic == SendComm::kMagic   ? "send"
            : T::kMagic == RecvComm::kMagic ? "receive"
                                            : "listen",
            p);
    return nullptr;
  }
  return static_cast<T*>(base);
}

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
  if (d->isVirtual) {
    props->vProps.ndevs = int(d->children.size());
    for (size_t i = 0; i < d->children.size() && i < size_t(abi::kNetMaxDevsPerNic); ++i) {
      props->vProps.devs[i] = d->children[i];
    }
  } else {
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
  }
  props->maxP2pBytes = abi::kMaxNetSizeBytes;
  props->maxCollBytes = abi::kMaxCollNetSize;
  return abi::kSuccess;
}

abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV11& props) {
  TcpRails& rails = TcpRails::instance();
  rails.ensureDiscovered();
  std::string error;
  // The table rejects counts beyond the 4 entries vProps has before reading them.
  int v = rails.devices().makeVirtual(props.devs, props.ndevs, &error);
  if (v < 0) {
    AP_WARN(kFlags, "makeVDevice: %s", error.c_str());
    return abi::kInvalidUsage;
  }
  AP_INFO(kFlags, "virtual net device %d: %s", v, rails.devices().device(v)->name.c_str());
  *d = v;
  return abi::kSuccess;
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
  auto* bytes = static_cast<uint8_t*>(handle);
  uint64_t token = connectToken(bytes);
  Connector* c = token != 0 ? ctx.connects.find(token) : nullptr;
  if (c == nullptr) {
    // First call for this handle (or NCCL handed a fresh copy): start dialing.
    auto fresh = std::make_unique<Connector>(commId, dev);
    abi::Result r = fresh->start(bytes);
    if (r != abi::kSuccess) return r;
    c = fresh.get();
    token = ctx.connects.add(std::move(fresh));
    setConnectToken(bytes, token);
  }
  SendComm* comm = nullptr;
  abi::Result r = c->progress(&comm);
  if (r != abi::kSuccess || comm != nullptr) {
    ctx.connects.remove(token);
    setConnectToken(bytes, 0);
  }
  if (comm != nullptr) *sendComm = static_cast<CommBase*>(comm);
  return r;
}

abi::Result accept(void* listenComm, void** recvComm) {
  ListenComm* l = commOf<ListenComm>(listenComm, "accept");
  if (l == nullptr) return abi::kInvalidArgument;
  RecvComm* comm = nullptr;
  abi::Result r = l->accept(&comm);
  if (comm != nullptr) *recvComm = static_cast<CommBase*>(comm);
  return r;
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

abi::Result closeSend(void* sendComm) {
  if (sendComm == nullptr) return abi::kSuccess;
  SendComm* c = commOf<SendComm>(sendComm, "closeSend");
  if (c == nullptr) return abi::kInvalidArgument;
  delete c;
  return abi::kSuccess;
}

abi::Result closeRecv(void* recvComm) {
  if (recvComm == nullptr) return abi::kSuccess;
  RecvComm* c = commOf<RecvComm>(recvComm, "closeRecv");
  if (c == nullptr) return abi::kInvalidArgument;
  delete c;
  return abi::kSuccess;
}

abi::Result closeListen(void* listenComm) {
  if (listenComm == nullptr) return abi::kSuccess;
  ListenComm* c = commOf<ListenComm>(listenComm, "closeListen");
  if (c == nullptr) return abi::kInvalidArgument;
  delete c;
  return abi::kSuccess;
}

}  // namespace autopilot::net::tcp

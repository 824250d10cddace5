// The net plugin's internal interface, implemented by the verbs (RDMA) transport
// (transport/ibverbs/transport.h) or the TCP transport (transport/tcp/transport.h). This file
// owns what is not transport-specific: which transport serves the process, the per-context
// state NCCL hands back to listen/connect, and the NCCL_AUTOPILOT_NET_ENABLE switch.
//
// One transport serves the whole process, chosen at the first devices() call: NCCL only knows
// the devices that transport reports, so every comm, request and registration it hands back
// belongs to it.
#include "net_plugin/net_api.h"

#include <memory>

#include "common/instance.h"
#include "common/log.h"
#include "common/params.h"
#include "net_plugin/core/fault_injector.h"
#include "net_plugin/transport/ibverbs/transport.h"
#include "net_plugin/transport/tcp/discovery.h"
#include "net_plugin/transport/tcp/transport.h"

namespace autopilot::net {
namespace {

params::BoolParam gNetEnable(
    "NCCL_AUTOPILOT_NET_ENABLE", true,
    "Net plugin on/off. 0 reports no devices, so NCCL falls back to its own IB/Socket transports.");

params::StringParam gTransport(
    "NCCL_AUTOPILOT_TRANSPORT", "auto",
    "Which transport the net plugin uses: 'auto' (RDMA through ibverbs when an RDMA port is "
    "usable, else TCP), 'ib' (RDMA only: no devices without RDMA ports), 'tcp' (TCP only).",
    {"auto", "ib", "tcp"});

constexpr unsigned long kFlags = abi::subsys::kNet;

struct NetContext {
  uint64_t commId = 0;
  int trafficClass = -1;
  abi::ProfilerCallback profilerCallback = nullptr;
  tcp::ContextState tcp;
  ib::ContextState ib;
};

NetContext* contextOf(void* ctx) { return static_cast<NetContext*>(ctx); }

enum class Transport { kTcp, kIb };

Transport choose() {
  const std::string& wanted = gTransport.get();
  Transport t = Transport::kTcp;
  if (wanted != "tcp") {
    int n = 0;
    ib::devices(&n);
    if (n > 0 || wanted == "ib") t = Transport::kIb;
  }
  std::vector<std::string> names;
  if (t == Transport::kIb) {
    names = ib::railNames();
  } else {
    tcp::TcpRails::instance().ensureDiscovered();
    for (const tcp::TcpRail& r : tcp::TcpRails::instance().rails()) names.push_back(r.name);
  }
  core::FaultInjector::instance().setRails(names);
  AP_INFO(abi::subsys::kInit | kFlags, "net transport: %s (NCCL_AUTOPILOT_TRANSPORT=%s)",
          t == Transport::kIb ? "RDMA (ibverbs)" : "TCP", wanted.c_str());
  return t;
}

// Thread-safe: NCCL's init threads of several communicators may ask at once.
Transport transport() {
  static const Transport t = choose();
  return t;
}
bool useIb() { return transport() == Transport::kIb; }

}  // namespace

abi::Result init(void** ctx, const InitArgs& args) {
  *ctx = nullptr;
  params::logAllOnce();
  auto context = std::make_unique<NetContext>();
  context->commId = args.commId;
  context->trafficClass = args.trafficClass;
  context->profilerCallback = args.profilerCallback;
  AP_INFO(abi::subsys::kInit | kFlags, "net v%d ready: comm 0x%llx%s (instance 0x%llx)",
          args.abiVersion, static_cast<unsigned long long>(args.commId),
          gNetEnable.get() ? "" : ", disabled by NCCL_AUTOPILOT_NET_ENABLE=0",
          static_cast<unsigned long long>(instanceId()));
  *ctx = context.release();
  contextCreated();
  return abi::kSuccess;
}

abi::Result finalize(void* ctx) {
  if (ctx == nullptr) return abi::kSuccess;
  delete contextOf(ctx);  // also drops connections NCCL abandoned half-way
  contextDestroyed();
  return abi::kSuccess;
}

abi::Result devices(int* ndev) {
  if (!gNetEnable.get()) {
    *ndev = 0;
    return abi::kSuccess;
  }
  return useIb() ? ib::devices(ndev) : tcp::devices(ndev);
}

abi::Result getProperties(int dev, DeviceProperties* props) {
  return useIb() ? ib::getProperties(dev, props) : tcp::getProperties(dev, props);
}

abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV12& props) {
  return useIb() ? ib::makeVDevice(d, props) : tcp::makeVDevice(d, props);
}

abi::Result listen(void* ctx, int dev, void* handle, void** listenComm) {
  uint64_t commId = ctx ? contextOf(ctx)->commId : 0;
  int trafficClass = ctx ? contextOf(ctx)->trafficClass : -1;
  return useIb() ? ib::listen(commId, dev, trafficClass, handle, listenComm)
              : tcp::listen(commId, dev, handle, listenComm);
}

abi::Result connect(void* ctx, int dev, void* handle, void** sendComm, int trafficClass) {
  if (ctx == nullptr) {
    AP_WARN(kFlags, "connect without a context (init was not called)");
    return abi::kInvalidUsage;
  }
  NetContext* c = contextOf(ctx);
  if (trafficClass == kTrafficClassFromInit) trafficClass = c->trafficClass;
  return useIb() ? ib::connect(c->ib, c->commId, dev, trafficClass, handle, sendComm)
              : tcp::connect(c->tcp, c->commId, dev, handle, sendComm);
}

abi::Result accept(void* listenComm, void** recvComm) {
  return useIb() ? ib::accept(listenComm, recvComm) : tcp::accept(listenComm, recvComm);
}

abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return useIb() ? ib::regMr(comm, data, size, type, mhandle)
              : tcp::regMr(comm, data, size, type, mhandle);
}

abi::Result regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle) {
  if (!useIb()) {
    AP_WARN(kFlags, "regMrDmaBuf: the TCP transport does not take dma-buf memory");
    return abi::kInternalError;
  }
  return ib::regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
}

abi::Result deregMr(void* comm, void* mhandle) {
  return useIb() ? ib::deregMr(comm, mhandle) : tcp::deregMr(comm, mhandle);
}

abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                  void* /*phandle*/, void** request) {
  return useIb() ? ib::isend(sendComm, data, size, tag, mhandle, request)
              : tcp::isend(sendComm, data, size, tag, request);
}

abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                  void** mhandles, void** /*phandles*/, void** request) {
  return useIb() ? ib::irecv(recvComm, n, data, sizes, tags, mhandles, request)
              : tcp::irecv(recvComm, n, data, sizes, tags, request);
}

abi::Result iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                   void** request) {
  return useIb() ? ib::iflush(recvComm, n, data, sizes, mhandles, request)
              : tcp::iflush(recvComm, request);
}

abi::Result test(void* request, int* done, int* sizes) {
  return useIb() ? ib::test(request, done, sizes) : tcp::test(request, done, sizes);
}

// Completed requests are recycled at test() completion; nothing is pending here.
abi::Result irecvConsumed(void*, int, void*) { return abi::kSuccess; }

abi::Result closeSend(void* sendComm) {
  return useIb() ? ib::closeSend(sendComm) : tcp::closeSend(sendComm);
}
abi::Result closeRecv(void* recvComm) {
  return useIb() ? ib::closeRecv(recvComm) : tcp::closeRecv(recvComm);
}
abi::Result closeListen(void* listenComm) {
  return useIb() ? ib::closeListen(listenComm) : tcp::closeListen(listenComm);
}

// Transfer hints (v11): nothing to tune yet; NCCL ignores the return value anyway.
abi::Result setNetAttr(void*, const abi::NetAttrV11&) { return abi::kSuccess; }

}  // namespace autopilot::net

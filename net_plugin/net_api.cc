// The net plugin's internal interface over one core::Transport, the verbs (RDMA) one
// (transport/ibverbs/) or the TCP one (transport/tcp/). This file owns what is not
// transport-specific: which transport serves the process, the per-context state NCCL hands
// back to listen/connect, and the NCCL_AUTOPILOT_NET_ENABLE switch.
//
// One transport serves the whole process, chosen at the first call that needs it (devices(),
// normally): NCCL only knows the devices that transport reports, so every comm, request and
// registration it hands back belongs to it.
#include "net_plugin/net_api.h"

#include <memory>

#include "common/instance.h"
#include "common/log.h"
#include "common/params.h"
#include "net_plugin/core/fault_injector.h"
#include "net_plugin/core/transport.h"
#include "net_plugin/transport/ibverbs/transport.h"
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
  std::unique_ptr<core::TransportContext> transport;  // connections in progress
};

NetContext* contextOf(void* ctx) { return static_cast<NetContext*>(ctx); }

core::Transport& choose() {
  const std::string& wanted = gTransport.get();
  core::Transport* t = &tcp::transport();
  if (wanted != "tcp") {
    int n = 0;
    ib::transport().devices(&n);
    if (n > 0 || wanted == "ib") t = &ib::transport();
  }
  core::FaultInjector::instance().setRails(t->railNames());
  AP_INFO(abi::subsys::kInit | kFlags, "net transport: %s (NCCL_AUTOPILOT_TRANSPORT=%s)", t->name(),
          wanted.c_str());
  return *t;
}

// Thread-safe: NCCL's init threads of several communicators may ask at once.
core::Transport& transport() {
  static core::Transport& t = choose();
  return t;
}

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
  return transport().devices(ndev);
}

abi::Result getProperties(int dev, DeviceProperties* props) {
  return transport().getProperties(dev, props);
}

abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV12& props) {
  return transport().makeVDevice(d, props);
}

abi::Result listen(void* ctx, int dev, void* handle, void** listenComm) {
  uint64_t commId = ctx ? contextOf(ctx)->commId : 0;
  int trafficClass = ctx ? contextOf(ctx)->trafficClass : -1;
  return transport().listen(commId, dev, trafficClass, handle, listenComm);
}

abi::Result connect(void* ctx, int dev, void* handle, void** sendComm, int trafficClass) {
  if (ctx == nullptr) {
    AP_WARN(kFlags, "connect without a context (init was not called)");
    return abi::kInvalidUsage;
  }
  NetContext* c = contextOf(ctx);
  if (trafficClass == kTrafficClassFromInit) trafficClass = c->trafficClass;
  // NCCL drives the connections of one context from one thread at a time.
  if (!c->transport) c->transport = transport().newContext();
  return transport().connect(*c->transport, c->commId, dev, trafficClass, handle, sendComm);
}

abi::Result accept(void* listenComm, void** recvComm) {
  return transport().accept(listenComm, recvComm);
}

abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return transport().regMr(comm, data, size, type, 0, -1, mhandle);
}

abi::Result regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle) {
  return transport().regMr(comm, data, size, type, offset, fd, mhandle);
}

abi::Result deregMr(void* comm, void* mhandle) { return transport().deregMr(comm, mhandle); }

abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                  void* /*phandle*/, void** request) {
  return transport().isend(sendComm, data, size, tag, mhandle, request);
}

abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                  void** mhandles, void** /*phandles*/, void** request) {
  return transport().irecv(recvComm, n, data, sizes, tags, mhandles, request);
}

abi::Result iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                   void** request) {
  return transport().iflush(recvComm, n, data, sizes, mhandles, request);
}

abi::Result test(void* request, int* done, int* sizes) {
  return transport().test(request, done, sizes);
}

// Completed requests are recycled at test() completion; nothing is pending here.
abi::Result irecvConsumed(void*, int, void*) { return abi::kSuccess; }

abi::Result closeSend(void* sendComm) { return transport().closeSend(sendComm); }
abi::Result closeRecv(void* recvComm) { return transport().closeRecv(recvComm); }
abi::Result closeListen(void* listenComm) { return transport().closeListen(listenComm); }

// Transfer hints (v11): nothing to tune yet; NCCL ignores the return value anyway.
abi::Result setNetAttr(void*, const abi::NetAttrV11&) { return abi::kSuccess; }

}  // namespace autopilot::net

// The net plugin's internal interface, implemented by the TCP transport
// (transport/tcp/transport.h). This file owns what is not transport-specific: the per-context
// state NCCL hands back to listen/connect, and the NCCL_AUTOPILOT_NET_ENABLE switch.
#include "net_plugin/net_api.h"

#include <memory>

#include "common/instance.h"
#include "common/log.h"
#include "common/params.h"
#include "net_plugin/transport/tcp/transport.h"

namespace autopilot::net {
namespace {

params::BoolParam gNetEnable(
    "NCCL_AUTOPILOT_NET_ENABLE", true,
    "Net plugin on/off. 0 reports no devices, so NCCL falls back to its own IB/Socket transports.");

constexpr unsigned long kFlags = abi::subsys::kNet;

struct NetContext {
  uint64_t commId = 0;
  int trafficClass = -1;
  abi::ProfilerCallback profilerCallback = nullptr;
  tcp::ContextState tcp;
};

NetContext* contextOf(void* ctx) { return static_cast<NetContext*>(ctx); }

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
  return tcp::devices(ndev);
}

abi::Result getProperties(int dev, DeviceProperties* props) {
  return tcp::getProperties(dev, props);
}

abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV11& props) {
  return tcp::makeVDevice(d, props);
}

abi::Result listen(void* ctx, int dev, void* handle, void** listenComm) {
  uint64_t commId = ctx ? contextOf(ctx)->commId : 0;
  return tcp::listen(commId, dev, handle, listenComm);
}

abi::Result connect(void* ctx, int dev, void* handle, void** sendComm, int /*trafficClass*/) {
  if (ctx == nullptr) {
    AP_WARN(kFlags, "connect without a context (init was not called)");
    return abi::kInvalidUsage;
  }
  NetContext* c = contextOf(ctx);
  return tcp::connect(c->tcp, c->commId, dev, handle, sendComm);
}

abi::Result accept(void* listenComm, void** recvComm) { return tcp::accept(listenComm, recvComm); }

abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return tcp::regMr(comm, data, size, type, mhandle);
}

abi::Result deregMr(void* comm, void* mhandle) { return tcp::deregMr(comm, mhandle); }

abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* /*mhandle*/,
                  void* /*phandle*/, void** request) {
  return tcp::isend(sendComm, data, size, tag, request);
}

abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                  void** /*mhandles*/, void** /*phandles*/, void** request) {
  return tcp::irecv(recvComm, n, data, sizes, tags, request);
}

abi::Result iflush(void* recvComm, int, void**, const int*, void**, void** request) {
  return tcp::iflush(recvComm, request);
}

abi::Result test(void* request, int* done, int* sizes) { return tcp::test(request, done, sizes); }

// Completed requests are recycled at test() completion; nothing is pending here.
abi::Result irecvConsumed(void*, int, void*) { return abi::kSuccess; }

abi::Result closeSend(void* sendComm) { return tcp::closeSend(sendComm); }
abi::Result closeRecv(void* recvComm) { return tcp::closeRecv(recvComm); }
abi::Result closeListen(void* listenComm) { return tcp::closeListen(listenComm); }

// Transfer hints (v11): nothing to tune on TCP yet; NCCL ignores the return value anyway.
abi::Result setNetAttr(void*, const abi::NetAttrV11&) { return abi::kSuccess; }

}  // namespace autopilot::net

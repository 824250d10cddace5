// Net plugin implementation for builds without a transport: the plugin loads, reports no
// devices (so NCCL moves on to its internal IB and Socket transports) and rejects every
// connection request for a device it never reported.
#include <memory>

#include "common/instance.h"
#include "common/log.h"
#include "common/params.h"
#include "net_plugin/net_api.h"

namespace autopilot::net {
namespace {

params::BoolParam gNetEnable(
    "NCCL_AUTOPILOT_NET_ENABLE", true,
    "Net plugin on/off. 0 reports no devices, so NCCL falls back to its own IB/Socket transports.");

constexpr unsigned long kFlags = abi::subsys::kNet;

struct NetContext {
  uint64_t commId;
  int trafficClass;
  abi::ProfilerCallback profilerCallback;
};

abi::Result noSuchDevice(const char* what, int dev) {
  AP_WARN(kFlags, "%s: device %d does not exist (this build has no usable rails)", what, dev);
  return abi::kInvalidArgument;
}

}  // namespace

abi::Result init(void** ctx, const InitArgs& args) {
  *ctx = nullptr;
  params::logAllOnce();
  auto context =
      std::make_unique<NetContext>(NetContext{args.commId, args.trafficClass,
                                              args.profilerCallback});
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
  delete static_cast<NetContext*>(ctx);
  contextDestroyed();
  return abi::kSuccess;
}

abi::Result devices(int* ndev) {
  *ndev = 0;
  return abi::kSuccess;
}

abi::Result getProperties(int dev, DeviceProperties*) { return noSuchDevice("getProperties", dev); }

abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV11& props) {
  return noSuchDevice("makeVDevice", props.ndevs > 0 ? props.devs[0] : -1);
}

abi::Result listen(void*, int dev, void*, void**) { return noSuchDevice("listen", dev); }

abi::Result connect(void*, int dev, void*, void**, int) { return noSuchDevice("connect", dev); }

abi::Result accept(void*, void**) { return abi::kInvalidArgument; }
abi::Result regMr(void*, void*, size_t, int, void**) { return abi::kInvalidArgument; }
abi::Result deregMr(void*, void*) { return abi::kInvalidArgument; }
abi::Result isend(void*, void*, size_t, int, void*, void*, void** request) {
  *request = nullptr;
  return abi::kInvalidArgument;
}
abi::Result irecv(void*, int, void**, const size_t*, const int*, void**, void**, void** request) {
  *request = nullptr;
  return abi::kInvalidArgument;
}
abi::Result iflush(void*, int, void**, const int*, void**, void** request) {
  *request = nullptr;
  return abi::kInvalidArgument;
}
abi::Result test(void*, int* done, int*) {
  *done = 0;
  return abi::kInvalidArgument;
}
abi::Result irecvConsumed(void*, int, void*) { return abi::kSuccess; }
abi::Result closeSend(void*) { return abi::kSuccess; }
abi::Result closeRecv(void*) { return abi::kSuccess; }
abi::Result closeListen(void*) { return abi::kSuccess; }
abi::Result setNetAttr(void*, const abi::NetAttrV11&) { return abi::kSuccess; }

}  // namespace autopilot::net

// Exported net tables v8..v12 over net_api.h. Each adapter only reshapes arguments: older
// versions have no per-communicator context (one process-wide context stands in, created by
// their once-per-process init), no profiler handles, and v8 carries sizes as int.
#include <mutex>

#include "common/boundary.h"
#include "net_plugin/net_api.h"

namespace autopilot::net {
namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
constexpr int kMaxRecvsV8 = 8;  // NCCL never groups more receives than maxRecvs (<= 8)

// ---- process-wide context of the pre-v11 versions

std::mutex gLegacyMutex;
void* gLegacyContext = nullptr;

abi::Result legacyInit(int version, abi::ProfilerCallback prof) {
  std::lock_guard<std::mutex> lock(gLegacyMutex);
  if (gLegacyContext != nullptr) return abi::kSuccess;
  InitArgs args;
  args.abiVersion = version;
  args.profilerCallback = prof;
  return init(&gLegacyContext, args);
}

void* legacyContext() {
  std::lock_guard<std::mutex> lock(gLegacyMutex);
  return gLegacyContext;
}

// Released when the library is unloaded: those versions have no finalize.
struct LegacyContextReaper {
  ~LegacyContextReaper() {
    if (gLegacyContext != nullptr) finalize(gLegacyContext);
    gLegacyContext = nullptr;
  }
} gLegacyContextReaper;

// ---- properties

template <typename Props>
void fillCommon(const DeviceProperties& p, Props* out) {
  out->name = const_cast<char*>(p.name);
  out->pciPath = const_cast<char*>(p.pciPath);
  out->guid = p.guid;
  out->ptrSupport = p.ptrSupport;
  out->regIsGlobal = p.regIsGlobal;
  out->speed = p.speedMbps;
  out->port = p.port;
  out->latency = p.latencyUs;
  out->maxComms = p.maxComms;
  out->maxRecvs = p.maxRecvs;
  out->netDeviceType = abi::kNetDeviceHost;
  out->netDeviceVersion = 0;
}

// vProps of the version's width. A virtual device wider than an older version's 4 entries can
// only have been made through v12, which that NCCL does not speak; it is cut to what fits.
template <typename VProps>
void copyVProps(const abi::NetVDevicePropsV12& in, VProps* out) {
  constexpr int kWidth = int(sizeof(out->devs) / sizeof(out->devs[0]));
  out->ndevs = in.ndevs < kWidth ? in.ndevs : kWidth;
  for (int i = 0; i < kWidth; ++i) out->devs[i] = in.devs[i];
}

template <typename Props>
void fillV9Plus(const DeviceProperties& p, Props* out) {
  fillCommon(p, out);
  out->forceFlush = p.forceFlush;
  copyVProps(p.vProps, &out->vProps);
  out->maxP2pBytes = p.maxP2pBytes;
  out->maxCollBytes = p.maxCollBytes;
}

abi::Result getPropertiesV12(int dev, abi::NetPropertiesV12* props) {
  return guarded("netGetProperties", kFlags, [&] {
    if (props == nullptr) return abi::kInvalidArgument;
    DeviceProperties p;
    abi::Result r = getProperties(dev, &p);
    if (r != abi::kSuccess) return r;
    fillV9Plus(p, props);
    props->maxMultiRequestSize = 1;
    props->railId = p.railId;
    props->planeId = p.planeId;
    return abi::kSuccess;
  });
}

abi::Result getPropertiesV11(int dev, abi::NetPropertiesV11* props) {
  return guarded("netGetProperties", kFlags, [&] {
    if (props == nullptr) return abi::kInvalidArgument;
    DeviceProperties p;
    abi::Result r = getProperties(dev, &p);
    if (r != abi::kSuccess) return r;
    fillV9Plus(p, props);
    props->maxMultiRequestSize = 1;
    return abi::kSuccess;
  });
}

abi::Result getPropertiesV10(int dev, abi::NetPropertiesV10* props) {
  return guarded("netGetProperties", kFlags, [&] {
    if (props == nullptr) return abi::kInvalidArgument;
    DeviceProperties p;
    abi::Result r = getProperties(dev, &p);
    if (r == abi::kSuccess) fillV9Plus(p, props);
    return r;
  });
}

abi::Result getPropertiesV8(int dev, abi::NetPropertiesV8* props) {
  return guarded("netGetProperties", kFlags, [&] {
    if (props == nullptr) return abi::kInvalidArgument;
    DeviceProperties p;
    abi::Result r = getProperties(dev, &p);
    if (r == abi::kSuccess) fillCommon(p, props);
    return r;
  });
}

// ---- init / finalize

template <int kVersion>
abi::Result initV11V12(void** ctx, uint64_t commId, abi::NetCommConfigV11* config,
                       abi::Logger logFn, abi::ProfilerCallback prof) {
  log::setLogger(logFn);
  if (ctx == nullptr) return abi::kInvalidArgument;
  *ctx = nullptr;  // NCCL calls finalize(*ctx) even when init fails
  return guarded("netInit", kFlags, [&] {
    InitArgs args;
    args.abiVersion = kVersion;
    args.commId = commId;
    args.trafficClass = config ? config->trafficClass : -1;
    args.profilerCallback = prof;
    return init(ctx, args);
  });
}

abi::Result initV10(abi::Logger logFn, abi::ProfilerCallback prof) {
  log::setLogger(logFn);
  return guarded("netInit", kFlags, [&] { return legacyInit(10, prof); });
}

template <int kVersion>
abi::Result initV8V9(abi::Logger logFn) {
  log::setLogger(logFn);
  return guarded("netInit", kFlags, [&] { return legacyInit(kVersion, nullptr); });
}

abi::Result finalizeV11(void* ctx) {
  return guarded("netFinalize", kFlags, [&] { return finalize(ctx); });
}

abi::Result devicesAny(int* ndev) {
  return guarded("netDevices", kFlags, [&] {
    if (ndev == nullptr) return abi::kInvalidArgument;
    return devices(ndev);
  });
}

// ---- connection setup

abi::Result listenV11(void* ctx, int dev, void* handle, void** listenComm) {
  return guarded("netListen", kFlags, [&] {
    if (handle == nullptr || listenComm == nullptr) return abi::kInvalidArgument;
    *listenComm = nullptr;
    return listen(ctx, dev, handle, listenComm);
  });
}

abi::Result listenLegacy(int dev, void* handle, void** listenComm) {
  return listenV11(legacyContext(), dev, handle, listenComm);
}

abi::Result connectV11(void* ctx, int dev, void* handle, void** sendComm,
                       abi::NetDeviceHandleV11** /*sendDevComm: host plugin, untouched*/) {
  return guarded("netConnect", kFlags, [&] {
    if (handle == nullptr || sendComm == nullptr) return abi::kInvalidArgument;
    *sendComm = nullptr;
    return connect(ctx, dev, handle, sendComm, kTrafficClassFromInit);
  });
}

abi::Result connectV10(int dev, abi::NetCommConfigV10* config, void* handle, void** sendComm,
                       abi::NetDeviceHandleV10** /*sendDevComm*/) {
  return guarded("netConnect", kFlags, [&] {
    if (handle == nullptr || sendComm == nullptr) return abi::kInvalidArgument;
    *sendComm = nullptr;
    return connect(legacyContext(), dev, handle, sendComm, config ? config->trafficClass : -1);
  });
}

abi::Result connectV8V9(int dev, void* handle, void** sendComm,
                        abi::NetDeviceHandleV9** sendDevComm) {
  return connectV11(legacyContext(), dev, handle, sendComm, sendDevComm);
}

abi::Result acceptAny(void* listenComm, void** recvComm, abi::NetDeviceHandleV11** /*devComm*/) {
  return guarded("netAccept", kFlags, [&] {
    if (listenComm == nullptr || recvComm == nullptr) return abi::kInvalidArgument;
    *recvComm = nullptr;
    return accept(listenComm, recvComm);
  });
}

// ---- memory registration

abi::Result regMrAny(void* comm, void* data, size_t size, int type, void** mhandle) {
  return guarded("netRegMr", kFlags, [&] {
    if (comm == nullptr || mhandle == nullptr) return abi::kInvalidArgument;
    *mhandle = nullptr;
    return regMr(comm, data, size, type, mhandle);
  });
}

abi::Result regMrDmaBufAny(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle) {
  return guarded("netRegMrDmaBuf", kFlags, [&] {
    if (comm == nullptr || mhandle == nullptr) return abi::kInvalidArgument;
    *mhandle = nullptr;
    return regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
  });
}

abi::Result deregMrAny(void* comm, void* mhandle) {
  return guarded("netDeregMr", kFlags, [&] { return deregMr(comm, mhandle); });
}

// ---- data path

abi::Result isendV11(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                     void** request) {
  return guarded("netIsend", kFlags, [&] {
    if (sendComm == nullptr || request == nullptr) return abi::kInvalidArgument;
    *request = nullptr;
    return isend(sendComm, data, size, tag, mhandle, phandle, request);
  });
}

abi::Result isendV9(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                    void** request) {
  return isendV11(sendComm, data, size, tag, mhandle, nullptr, request);
}

abi::Result isendV8(void* sendComm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0) {
    if (request) *request = nullptr;
    return abi::kInvalidArgument;
  }
  return isendV11(sendComm, data, size_t(size), tag, mhandle, nullptr, request);
}

abi::Result irecvV11(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** phandles, void** request) {
  return guarded("netIrecv", kFlags, [&] {
    if (recvComm == nullptr || request == nullptr) return abi::kInvalidArgument;
    // *request may hold NCCL_NET_OPTIONAL_RECV_COMPLETION on entry: a hint, always overwritten.
    *request = nullptr;
    if (n < 1 || data == nullptr || sizes == nullptr || tags == nullptr) {
      return abi::kInvalidArgument;
    }
    return irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
  });
}

abi::Result irecvV9(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                    void** request) {
  return irecvV11(recvComm, n, data, sizes, tags, mhandles, nullptr, request);
}

abi::Result irecvV8(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                    void** request) {
  if (n < 1 || n > kMaxRecvsV8 || sizes == nullptr) {
    if (request) *request = nullptr;
    return abi::kInvalidArgument;
  }
  size_t wide[kMaxRecvsV8];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) {
      if (request) *request = nullptr;
      return abi::kInvalidArgument;
    }
    wide[i] = size_t(sizes[i]);
  }
  return irecvV11(recvComm, n, data, wide, tags, mhandles, nullptr, request);
}

abi::Result iflushAny(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                      void** request) {
  return guarded("netIflush", kFlags, [&] {
    if (recvComm == nullptr || request == nullptr) return abi::kInvalidArgument;
    *request = nullptr;
    return iflush(recvComm, n, data, sizes, mhandles, request);
  });
}

abi::Result testAny(void* request, int* done, int* sizes) {
  return guarded("netTest", kFlags, [&] {
    if (request == nullptr || done == nullptr) return abi::kInvalidArgument;
    return test(request, done, sizes);
  });
}

abi::Result irecvConsumedAny(void* recvComm, int n, void* request) {
  return guarded("netIrecvConsumed", kFlags, [&] { return irecvConsumed(recvComm, n, request); });
}

// ---- teardown

abi::Result closeSendAny(void* comm) {
  return guarded("netCloseSend", kFlags, [&] { return closeSend(comm); });
}
abi::Result closeRecvAny(void* comm) {
  return guarded("netCloseRecv", kFlags, [&] { return closeRecv(comm); });
}
abi::Result closeListenAny(void* comm) {
  return guarded("netCloseListen", kFlags, [&] { return closeListen(comm); });
}

// ---- virtual devices and hints

abi::Result makeVDeviceV12(int* d, abi::NetVDevicePropsV12* props) {
  return guarded("netMakeVDevice", kFlags, [&] {
    if (d == nullptr || props == nullptr) return abi::kInvalidArgument;
    return makeVDevice(d, *props);
  });
}

// v9..v11: 4 entries. A count beyond them is rejected before any entry is read.
abi::Result makeVDeviceV9(int* d, abi::NetVDevicePropsV11* props) {
  return guarded("netMakeVDevice", kFlags, [&] {
    if (d == nullptr || props == nullptr) return abi::kInvalidArgument;
    if (props->ndevs < 1 || props->ndevs > abi::kNetMaxDevsPerNic) {
      AP_WARN(kFlags, "makeVDevice: a virtual device merges 1 to %d devices in this NCCL, not %d",
              abi::kNetMaxDevsPerNic, props->ndevs);
      return abi::kInvalidUsage;
    }
    abi::NetVDevicePropsV12 wide{};
    wide.ndevs = props->ndevs;
    for (int i = 0; i < props->ndevs; ++i) wide.devs[i] = props->devs[i];
    return makeVDevice(d, wide);
  });
}

abi::Result setNetAttrV11(void* ctx, abi::NetAttrV11* attr) {
  return guarded("netSetNetAttr", kFlags, [&] {
    if (attr == nullptr) return abi::kInvalidArgument;
    return setNetAttr(ctx, *attr);
  });
}

}  // namespace
}  // namespace autopilot::net

using namespace autopilot;
using namespace autopilot::net;

AP_EXPORT_TABLE(abi::NetV12, ncclNetPlugin_v12) = {
    "autopilot",      initV11V12<12>, devicesAny,     getPropertiesV12, listenV11,      connectV11,
    acceptAny,        regMrAny,       regMrDmaBufAny, deregMrAny,       isendV11,       irecvV11,
    iflushAny,        testAny,        closeSendAny,   closeRecvAny,     closeListenAny, nullptr,
    irecvConsumedAny, makeVDeviceV12, finalizeV11,    setNetAttrV11};

AP_EXPORT_TABLE(abi::NetV11, ncclNetPlugin_v11) = {
    "autopilot",      initV11V12<11>, devicesAny,     getPropertiesV11, listenV11,      connectV11,
    acceptAny,        regMrAny,       regMrDmaBufAny, deregMrAny,       isendV11,       irecvV11,
    iflushAny,        testAny,        closeSendAny,   closeRecvAny,     closeListenAny, nullptr,
    irecvConsumedAny, makeVDeviceV9,  finalizeV11,    setNetAttrV11};

AP_EXPORT_TABLE(abi::NetV10, ncclNetPlugin_v10) = {
    "autopilot",  initV10,        devicesAny, getPropertiesV10, listenLegacy,
    connectV10,   acceptAny,      regMrAny,   regMrDmaBufAny,   deregMrAny,
    isendV11,     irecvV11,       iflushAny,  testAny,          closeSendAny,
    closeRecvAny, closeListenAny, nullptr,    irecvConsumedAny, makeVDeviceV9};

AP_EXPORT_TABLE(abi::NetV9, ncclNetPlugin_v9) = {
    "autopilot",  initV8V9<9>,    devicesAny, getPropertiesV10, listenLegacy,
    connectV8V9,  acceptAny,      regMrAny,   regMrDmaBufAny,   deregMrAny,
    isendV9,      irecvV9,        iflushAny,  testAny,          closeSendAny,
    closeRecvAny, closeListenAny, nullptr,    irecvConsumedAny, makeVDeviceV9};

AP_EXPORT_TABLE(abi::NetV8, ncclNetPlugin_v8) = {
    "autopilot",  initV8V9<8>,    devicesAny, getPropertiesV8, listenLegacy,
    connectV8V9,  acceptAny,      regMrAny,   regMrDmaBufAny,  deregMrAny,
    isendV8,      irecvV8,        iflushAny,  testAny,         closeSendAny,
    closeRecvAny, closeListenAny, nullptr,    irecvConsumedAny};

#include "common/host/plugin_host.h"

#include <dlfcn.h>
#include <link.h>
#include <strings.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/host/log_capture.h"

namespace autopilot::host {
namespace {

constexpr int kMaxNetPluginEntries = 14;  // NCCL_NET_MAX_PLUGINS - 2

const char* kindPrefix(PluginKind kind) {
  switch (kind) {
    case PluginKind::kNet:
      return "libnccl-net";
    case PluginKind::kTuner:
      return "libnccl-tuner";
    case PluginKind::kProfiler:
      return "libnccl-profiler";
  }
  return "";
}

bool isStaticPluginName(const std::string& name) {
  static const char kStatic[] = "STATIC_PLUGIN";
  return !name.empty() && name.size() <= std::strlen(kStatic) &&
         strncasecmp(name.c_str(), kStatic, name.size()) == 0;
}

std::string linkMapPath(void* handle) {
  link_map* lm = nullptr;
  if (handle != nullptr && dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm != nullptr &&
      lm->l_name != nullptr && lm->l_name[0] != '\0') {
    return lm->l_name;
  }
  return "(main program)";
}

std::vector<std::string> splitNetList(const std::string& value) {
  std::vector<std::string> out;
  std::stringstream ss(value);
  std::string item;
  while (std::getline(ss, item, ',') && int(out.size()) < kMaxNetPluginEntries) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

template <typename T>
const T* table(const void* t) {
  return static_cast<const T*>(t);
}

// What NCCL's v10 adapter keeps per communicator in place of a plugin context.
struct LegacyNetContext {
  abi::NetCommConfigV11 config;
};

}  // namespace

const char* kindName(PluginKind kind) {
  switch (kind) {
    case PluginKind::kNet:
      return "net";
    case PluginKind::kTuner:
      return "tuner";
    case PluginKind::kProfiler:
      return "profiler";
  }
  return "";
}

const char* kindEnvVar(PluginKind kind) {
  switch (kind) {
    case PluginKind::kNet:
      return "NCCL_NET_PLUGIN";
    case PluginKind::kTuner:
      return "NCCL_TUNER_PLUGIN";
    case PluginKind::kProfiler:
      return "NCCL_PROFILER_PLUGIN";
  }
  return "";
}

std::vector<std::string> candidateNames(PluginKind kind, const std::string& name) {
  std::string prefix = kindPrefix(kind);
  if (name.empty()) return {prefix + ".so"};
  std::vector<std::string> out{name};
  bool hasSlash = name.find('/') != std::string::npos;
  bool isLibSo =
      name.rfind("lib", 0) == 0 && name.size() >= 3 && name.compare(name.size() - 3, 3, ".so") == 0;
  if (!hasSlash && !isLibSo) out.push_back(prefix + "-" + name + ".so");
  return out;
}

// ------------------------------------------------------------------------------------ HostNet

const char* HostNet::name() const { return *static_cast<const char* const*>(table_); }

abi::Result HostNet::init(void** ctx, uint64_t commId, abi::NetCommConfigV11* config,
                          abi::Logger log, abi::ProfilerCallback prof) {
  if (version_ >= 11) return table<abi::NetV11>(table_)->init(ctx, commId, config, log, prof);
  // Older versions: init once per process; the per-comm "context" only carries the config.
  if (!legacyInitDone_) {
    abi::Result r = version_ == 10  ? table<abi::NetV10>(table_)->init(log, prof)
                    : version_ == 9 ? table<abi::NetV9>(table_)->init(log)
                                    : table<abi::NetV8>(table_)->init(log);
    if (r != abi::kSuccess) return r;
    legacyInitDone_ = true;
  }
  *ctx = new LegacyNetContext{config ? *config : abi::NetCommConfigV11{-1}};
  return abi::kSuccess;
}

abi::Result HostNet::finalize(void* ctx) {
  if (version_ >= 11) return table<abi::NetV11>(table_)->finalize(ctx);
  delete static_cast<LegacyNetContext*>(ctx);  // those versions are never finalized
  return abi::kSuccess;
}

abi::Result HostNet::devices(int* ndev) {
  // `devices` sits at the same slot in every version.
  return table<abi::NetV8>(table_)->devices(ndev);
}

abi::Result HostNet::getPropertiesV12(int dev, abi::NetPropertiesV12* props) {
  if (version_ == 12 || props == nullptr) {
    return version_ == 12 ? table<abi::NetV12>(table_)->getProperties(dev, props)
                          : getProperties(dev, nullptr);
  }
  abi::NetPropertiesV11 p;
  abi::Result r = getProperties(dev, &p);
  if (r != abi::kSuccess) return r;
  std::memset(props, 0, sizeof(*props));
  std::memcpy(props, &p, offsetof(abi::NetPropertiesV11, vProps));  // identical prefix
  props->vProps.ndevs = p.vProps.ndevs;
  for (int i = 0; i < abi::kNetMaxDevsPerNic; ++i) props->vProps.devs[i] = p.vProps.devs[i];
  props->maxP2pBytes = p.maxP2pBytes;
  props->maxCollBytes = p.maxCollBytes;
  props->maxMultiRequestSize = p.maxMultiRequestSize;
  props->railId = abi::kNetIdUndef;
  props->planeId = abi::kNetIdUndef;
  return r;
}

abi::Result HostNet::getProperties(int dev, abi::NetPropertiesV11* props) {
  if (version_ == 12 && props != nullptr) {
    // What NCCL 2.30's v12 core keeps of it, in v11 form (the wider vProps cut to 4).
    abi::NetPropertiesV12 p;
    std::memset(&p, 0, sizeof(p));
    abi::Result r = table<abi::NetV12>(table_)->getProperties(dev, &p);
    if (r != abi::kSuccess) return r;
    std::memset(props, 0, sizeof(*props));
    std::memcpy(props, &p, offsetof(abi::NetPropertiesV11, vProps));
    props->vProps.ndevs =
        p.vProps.ndevs < abi::kNetMaxDevsPerNic ? p.vProps.ndevs : abi::kNetMaxDevsPerNic;
    for (int i = 0; i < abi::kNetMaxDevsPerNic; ++i) props->vProps.devs[i] = p.vProps.devs[i];
    props->maxP2pBytes = p.maxP2pBytes;
    props->maxCollBytes = p.maxCollBytes;
    props->maxMultiRequestSize = p.maxMultiRequestSize;
    return r;
  }
  if (props == nullptr) {  // only tests do this; hand the NULL through to the plugin
    return version_ == 12   ? table<abi::NetV12>(table_)->getProperties(dev, nullptr)
           : version_ == 11 ? table<abi::NetV11>(table_)->getProperties(dev, nullptr)
           : version_ >= 9  ? table<abi::NetV10>(table_)->getProperties(dev, nullptr)
                            : table<abi::NetV8>(table_)->getProperties(dev, nullptr);
  }
  std::memset(props, 0, sizeof(*props));
  if (version_ == 11) return table<abi::NetV11>(table_)->getProperties(dev, props);
  if (version_ == 10 || version_ == 9) {
    abi::NetPropertiesV10 p{};
    abi::Result r = version_ == 10 ? table<abi::NetV10>(table_)->getProperties(dev, &p)
                                   : table<abi::NetV9>(table_)->getProperties(dev, &p);
    if (r != abi::kSuccess) return r;
    std::memcpy(props, &p, sizeof(p));  // identical prefix
    props->maxMultiRequestSize = 1;
    return r;
  }
  abi::NetPropertiesV8 p{};
  abi::Result r = table<abi::NetV8>(table_)->getProperties(dev, &p);
  if (r != abi::kSuccess) return r;
  props->name = p.name;
  props->pciPath = p.pciPath;
  props->guid = p.guid;
  props->ptrSupport = p.ptrSupport;
  props->regIsGlobal = p.regIsGlobal;
  props->forceFlush = 0;
  props->speed = p.speed;
  props->port = p.port;
  props->latency = p.latency;
  props->maxComms = p.maxComms;
  props->maxRecvs = p.maxRecvs;
  props->netDeviceType = p.netDeviceType;
  props->netDeviceVersion = p.netDeviceVersion;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = abi::kMaxNetSizeV8;
  props->maxCollBytes = abi::kMaxCollNetSize;
  props->maxMultiRequestSize = 1;
  return r;
}

abi::Result HostNet::listen(void* ctx, int dev, void* handle, void** listenComm) {
  if (version_ >= 11) return table<abi::NetV11>(table_)->listen(ctx, dev, handle, listenComm);
  if (version_ == 10) return table<abi::NetV10>(table_)->listen(dev, handle, listenComm);
  if (version_ == 9) return table<abi::NetV9>(table_)->listen(dev, handle, listenComm);
  return table<abi::NetV8>(table_)->listen(dev, handle, listenComm);
}

abi::Result HostNet::connect(void* ctx, int dev, void* handle, void** sendComm) {
  abi::NetDeviceHandleV11* devHandle = nullptr;  // a HOST plugin leaves it alone
  if (version_ >= 11) {
    return table<abi::NetV11>(table_)->connect(ctx, dev, handle, sendComm, &devHandle);
  }
  if (version_ == 10) {
    auto* legacy = static_cast<LegacyNetContext*>(ctx);
    abi::NetCommConfigV10 config = legacy ? legacy->config : abi::NetCommConfigV10{-1};
    return table<abi::NetV10>(table_)->connect(dev, &config, handle, sendComm, &devHandle);
  }
  if (version_ == 9) return table<abi::NetV9>(table_)->connect(dev, handle, sendComm, &devHandle);
  return table<abi::NetV8>(table_)->connect(dev, handle, sendComm, &devHandle);
}

abi::Result HostNet::accept(void* listenComm, void** recvComm) {
  abi::NetDeviceHandleV11* devHandle = nullptr;
  return table<abi::NetV8>(table_)->accept(listenComm, recvComm, &devHandle);
}

abi::Result HostNet::regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return table<abi::NetV8>(table_)->regMr(comm, data, size, type, mhandle);
}

abi::Result HostNet::deregMr(void* comm, void* mhandle) {
  return table<abi::NetV8>(table_)->deregMr(comm, mhandle);
}

abi::Result HostNet::isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                           void* phandle, void** request) {
  if (version_ >= 11) {
    return table<abi::NetV11>(table_)->isend(sendComm, data, size, tag, mhandle, phandle, request);
  }
  if (version_ == 10) {
    return table<abi::NetV10>(table_)->isend(sendComm, data, size, tag, mhandle, phandle, request);
  }
  if (version_ == 9) {
    return table<abi::NetV9>(table_)->isend(sendComm, data, size, tag, mhandle, request);
  }
  if (size > abi::kMaxNetSizeV8) return abi::kInternalError;  // as NCCL's v8 adapter
  return table<abi::NetV8>(table_)->isend(sendComm, data, int(size), tag, mhandle, request);
}

abi::Result HostNet::irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                           void** mhandles, void** phandles, void** request) {
  if (version_ >= 11) {
    return table<abi::NetV11>(table_)->irecv(recvComm, n, data, sizes, tags, mhandles, phandles,
                                             request);
  }
  if (version_ == 10) {
    return table<abi::NetV10>(table_)->irecv(recvComm, n, data, sizes, tags, mhandles, phandles,
                                             request);
  }
  if (version_ == 9) {
    return table<abi::NetV9>(table_)->irecv(recvComm, n, data, sizes, tags, mhandles, request);
  }
  int narrow[abi::kProxyMaxSubs];
  if (n < 0 || n > abi::kProxyMaxSubs) return abi::kInternalError;
  for (int i = 0; i < n; ++i) {
    if (sizes[i] > abi::kMaxNetSizeV8) return abi::kInternalError;
    narrow[i] = int(sizes[i]);
  }
  // NCCL's v8 adapter turns the optional-completion hint back into NULL.
  if (*request == reinterpret_cast<void*>(abi::kNetOptionalRecvCompletion)) *request = nullptr;
  return table<abi::NetV8>(table_)->irecv(recvComm, n, data, narrow, tags, mhandles, request);
}

abi::Result HostNet::iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                            void** request) {
  return table<abi::NetV8>(table_)->iflush(recvComm, n, data, sizes, mhandles, request);
}

abi::Result HostNet::test(void* request, int* done, int* sizes) {
  return table<abi::NetV8>(table_)->test(request, done, sizes);
}

abi::Result HostNet::closeSend(void* comm) { return table<abi::NetV8>(table_)->closeSend(comm); }
abi::Result HostNet::closeRecv(void* comm) { return table<abi::NetV8>(table_)->closeRecv(comm); }
abi::Result HostNet::closeListen(void* comm) {
  return table<abi::NetV8>(table_)->closeListen(comm);
}

abi::Result HostNet::irecvConsumed(void* recvComm, int n, void* request) {
  auto fn = table<abi::NetV8>(table_)->irecvConsumed;
  return fn ? fn(recvComm, n, request) : abi::kSuccess;
}

bool HostNet::hasMakeVDevice() const {
  if (version_ == 12) return table<abi::NetV12>(table_)->makeVDevice != nullptr;
  if (version_ == 11) return table<abi::NetV11>(table_)->makeVDevice != nullptr;
  if (version_ == 10) return table<abi::NetV10>(table_)->makeVDevice != nullptr;
  if (version_ == 9) return table<abi::NetV9>(table_)->makeVDevice != nullptr;
  return false;
}

abi::Result HostNet::makeVDeviceV12(int* d, abi::NetVDevicePropsV12* props) {
  if (!hasMakeVDevice()) return abi::kInvalidUsage;
  if (version_ == 12) return table<abi::NetV12>(table_)->makeVDevice(d, props);
  if (props->ndevs > abi::kNetMaxDevsPerNic) return abi::kInvalidUsage;
  abi::NetVDevicePropsV11 narrow{};
  narrow.ndevs = props->ndevs;
  for (int i = 0; i < abi::kNetMaxDevsPerNic; ++i) narrow.devs[i] = props->devs[i];
  return makeVDevice(d, &narrow);
}

abi::Result HostNet::makeVDevice(int* d, abi::NetVDevicePropsV11* props) {
  if (!hasMakeVDevice()) return abi::kInvalidUsage;
  if (version_ == 12) {
    abi::NetVDevicePropsV12 wide{};
    wide.ndevs = props->ndevs;
    for (int i = 0; i < abi::kNetMaxDevsPerNic; ++i) wide.devs[i] = props->devs[i];
    return table<abi::NetV12>(table_)->makeVDevice(d, &wide);
  }
  if (version_ == 11) return table<abi::NetV11>(table_)->makeVDevice(d, props);
  if (version_ == 10) return table<abi::NetV10>(table_)->makeVDevice(d, props);
  return table<abi::NetV9>(table_)->makeVDevice(d, props);
}

abi::Result HostNet::setNetAttr(void* ctx, abi::NetAttrV11* attr) {
  if (version_ < 11 || table<abi::NetV11>(table_)->setNetAttr == nullptr) return abi::kSuccess;
  return table<abi::NetV11>(table_)->setNetAttr(ctx, attr);
}

// ---------------------------------------------------------------------------------- HostTuner

const char* HostTuner::name() const { return *static_cast<const char* const*>(table_); }

abi::Result HostTuner::init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                            abi::Logger log, abi::NvlDomainInfoV5* nvl,
                            abi::TunerConstantsV5* constants) {
  if (version_ == 7) {
    // NCCL 2.32 passes five compute-capability rows; rows 0-3 are v5's.
    abi::TunerConstantsV7& c = constantsV7_;
    constexpr size_t kRows = sizeof(double) * abi::kNumCompCaps * abi::kNumTuningScales;
    if (constants != nullptr) {
      std::memcpy(c.baseLatencies, constants->baseLatencies, sizeof(c.baseLatencies));
      std::memcpy(c.hwLatencies, constants->hwLatencies, sizeof(c.hwLatencies));
      std::memcpy(c.llMaxBws, constants->llMaxBws, kRows);
      std::memcpy(c.perChMaxRingLL128Bws, constants->perChMaxRingLL128Bws, kRows);
      std::memcpy(c.perChMaxTreeLL128Bws, constants->perChMaxTreeLL128Bws, kRows);
      std::memcpy(c.perChMaxTreeBws, constants->perChMaxTreeBws, kRows);
      std::memcpy(c.perChMaxNVLSTreeBws, constants->perChMaxNVLSTreeBws, kRows);
    }
    abi::Result r = table<abi::TunerV7>(table_)->init(ctx, commId, nRanks, nNodes, log, nvl,
                                                      constants ? &c : nullptr);
    if (constants != nullptr) {
      std::memcpy(constants->baseLatencies, c.baseLatencies, sizeof(c.baseLatencies));
      std::memcpy(constants->hwLatencies, c.hwLatencies, sizeof(c.hwLatencies));
      std::memcpy(constants->llMaxBws, c.llMaxBws, kRows);
      std::memcpy(constants->perChMaxRingLL128Bws, c.perChMaxRingLL128Bws, kRows);
      std::memcpy(constants->perChMaxTreeLL128Bws, c.perChMaxTreeLL128Bws, kRows);
      std::memcpy(constants->perChMaxTreeBws, c.perChMaxTreeBws, kRows);
      std::memcpy(constants->perChMaxNVLSTreeBws, c.perChMaxNVLSTreeBws, kRows);
    }
    return r;
  }
  if (version_ == 5 || version_ == 6) {
    // v6's init is v5's, in the same slot.
    return table<abi::TunerV5>(table_)->init(ctx, commId, nRanks, nNodes, log, nvl, constants);
  }
  if (version_ == 4) return table<abi::TunerV4>(table_)->init(nRanks, nNodes, log, ctx);
  return table<abi::TunerV3>(table_)->init(nRanks, nNodes, log, ctx);
}

abi::Result HostTuner::getCollInfo(void* ctx, int collType, size_t nBytes, int numPipeOps,
                                   float** costTable, int numAlgo, int numProto, int regBuff,
                                   int* nChannels) {
  if (version_ >= 4) {
    // v4..v7 getCollInfo has the v5 signature, in the same slot.
    return table<abi::TunerV5>(table_)->getCollInfo(ctx, collType, nBytes, numPipeOps, costTable,
                                                    numAlgo, numProto, regBuff, nChannels);
  }
  return table<abi::TunerV3>(table_)->getCollInfo(ctx, collType, nBytes, numPipeOps, costTable,
                                                  numAlgo, numProto, nChannels);
}

abi::Result HostTuner::finalize(void* ctx) {
  return table<abi::TunerV5>(table_)->finalize(ctx);  // finalize/destroy share the slot
}

bool HostTuner::hasGetChunkSize() const {
  return version_ >= 6 && table<abi::TunerV6>(table_)->getChunkSize != nullptr;
}

abi::Result HostTuner::getChunkSize(void* ctx, int collType, size_t nBytes, int algo, int proto,
                                    int nChannels, size_t* chunkSize) {
  if (!hasGetChunkSize()) return abi::kSuccess;  // NCCL keeps its own value
  // v6 and v7 keep it in the same slot.
  return table<abi::TunerV6>(table_)->getChunkSize(ctx, collType, nBytes, algo, proto, nChannels,
                                                   chunkSize);
}

abi::TunerGetCollInfoV5Fn HostTuner::rawGetCollInfoV5() const {
  return version_ >= 4 ? table<abi::TunerV5>(table_)->getCollInfo : nullptr;
}

abi::TunerGetChunkSizeFn HostTuner::rawGetChunkSize() const {
  return version_ >= 6 ? table<abi::TunerV6>(table_)->getChunkSize : nullptr;
}

// ------------------------------------------------------------------------------- HostProfiler

const char* HostProfiler::name() const { return *static_cast<const char* const*>(table_); }

abi::Result HostProfiler::init(void** ctx, uint64_t commId, int* mask, const char* commName,
                               int nNodes, int nRanks, int rank, abi::Logger log) {
  if (version_ >= 5) {  // v5..v7 share init's signature and slot
    return table<abi::ProfilerV5>(table_)->init(ctx, commId, mask, commName, nNodes, nRanks, rank,
                                                log);
  }
  return table<abi::ProfilerV4>(table_)->init(ctx, mask, commName, commId, nNodes, nRanks, rank,
                                              log);
}

abi::Result HostProfiler::startEvent(void* ctx, void** eHandle, abi::ProfilerEventDescrV5* d5) {
  if (version_ == 5) return table<abi::ProfilerV5>(table_)->startEvent(ctx, eHandle, d5);
  abi::ProfilerEventDescrV7 d;
  std::memset(static_cast<void*>(&d), 0, sizeof(d));
  std::memcpy(static_cast<void*>(&d), d5, sizeof(*d5));
  switch (d5->type) {  // the fields v7 appended, which the v5 bytes do not cover
    case abi::event::kCollApi:
      d.collApi.userTag = 0;
      break;
    case abi::event::kP2pApi:
      d.p2pApi.userTag = 0;
      break;
    case abi::event::kP2p:
      d.p2p.userTag = 0;
      break;
    default:
      break;
  }
  return startEvent(ctx, eHandle, &d);
}

abi::Result HostProfiler::startEvent(void* ctx, void** eHandle, abi::ProfilerEventDescrV7* d) {
  constexpr uint64_t kCeEvents = abi::event::kCeColl | abi::event::kCeSync | abi::event::kCeBatch;
  if (version_ == 7) return table<abi::ProfilerV7>(table_)->startEvent(ctx, eHandle, d);
  // Older profilers: NCCL's adapters discard what the version cannot describe.
  if (d->type == abi::event::kKernelPhase || (version_ < 6 && (d->type & kCeEvents))) {
    if (eHandle) *eHandle = nullptr;
    return abi::kSuccess;
  }
  if (version_ >= 5) {
    // The v5/v6 descriptor is the v7 one's first 112 bytes.
    abi::ProfilerEventDescrV6 old;
    std::memcpy(static_cast<void*>(&old), d, sizeof(old));
    return version_ == 6 ? table<abi::ProfilerV6>(table_)->startEvent(ctx, eHandle, &old)
                         : table<abi::ProfilerV5>(table_)->startEvent(
                               ctx, eHandle, reinterpret_cast<abi::ProfilerEventDescrV5*>(&old));
  }
  constexpr uint64_t kDroppedForV4 = abi::event::kGroupApi | abi::event::kCollApi |
                                     abi::event::kP2pApi | abi::event::kKernelLaunch;
  if (d->type & kDroppedForV4) return abi::kSuccess;  // *eHandle untouched, as in NCCL
  abi::ProfilerEventDescrV4 v4;
  std::memset(&v4, 0, sizeof(v4));
  v4.type = uint8_t(d->type);
  v4.parentObj = d->parentObj;
  v4.rank = d->rank;
  if (d->type == abi::event::kColl) {
    v4.parentObj = d->coll.parentGroup;
    v4.coll.seqNumber = d->coll.seqNumber;
    v4.coll.func = d->coll.func;
    v4.coll.sendBuff = d->coll.sendBuff;
    v4.coll.recvBuff = d->coll.recvBuff;
    v4.coll.count = d->coll.count;
    v4.coll.root = d->coll.root;
    v4.coll.datatype = d->coll.datatype;
    v4.coll.nChannels = d->coll.nChannels;
    v4.coll.nWarps = d->coll.nWarps;
    v4.coll.algo = d->coll.algo;
    v4.coll.proto = d->coll.proto;
  } else if (d->type == abi::event::kP2p) {
    v4.parentObj = d->p2p.parentGroup;
    v4.p2p.func = d->p2p.func;
    v4.p2p.buff = d->p2p.buff;
    v4.p2p.datatype = d->p2p.datatype;
    v4.p2p.count = d->p2p.count;
    v4.p2p.peer = d->p2p.peer;
    v4.p2p.nChannels = d->p2p.nChannels;
  } else {
    std::memcpy(&v4.proxyOp, &d->proxyOp,
                sizeof(v4) - offsetof(abi::ProfilerEventDescrV4, proxyOp));
  }
  return table<abi::ProfilerV4>(table_)->startEvent(ctx, eHandle, &v4);
}

abi::Result HostProfiler::stopEvent(void* eHandle) {
  return table<abi::ProfilerV5>(table_)->stopEvent(eHandle);
}

abi::Result HostProfiler::recordEventState(void* eHandle, int state,
                                           abi::ProfilerEventStateArgsV5* args) {
  if (version_ == 4 &&
      (state == abi::state::kGroupStartApiStop || state == abi::state::kGroupEndApiStart)) {
    return abi::kSuccess;
  }
  // CE states exist from v6, the kernel-phase stop from v7.
  if ((version_ < 6 && state >= abi::state::kCeCollStart) ||
      (version_ < 7 && state >= abi::state::kKernelPhaseStop)) {
    return abi::kSuccess;
  }
  return table<abi::ProfilerV5>(table_)->recordEventState(eHandle, state, args);
}

abi::Result HostProfiler::finalize(void* ctx) {
  return table<abi::ProfilerV5>(table_)->finalize(ctx);
}

const abi::ProfilerV5* HostProfiler::rawV5() const {
  return version_ == 5 ? table<abi::ProfilerV5>(table_) : nullptr;
}

const abi::ProfilerV7* HostProfiler::rawV7() const {
  return version_ == 7 ? table<abi::ProfilerV7>(table_) : nullptr;
}

// --------------------------------------------------------------------------------- PluginHost

PluginHost::PluginHost() : PluginHost(Options{}) {}
PluginHost::PluginHost(Options options) : options_(std::move(options)) {
  release_ = options_.nccl.empty() ? nullptr : findNcclRelease(options_.nccl);
  if (release_ == nullptr) release_ = &newestNcclRelease();
}

namespace {
// The release's symbol versions, newest first, that the harness drives and the caller allows.
std::vector<int> loadOrder(const std::vector<int>& release, int oldestDriven, int newestAllowed) {
  std::vector<int> out;
  for (int v : release) {
    if (v >= oldestDriven && v <= newestAllowed) out.push_back(v);
  }
  return out;
}
}  // namespace
PluginHost::~PluginHost() { unloadAll(); }

std::string PluginHost::envValue(PluginKind kind) const {
  const std::optional<std::string>& o = kind == PluginKind::kNet     ? options_.netPlugin
                                        : kind == PluginKind::kTuner ? options_.tunerPlugin
                                                                     : options_.profilerPlugin;
  if (o) return *o;
  const char* v = std::getenv(kindEnvVar(kind));
  return v ? v : "";
}

bool PluginHost::openLibrary(PluginKind kind, const std::string& name, OpenedLibrary* out) {
  if (isStaticPluginName(name)) {
    out->handle = dlopen(nullptr, RTLD_NOW | RTLD_LOCAL);
    out->requested = "STATIC_PLUGIN";
    out->path = "(main program)";
    return out->handle != nullptr;
  }
  for (const std::string& candidate : candidateNames(kind, name)) {
    void* h = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      out->handle = h;
      out->requested = candidate;
      out->path = linkMapPath(h);
      return true;
    }
    const char* err = dlerror();
    diagnostics_.push_back(std::string(kindName(kind)) + "/Plugin: " + candidate + ": " +
                           (err ? err : "dlopen failed"));
  }
  return false;
}

bool PluginHost::openViaNetLibrary(OpenedLibrary* out) {
  if (!net_ || net_->lib_.handle == nullptr) return false;
  // NCCL dlopens the net library's name again: same handle, one more reference.
  void* h = dlopen(net_->lib_.requested == "STATIC_PLUGIN" ? nullptr : net_->lib_.requested.c_str(),
                   RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return false;
  out->handle = h;
  out->requested = net_->lib_.requested;
  out->path = linkMapPath(h);
  out->viaNetLibrary = true;
  return true;
}

bool PluginHost::loadNet() {
  if (net_) return true;
  std::string value = envValue(PluginKind::kNet);
  std::vector<std::string> names;
  if (value.empty()) {
    names.push_back("");
  } else if (strcasecmp(value.c_str(), "none") != 0) {
    names = splitNetList(value);
  }
  for (const std::string& name : names) {
    OpenedLibrary lib;
    if (!openLibrary(PluginKind::kNet, name, &lib)) continue;
    for (int v : loadOrder(release_->net, 8, options_.maxNetVersion)) {
      std::string sym = "ncclNetPlugin_v" + std::to_string(v);
      if (void* t = dlsym(lib.handle, sym.c_str())) {
        net_ = std::make_unique<HostNet>();
        net_->version_ = v;
        net_->table_ = t;
        net_->lib_ = lib;
        return true;
      }
    }
    diagnostics_.push_back("net/Plugin: external network plugin " + lib.requested +
                           " is unsupported (no ncclNetPlugin_v" +
                           std::to_string(options_.maxNetVersion) + "..v8 symbol NCCL " +
                           release_->label() + " takes)");
    dlclose(lib.handle);
  }
  return false;
}

bool PluginHost::loadTuner() {
  if (tuner_) return true;
  std::string value = envValue(PluginKind::kTuner);
  if (strcasecmp(value.c_str(), "none") == 0) return false;
  OpenedLibrary lib;
  if (!openLibrary(PluginKind::kTuner, value, &lib) && !openViaNetLibrary(&lib)) return false;
  for (int v : loadOrder(release_->tuner, 3, options_.maxTunerVersion)) {
    std::string sym = "ncclTunerPlugin_v" + std::to_string(v);
    if (void* t = dlsym(lib.handle, sym.c_str())) {
      tuner_ = std::make_unique<HostTuner>();
      tuner_->version_ = v;
      tuner_->table_ = t;
      tuner_->lib_ = lib;
      return true;
    }
  }
  diagnostics_.push_back("tuner/Plugin: external tuner plugin " + lib.requested +
                         " is unsupported");
  dlclose(lib.handle);
  return false;
}

bool PluginHost::loadProfiler() {
  if (profiler_) return true;
  if (release_->profiler.empty()) return false;  // before NCCL 2.23: no profiler plugins
  std::string value = envValue(PluginKind::kProfiler);
  if (strcasecmp(value.c_str(), "none") == 0) return false;
  OpenedLibrary lib;
  if (!openLibrary(PluginKind::kProfiler, value, &lib) && !openViaNetLibrary(&lib)) return false;
  for (int v : loadOrder(release_->profiler, 4, options_.maxProfilerVersion)) {
    std::string sym = "ncclProfiler_v" + std::to_string(v);
    if (void* t = dlsym(lib.handle, sym.c_str())) {
      profiler_ = std::make_unique<HostProfiler>();
      profiler_->version_ = v;
      profiler_->table_ = t;
      profiler_->lib_ = lib;
      return true;
    }
  }
  diagnostics_.push_back("profiler/Plugin: external profiler plugin " + lib.requested +
                         " is unsupported");
  dlclose(lib.handle);
  return false;
}

void PluginHost::unloadAll() {
  // NCCL closes tuner and profiler (commCleanup/commFree) before the net library.
  if (tuner_) dlclose(tuner_->lib_.handle);
  if (profiler_) dlclose(profiler_->lib_.handle);
  if (net_) dlclose(net_->lib_.handle);
  tuner_.reset();
  profiler_.reset();
  net_.reset();
}

// -------------------------------------------------------------------------------- CommSession

CommSession::CommSession(PluginHost& host, Config config)
    : host_(host), config_(std::move(config)) {}

CommSession::~CommSession() { finalize(); }

abi::Result CommSession::init() {
  if (initialised_) return abi::kSuccess;
  initialised_ = true;
  abi::Logger logger = LogCapture::logger();
  if (HostNet* net = host_.net()) {
    abi::NetCommConfigV11 netConfig{-1};
    abi::Result r = net->init(&netCtx_, config_.commId, &netConfig, logger, nullptr);
    int ndev = 0;
    if (r == abi::kSuccess) r = net->devices(&ndev);
    if (r == abi::kSuccess && ndev > 0) {
      netUsable_ = true;
      netDevices_ = ndev;
    } else {
      // NCCL finalizes a plugin whose init or devices failed (or found nothing) and moves on.
      net->finalize(netCtx_);
      netCtx_ = nullptr;
    }
  }
  if (HostProfiler* prof = host_.profiler()) {
    abi::Result r = prof->init(&profilerCtx_, config_.commId, host_.activationMask(),
                               config_.name.empty() ? nullptr : config_.name.c_str(),
                               config_.nNodes, config_.nRanks, config_.rank, logger);
    if (r != abi::kSuccess) profilerCtx_ = nullptr;  // 2.28.9: logged, plugin stays loaded
  }
  if (HostTuner* tuner = host_.tuner()) {
    abi::Result r =
        tuner->init(&tunerCtx_, config_.commId, size_t(config_.nRanks), size_t(config_.nNodes),
                    logger, &config_.nvlDomain, &config_.constants);
    if (r != abi::kSuccess) return r;  // fatal for the communicator in NCCL
  }
  return abi::kSuccess;
}

void CommSession::finalize() {
  if (!initialised_) return;
  initialised_ = false;
  if (tunerCtx_ && host_.tuner()) host_.tuner()->finalize(tunerCtx_);
  if (profilerCtx_ && host_.profiler()) host_.profiler()->finalize(profilerCtx_);
  if (netUsable_ && host_.net()) host_.net()->finalize(netCtx_);
  tunerCtx_ = profilerCtx_ = netCtx_ = nullptr;
  netUsable_ = false;
}

}  // namespace autopilot::host

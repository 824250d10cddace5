// Plugin-host harness: loads plugin libraries exactly as a given NCCL release (2.19 .. 2.32;
// 2.32 by default) does and drives their function tables, so every test and benchmark exercises
// the real .so through its ABI.
//
// What it reproduces (docs/nccl-plugin-abi.md §1):
//  - name resolution: an empty name tries libnccl-<kind>.so; a name tries NAME verbatim, then
//    libnccl-<kind>-NAME.so when NAME has no '/' and is not already a lib*.so file name; any
//    prefix of STATIC_PLUGIN selects the main program; "none" disables the plugin;
//  - NCCL_NET_PLUGIN is a comma-separated list (at most 14 entries);
//  - dlopen with RTLD_NOW | RTLD_LOCAL;
//  - the release's versioned symbols, newest first (nccl_releases.h), among those the harness
//    can drive (net v12..v8, tuner v7..v3, profiler v7..v4);
//  - tuner and profiler fall back to the already-open net library when their own fails;
//  - older ABI versions are driven through adapters that behave like NCCL's own (v10 and older
//    net init once per process, v8 int sizes, v4 profiler event filtering, CE and kernel-phase
//    events and states withheld from profilers older than v6 / v7, ...);
//  - a logger function (LogCapture) in place of ncclDebugLog;
//  - init/finalize in NCCL's order per communicator (CommSession).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/abi/net_abi.h"
#include "common/abi/profiler_abi.h"
#include "common/abi/tuner_abi.h"
#include "common/host/nccl_releases.h"

namespace autopilot::host {

enum class PluginKind { kNet = 0, kTuner = 1, kProfiler = 2 };
const char* kindName(PluginKind kind);    // "net", "tuner", "profiler"
const char* kindEnvVar(PluginKind kind);  // NCCL_NET_PLUGIN, ...

// A library handle opened for one plugin kind (closing it drops one dlopen reference).
struct OpenedLibrary {
  void* handle = nullptr;
  std::string requested;  // the name given to dlopen
  std::string path;       // the file the loader actually mapped (link_map l_name)
  bool viaNetLibrary = false;
};

// The candidate file names NCCL tries for `name` (exposed for tests).
std::vector<std::string> candidateNames(PluginKind kind, const std::string& name);

class HostNet {
 public:
  int version() const { return version_; }
  const char* name() const;
  const OpenedLibrary& library() const { return lib_; }

  // v11-shaped entry points. For v8..v10 these adapt like NCCL's net_v8..v10.cc adapters; v12
  // has v11's table except for the properties and vProps (see the V12 calls below).
  abi::Result init(void** ctx, uint64_t commId, abi::NetCommConfigV11* config, abi::Logger log,
                   abi::ProfilerCallback prof);
  abi::Result finalize(void* ctx);
  abi::Result devices(int* ndev);
  abi::Result getProperties(int dev, abi::NetPropertiesV11* props);
  abi::Result listen(void* ctx, int dev, void* handle, void** listenComm);
  abi::Result connect(void* ctx, int dev, void* handle, void** sendComm);
  abi::Result accept(void* listenComm, void** recvComm);
  abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle);
  abi::Result deregMr(void* comm, void* mhandle);
  abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                    void** request);
  abi::Result irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                    void** phandles, void** request);
  abi::Result iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                     void** request);
  abi::Result test(void* request, int* done, int* sizes);
  abi::Result closeSend(void* comm);
  abi::Result closeRecv(void* comm);
  abi::Result closeListen(void* comm);
  abi::Result irecvConsumed(void* recvComm, int n, void* request);
  bool hasMakeVDevice() const;
  abi::Result makeVDevice(int* d, abi::NetVDevicePropsV11* props);
  abi::Result setNetAttr(void* ctx, abi::NetAttrV11* attr);  // v11+; success otherwise
  // The newest shapes: older versions report railId/planeId undefined and reject more than 4
  // devices per virtual NIC, as their vProps cannot carry them.
  abi::Result getPropertiesV12(int dev, abi::NetPropertiesV12* props);
  abi::Result makeVDeviceV12(int* d, abi::NetVDevicePropsV12* props);

 private:
  friend class PluginHost;
  int version_ = 0;
  const void* table_ = nullptr;
  OpenedLibrary lib_;
  bool legacyInitDone_ = false;
};

class HostTuner {
 public:
  int version() const { return version_; }
  const char* name() const;
  const OpenedLibrary& library() const { return lib_; }
  // v5-shaped; v3/v4 drop commId, nvlDomain and constants like NCCL's adapters. v7 receives
  // v7 constants: rows 0-3 from `constants`, the fifth row from constantsV7Row4 (NCCL's values
  // for the newest GPUs), and rows 0-3 are copied back after init.
  abi::Result init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, abi::Logger log,
                   abi::NvlDomainInfoV5* nvl, abi::TunerConstantsV5* constants);
  // v6+: NCCL 2.30's per-task chunk-size query; older versions leave *chunkSize alone.
  bool hasGetChunkSize() const;
  abi::Result getChunkSize(void* ctx, int collType, size_t nBytes, int algo, int proto,
                           int nChannels, size_t* chunkSize);
  // What the last v7 init saw and left (for tests).
  const abi::TunerConstantsV7& lastConstantsV7() const { return constantsV7_; }
  abi::Result getCollInfo(void* ctx, int collType, size_t nBytes, int numPipeOps, float** costTable,
                          int numAlgo, int numProto, int regBuff, int* nChannels);
  abi::Result finalize(void* ctx);
  // The raw v5 function, for overhead benchmarks that must call exactly what NCCL calls.
  abi::TunerGetCollInfoV5Fn rawGetCollInfoV5() const;
  // The raw getChunkSize pointer (v6+; null where the table has none), for the same benchmarks.
  abi::TunerGetChunkSizeFn rawGetChunkSize() const;

 private:
  friend class PluginHost;
  int version_ = 0;
  const void* table_ = nullptr;
  OpenedLibrary lib_;
  abi::TunerConstantsV7 constantsV7_{};
};

class HostProfiler {
 public:
  int version() const { return version_; }
  const char* name() const;
  const OpenedLibrary& library() const { return lib_; }
  abi::Result init(void** ctx, uint64_t commId, int* mask, const char* commName, int nNodes,
                   int nRanks, int rank, abi::Logger log);
  // Events in the newest (v7) form. For older plugins this filters and converts as NCCL's
  // adapters do: v6 never sees KernelPhase events, v5 neither CE events (*eHandle = NULL);
  // for v4, GroupApi, CollApi, P2pApi and KernelLaunch events are dropped without touching
  // *eHandle, Coll/P2p get the legacy group as parent, and GroupApi states 23/24 are dropped.
  abi::Result startEvent(void* ctx, void** eHandle, abi::ProfilerEventDescrV7* descr);
  // A v5-shaped event (what NCCL 2.28 emits), widened to v7 with no tag.
  abi::Result startEvent(void* ctx, void** eHandle, abi::ProfilerEventDescrV5* descr);
  abi::Result stopEvent(void* eHandle);
  abi::Result recordEventState(void* eHandle, int state, abi::ProfilerEventStateArgsV5* args);
  abi::Result finalize(void* ctx);
  const abi::ProfilerV5* rawV5() const;  // NULL unless version 5
  const abi::ProfilerV7* rawV7() const;  // NULL unless version 7

 private:
  friend class PluginHost;
  int version_ = 0;
  const void* table_ = nullptr;
  OpenedLibrary lib_;
};

class PluginHost {
 public:
  struct Options {
    // Values of NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN / NCCL_PROFILER_PLUGIN; nullopt reads the
    // environment (unset there means the empty name, as in NCCL).
    std::optional<std::string> netPlugin, tunerPlugin, profilerPlugin;
    // The NCCL release whose loader is reproduced ("2.28", "2.31.2", ...); empty: the newest.
    std::string nccl;
    // Newest version symbol to look for; tests lower these to reach older adapters.
    int maxNetVersion = 12;
    int maxTunerVersion = 7;
    int maxProfilerVersion = 7;
  };

  PluginHost();
  explicit PluginHost(Options options);
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  // Each returns false when NCCL would run without that plugin; diagnostics() says why.
  bool loadNet();
  bool loadTuner();
  bool loadProfiler();
  // Closes every library this host opened (ncclClosePluginLib for each kind).
  void unloadAll();

  HostNet* net() { return net_.get(); }
  HostTuner* tuner() { return tuner_.get(); }
  HostProfiler* profiler() { return profiler_.get(); }
  const std::vector<std::string>& diagnostics() const { return diagnostics_; }
  // NCCL's process-global profiler activation mask (one per host object here).
  int* activationMask() { return &activationMask_; }
  // The release reproduced (the newest when Options::nccl names none we know).
  const NcclRelease& release() const { return *release_; }

 private:
  std::string envValue(PluginKind kind) const;
  bool openLibrary(PluginKind kind, const std::string& name, OpenedLibrary* out);
  bool openViaNetLibrary(OpenedLibrary* out);

  Options options_;
  const NcclRelease* release_ = nullptr;
  std::unique_ptr<HostNet> net_;
  std::unique_ptr<HostTuner> tuner_;
  std::unique_ptr<HostProfiler> profiler_;
  std::vector<std::string> diagnostics_;
  int activationMask_ = 0;
};

// One communicator's plugin lifecycle in NCCL 2.28.9's order: net init (commAlloc), profiler
// init (ncclProfilerPluginInit), tuner init (initTransportsRank); teardown: tuner finalize
// (commCleanup), then profiler and net finalize (commFree). Plugins the host did not load are
// skipped.
class CommSession {
 public:
  struct Config {
    uint64_t commId = 0x1234;
    int nRanks = 2;
    int nNodes = 2;
    int rank = 0;
    std::string name;
    abi::NvlDomainInfoV5 nvlDomain{2, 1, 1};
    abi::TunerConstantsV5 constants{};  // what NCCL passes to a v5 tuner (zero unless set)
  };
  CommSession(PluginHost& host, Config config);
  ~CommSession();
  CommSession(const CommSession&) = delete;
  CommSession& operator=(const CommSession&) = delete;

  // Returns the first error NCCL would treat as fatal (tuner init). A failing net init only
  // disables the net plugin, and a failing profiler init only loses profiling, as in NCCL.
  abi::Result init();
  void finalize();

  void* netContext() const { return netCtx_; }
  void* tunerContext() const { return tunerCtx_; }
  void* profilerContext() const { return profilerCtx_; }
  bool netUsable() const { return netUsable_; }
  int netDevices() const { return netDevices_; }
  Config& config() { return config_; }

 private:
  PluginHost& host_;
  Config config_;
  bool initialised_ = false;
  void* netCtx_ = nullptr;
  void* tunerCtx_ = nullptr;
  void* profilerCtx_ = nullptr;
  bool netUsable_ = false;
  int netDevices_ = 0;
};

}  // namespace autopilot::host

// Exported profiler tables v4 to v7 over profiler.h. v7 descriptors pass straight through; v5
// and v6 ones are copied into the v7 form (every union member keeps its leading fields at the
// same offsets; the fields v7 appended are cleared); v4 ones are converted field by field.
#include <cstring>

#include "common/boundary.h"
#include "profiler_plugin/profiler.h"

namespace autopilot::profiler {
namespace {

constexpr unsigned long kFlags = abi::subsys::kProfile;

template <int kVersion>
abi::Result initV5Plus(void** ctx, uint64_t commId, int* mask, const char* commName, int nNodes,
                       int nRanks, int rank, abi::Logger logFn) {
  log::setLogger(logFn);
  if (ctx == nullptr) return abi::kInvalidArgument;
  *ctx = nullptr;
  return guarded("profilerInit", kFlags, [&] {
    ProfilerInitArgs args{kVersion, commId, commName, nNodes, nRanks, rank, mask};
    return init(ctx, args);
  });
}

abi::Result initV4(void** ctx, int* mask, const char* commName, uint64_t commHash, int nNodes,
                   int nRanks, int rank, abi::Logger logFn) {
  log::setLogger(logFn);
  if (ctx == nullptr) return abi::kInvalidArgument;
  *ctx = nullptr;
  return guarded("profilerInitV4", kFlags, [&] {
    ProfilerInitArgs args{4, commHash, commName, nNodes, nRanks, rank, mask};
    return init(ctx, args);
  });
}

abi::Result startEventV7(void* ctx, void** eHandle, abi::ProfilerEventDescrV7* descr) {
  if (eHandle == nullptr) return abi::kSuccess;
  *eHandle = nullptr;
  return guardedNeverFail("profilerStartEvent", kFlags, [&] {
    if (descr != nullptr) startEvent(ctx, eHandle, descr);
  });
}

// v5 and v6 descriptors into the v7 form. Only the bytes of the older descriptor are read; the
// members v7 lengthened get their new fields cleared (the older descriptor's bytes there belong
// to other union members, or are whatever NCCL's stack held).
template <typename Old>
void widen(const Old& in, abi::ProfilerEventDescrV7* out) {
  static_assert(sizeof(Old) <= sizeof(abi::ProfilerEventDescrV7));
  std::memcpy(static_cast<void*>(out), &in, sizeof(Old));
  switch (in.type) {
    case abi::event::kCollApi:
      out->collApi.userTag = 0;
      break;
    case abi::event::kP2pApi:
      out->p2pApi.userTag = 0;
      break;
    case abi::event::kColl:
      out->coll.kernelVariant = nullptr;
      out->coll.isSymColl = false;
      out->coll.userTag = 0;
      break;
    case abi::event::kP2p:
      out->p2p.userTag = 0;
      break;
    case abi::event::kCeColl:
      out->ceColl.userTag = 0;
      break;
    default:
      break;
  }
}

template <typename Old, uint64_t kKnownEvents>
abi::Result startEventOld(void* ctx, void** eHandle, Old* descr) {
  if (eHandle == nullptr) return abi::kSuccess;
  *eHandle = nullptr;
  return guardedNeverFail("profilerStartEvent", kFlags, [&] {
    // An event type this version does not define cannot carry a descriptor of that type.
    if (descr == nullptr || (descr->type & ~kKnownEvents) != 0) return;
    abi::ProfilerEventDescrV7 v7;
    widen(*descr, &v7);
    startEvent(ctx, eHandle, &v7);
  });
}

abi::Result startEventV4(void* ctx, void** eHandle, abi::ProfilerEventDescrV4* descr) {
  if (eHandle == nullptr) return abi::kSuccess;
  *eHandle = nullptr;
  return guardedNeverFail("profilerStartEvent", kFlags, [&] {
    if (descr == nullptr) return;
    abi::ProfilerEventDescrV7 v5;
    std::memset(static_cast<void*>(&v5), 0, sizeof(v5));
    v5.type = descr->type;
    v5.parentObj = descr->parentObj;
    v5.rank = descr->rank;
    if (descr->type == abi::event::kColl) {
      const auto& c = descr->coll;
      v5.coll.seqNumber = c.seqNumber;
      v5.coll.func = c.func;
      v5.coll.sendBuff = c.sendBuff;
      v5.coll.recvBuff = c.recvBuff;
      v5.coll.count = c.count;
      v5.coll.root = c.root;
      v5.coll.datatype = c.datatype;
      v5.coll.nChannels = c.nChannels;
      v5.coll.nWarps = c.nWarps;
      v5.coll.algo = c.algo;
      v5.coll.proto = c.proto;
    } else if (descr->type == abi::event::kP2p) {
      const auto& p = descr->p2p;
      v5.p2p.func = p.func;
      v5.p2p.buff = p.buff;
      v5.p2p.datatype = p.datatype;
      v5.p2p.count = p.count;
      v5.p2p.peer = p.peer;
      v5.p2p.nChannels = p.nChannels;
    } else {
      // proxyOp, proxyStep, kernelCh and netPlugin share offsets and sizes in v4 and v5.
      static_assert(sizeof(descr->proxyOp) == sizeof(v5.proxyOp));
      static_assert(sizeof(descr->kernelCh) == sizeof(v5.kernelCh));
      static_assert(sizeof(descr->netPlugin) == sizeof(v5.netPlugin));
      std::memcpy(&v5.proxyOp, &descr->proxyOp,
                  sizeof(abi::ProfilerEventDescrV4) - offsetof(abi::ProfilerEventDescrV4, proxyOp));
    }
    startEvent(ctx, eHandle, &v5);
  });
}

abi::Result stopEventAny(void* eHandle) {
  return guardedNeverFail("profilerStopEvent", kFlags, [&] { stopEvent(eHandle); });
}

abi::Result recordEventStateAny(void* eHandle, int state, abi::ProfilerEventStateArgsV5* args) {
  return guardedNeverFail("profilerRecordEventState", kFlags,
                          [&] { recordEventState(eHandle, state, args); });
}

abi::Result finalizeAny(void* ctx) {
  return guarded("profilerFinalize", kFlags, [&] { return finalize(ctx); });
}

}  // namespace
}  // namespace autopilot::profiler

using namespace autopilot;

AP_EXPORT_TABLE(abi::ProfilerV7, ncclProfiler_v7) = {"autopilot",
                                                     profiler::initV5Plus<7>,
                                                     profiler::startEventV7,
                                                     profiler::stopEventAny,
                                                     profiler::recordEventStateAny,
                                                     profiler::finalizeAny};
AP_EXPORT_TABLE(abi::ProfilerV6, ncclProfiler_v6) = {
    "autopilot",
    profiler::initV5Plus<6>,
    profiler::startEventOld<abi::ProfilerEventDescrV6, abi::event::kAllV6>,
    profiler::stopEventAny,
    profiler::recordEventStateAny,
    profiler::finalizeAny};
AP_EXPORT_TABLE(abi::ProfilerV5, ncclProfiler_v5) = {
    "autopilot",
    profiler::initV5Plus<5>,
    profiler::startEventOld<abi::ProfilerEventDescrV5, abi::event::kAllV5>,
    profiler::stopEventAny,
    profiler::recordEventStateAny,
    profiler::finalizeAny};
AP_EXPORT_TABLE(abi::ProfilerV4, ncclProfiler_v4) = {"autopilot",
                                                     profiler::initV4,
                                                     profiler::startEventV4,
                                                     profiler::stopEventAny,
                                                     profiler::recordEventStateAny,
                                                     profiler::finalizeAny};

// Exported profiler tables v4 and v5 over profiler.h. v5 descriptors pass straight through;
// v4 descriptors are copied into the v5 form (same union members at the same offsets, minus
// the fields v4 lacks).
#include <cstring>

#include "common/boundary.h"
#include "profiler_plugin/profiler.h"

namespace autopilot::profiler {
namespace {

constexpr unsigned long kFlags = abi::subsys::kProfile;

abi::Result initV5(void** ctx, uint64_t commId, int* mask, const char* commName, int nNodes,
                   int nRanks, int rank, abi::Logger logFn) {
  log::setLogger(logFn);
  if (ctx == nullptr) return abi::kInvalidArgument;
  *ctx = nullptr;
  return guarded("profilerInitV5", kFlags, [&] {
    ProfilerInitArgs args{5, commId, commName, nNodes, nRanks, rank, mask};
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

abi::Result startEventV5(void* ctx, void** eHandle, abi::ProfilerEventDescrV5* descr) {
  if (eHandle == nullptr) return abi::kSuccess;
  *eHandle = nullptr;
  return guardedNeverFail("profilerStartEvent", kFlags, [&] {
    if (descr != nullptr) startEvent(ctx, eHandle, descr);
  });
}

abi::Result startEventV4(void* ctx, void** eHandle, abi::ProfilerEventDescrV4* descr) {
  if (eHandle == nullptr) return abi::kSuccess;
  *eHandle = nullptr;
  return guardedNeverFail("profilerStartEvent", kFlags, [&] {
    if (descr == nullptr) return;
    abi::ProfilerEventDescrV5 v5;
    std::memset(&v5, 0, sizeof(v5));
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

AP_EXPORT_TABLE(abi::ProfilerV5, ncclProfiler_v5) = {"autopilot", profiler::initV5,
                                             profiler::startEventV5, profiler::stopEventAny,
                                             profiler::recordEventStateAny,
                                             profiler::finalizeAny};
AP_EXPORT_TABLE(abi::ProfilerV4, ncclProfiler_v4) = {"autopilot", profiler::initV4,
                                             profiler::startEventV4, profiler::stopEventAny,
                                             profiler::recordEventStateAny,
                                             profiler::finalizeAny};

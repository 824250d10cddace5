// Exported tuner tables v3 to v7: argument reshuffles over tuner.h, nothing more.
#include <cstring>

#include "common/boundary.h"
#include "tuner_plugin/tuner.h"

namespace autopilot::tuner {
namespace {

constexpr unsigned long kFlags = abi::subsys::kTuning;

template <int kVersion>
abi::Result initV5V6(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, abi::Logger logFn,
                     abi::NvlDomainInfoV5* nvl, abi::TunerConstantsV5* constants) {
  log::setLogger(logFn);
  if (ctx == nullptr) return abi::kInvalidArgument;
  *ctx = nullptr;
  return guarded("tunerInitV5", kFlags, [&] {
    TunerInitArgs args;
    args.abiVersion = kVersion;
    args.hasCommId = true;
    args.commId = commId;
    args.nRanks = nRanks;
    args.nNodes = nNodes;
    args.nvlDomain = nvl;
    args.constants = constants;
    return init(ctx, args);
  });
}

// Rows 0-3 of v7's per-compute-capability tables are v5's; the fifth (a newer GPU generation)
// is left as NCCL filled it.
template <typename Dst, typename Src>
void copyConstants(Dst* dst, const Src* src) {
  std::memcpy(dst->baseLatencies, src->baseLatencies, sizeof(dst->baseLatencies));
  std::memcpy(dst->hwLatencies, src->hwLatencies, sizeof(dst->hwLatencies));
  constexpr size_t kRows = sizeof(double) * abi::kNumCompCaps * abi::kNumTuningScales;
  std::memcpy(dst->llMaxBws, src->llMaxBws, kRows);
  std::memcpy(dst->perChMaxRingLL128Bws, src->perChMaxRingLL128Bws, kRows);
  std::memcpy(dst->perChMaxTreeLL128Bws, src->perChMaxTreeLL128Bws, kRows);
  std::memcpy(dst->perChMaxTreeBws, src->perChMaxTreeBws, kRows);
  std::memcpy(dst->perChMaxNVLSTreeBws, src->perChMaxNVLSTreeBws, kRows);
}

abi::Result initV7(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, abi::Logger logFn,
                   abi::NvlDomainInfoV5* nvl, abi::TunerConstantsV7* constants) {
  if (constants == nullptr) return initV5V6<7>(ctx, commId, nRanks, nNodes, logFn, nvl, nullptr);
  abi::TunerConstantsV5 v5;
  copyConstants(&v5, constants);
  abi::Result r = initV5V6<7>(ctx, commId, nRanks, nNodes, logFn, nvl, &v5);
  copyConstants(constants, &v5);
  return r;
}

template <int kVersion>
abi::Result initV3V4(size_t nRanks, size_t nNodes, abi::Logger logFn, void** ctx) {
  log::setLogger(logFn);
  if (ctx == nullptr) return abi::kInvalidArgument;
  *ctx = nullptr;
  return guarded("tunerInit", kFlags, [&] {
    TunerInitArgs args;
    args.abiVersion = kVersion;
    args.nRanks = nRanks;
    args.nNodes = nNodes;
    return init(ctx, args);
  });
}

// NCCL treats an error from getCollInfo as fatal for the collective: always succeed.
abi::Result getCollInfoV5(void* ctx, int collType, size_t nBytes, int numPipeOps, float** costTable,
                          int numAlgo, int numProto, int regBuff, int* nChannels) {
  return guardedNeverFail("tunerGetCollInfo", kFlags, [&] {
    if (ctx == nullptr || costTable == nullptr || nChannels == nullptr) return;
    getCollInfo(ctx, collType, nBytes, numPipeOps, costTable, numAlgo, numProto, regBuff,
                nChannels);
  });
}

abi::Result getCollInfoV3(void* ctx, int collType, size_t nBytes, int numPipeOps, float** costTable,
                          int numAlgo, int numProto, int* nChannels) {
  // v3 has no regBuff; 0 is what a decision that ignores it sees anyway.
  return getCollInfoV5(ctx, collType, nBytes, numPipeOps, costTable, numAlgo, numProto, 0,
                       nChannels);
}

// NCCL 2.30+ calls this per scheduled task; like getCollInfo it must never fail.
abi::Result getChunkSizeAny(void* ctx, int collType, size_t nBytes, int algo, int proto,
                            int nChannels, size_t* chunkSize) {
  return guardedNeverFail("tunerGetChunkSize", kFlags, [&] {
    getChunkSize(ctx, collType, nBytes, algo, proto, nChannels, chunkSize);
  });
}

abi::Result finalizeAny(void* ctx) {
  return guarded("tunerFinalize", kFlags, [&] { return finalize(ctx); });
}

}  // namespace
}  // namespace autopilot::tuner

using namespace autopilot;

AP_EXPORT_TABLE(abi::TunerV7, ncclTunerPlugin_v7) = {
    "autopilot", tuner::initV7, tuner::getCollInfoV5, tuner::finalizeAny, tuner::getChunkSizeAny};
AP_EXPORT_TABLE(abi::TunerV6, ncclTunerPlugin_v6) = {"autopilot", tuner::initV5V6<6>,
                                                     tuner::getCollInfoV5, tuner::finalizeAny,
                                                     tuner::getChunkSizeAny};
AP_EXPORT_TABLE(abi::TunerV5, ncclTunerPlugin_v5) = {"autopilot", tuner::initV5V6<5>,
                                                     tuner::getCollInfoV5, tuner::finalizeAny};
AP_EXPORT_TABLE(abi::TunerV4, ncclTunerPlugin_v4) = {"autopilot", tuner::initV3V4<4>,
                                                     tuner::getCollInfoV5, tuner::finalizeAny};
AP_EXPORT_TABLE(abi::TunerV3, ncclTunerPlugin_v3) = {"autopilot", tuner::initV3V4<3>,
                                                     tuner::getCollInfoV3, tuner::finalizeAny};

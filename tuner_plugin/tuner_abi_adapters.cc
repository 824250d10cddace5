// Exported tuner tables v3, v4 and v5: argument reshuffles over tuner.h, nothing more.
#include "common/boundary.h"
#include "tuner_plugin/tuner.h"

namespace autopilot::tuner {
namespace {

constexpr unsigned long kFlags = abi::subsys::kTuning;

abi::Result initV5(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, abi::Logger logFn,
                   abi::NvlDomainInfoV5* nvl, abi::TunerConstantsV5* constants) {
  log::setLogger(logFn);
  if (ctx == nullptr) return abi::kInvalidArgument;
  *ctx = nullptr;
  return guarded("tunerInitV5", kFlags, [&] {
    TunerInitArgs args;
    args.abiVersion = 5;
    args.hasCommId = true;
    args.commId = commId;
    args.nRanks = nRanks;
    args.nNodes = nNodes;
    args.nvlDomain = nvl;
    args.constants = constants;
    return init(ctx, args);
  });
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
abi::Result getCollInfoV5(void* ctx, int collType, size_t nBytes, int numPipeOps,
                          float** costTable, int numAlgo, int numProto, int regBuff,
                          int* nChannels) {
  return guardedNeverFail("tunerGetCollInfo", kFlags, [&] {
    if (ctx == nullptr || costTable == nullptr || nChannels == nullptr) return;
    getCollInfo(ctx, collType, nBytes, numPipeOps, costTable, numAlgo, numProto, regBuff,
                nChannels);
  });
}

abi::Result getCollInfoV3(void* ctx, int collType, size_t nBytes, int numPipeOps,
                          float** costTable, int numAlgo, int numProto, int* nChannels) {
  // v3 has no regBuff; 0 is what a decision that ignores it sees anyway.
  return getCollInfoV5(ctx, collType, nBytes, numPipeOps, costTable, numAlgo, numProto, 0,
                       nChannels);
}

abi::Result finalizeAny(void* ctx) {
  return guarded("tunerFinalize", kFlags, [&] { return finalize(ctx); });
}

}  // namespace
}  // namespace autopilot::tuner

using namespace autopilot;

AP_EXPORT_TABLE(abi::TunerV5, ncclTunerPlugin_v5) = {"autopilot", tuner::initV5, tuner::getCollInfoV5,
                                             tuner::finalizeAny};
AP_EXPORT_TABLE(abi::TunerV4, ncclTunerPlugin_v4) = {"autopilot", tuner::initV3V4<4>,
                                             tuner::getCollInfoV5, tuner::finalizeAny};
AP_EXPORT_TABLE(abi::TunerV3, ncclTunerPlugin_v3) = {"autopilot", tuner::initV3V4<3>,
                                             tuner::getCollInfoV3, tuner::finalizeAny};

#include "tuner_plugin/tuner.h"

#include <memory>

#include "common/instance.h"
#include "common/log.h"
#include "common/params.h"

namespace autopilot::tuner {
namespace {

params::BoolParam gTunerEnable(
    "NCCL_AUTOPILOT_TUNER_ENABLE", true,
    "Tuner plugin on/off. 0 leaves every NCCL cost table untouched (NCCL's own choice).");

constexpr unsigned long kFlags = abi::subsys::kInit | abi::subsys::kTuning;

struct TunerContext {
  int abiVersion;
  bool hasCommId;
  uint64_t commId;
  size_t nRanks;
  size_t nNodes;
  bool enabled;
};

}  // namespace

abi::Result init(void** ctx, const TunerInitArgs& args) {
  *ctx = nullptr;
  params::logAllOnce();
  auto context = std::make_unique<TunerContext>(TunerContext{
      args.abiVersion, args.hasCommId, args.commId, args.nRanks, args.nNodes,
      gTunerEnable.get()});
  AP_INFO(kFlags, "tuner v%d ready: comm 0x%llx nRanks %zu nNodes %zu%s (instance 0x%llx)",
          args.abiVersion, static_cast<unsigned long long>(args.commId), args.nRanks,
          args.nNodes, context->enabled ? "" : ", disabled by NCCL_AUTOPILOT_TUNER_ENABLE=0",
          static_cast<unsigned long long>(instanceId()));
  *ctx = context.release();
  contextCreated();
  return abi::kSuccess;
}

void getCollInfo(void* ctx, int collType, size_t nBytes, int numPipeOps, float** costTable,
                 int numAlgo, int numProto, int regBuff, int* nChannels) {
  // No learned policy yet: NCCL's own choice stands for every call.
  (void)ctx, (void)collType, (void)nBytes, (void)numPipeOps, (void)costTable, (void)numAlgo,
      (void)numProto, (void)regBuff, (void)nChannels;
}

abi::Result finalize(void* ctx) {
  if (ctx == nullptr) return abi::kSuccess;
  delete static_cast<TunerContext*>(ctx);
  contextDestroyed();
  return abi::kSuccess;
}

}  // namespace autopilot::tuner

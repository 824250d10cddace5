#include "profiler_plugin/profiler.h"

#include <memory>

#include "common/comm_registry.h"
#include "common/instance.h"
#include "common/log.h"
#include "common/params.h"

namespace autopilot::profiler {
namespace {

params::BoolParam gProfilerEnable(
    "NCCL_AUTOPILOT_PROFILER_ENABLE", true,
    "Profiler plugin on/off. 0 requests no events from NCCL (activation mask 0).");

constexpr unsigned long kFlags = abi::subsys::kInit | abi::subsys::kProfile;

struct ProfilerContext {
  uint64_t commId;
  int rank;
  int nRanks;
};

}  // namespace

abi::Result init(void** ctx, const ProfilerInitArgs& args) {
  *ctx = nullptr;
  params::logAllOnce();
  // Nothing is measured yet, so no events are requested. The mask is process-global: a
  // communicator that asks for nothing must not clear bits another one set, so only ever OR in.
  auto context = std::make_unique<ProfilerContext>(
      ProfilerContext{args.commId, args.rank, args.nRanks});
  AP_INFO(kFlags, "profiler v%d ready: comm 0x%llx '%s' rank %d/%d%s (instance 0x%llx)",
          args.abiVersion, static_cast<unsigned long long>(args.commId),
          args.commName ? args.commName : "", args.rank, args.nRanks,
          gProfilerEnable.get() ? "" : ", disabled by NCCL_AUTOPILOT_PROFILER_ENABLE=0",
          static_cast<unsigned long long>(instanceId()));
  comms::CommInfo info;
  info.commId = args.commId;
  info.rank = args.rank;
  info.nRanks = args.nRanks;
  info.nNodes = args.nNodes;
  if (args.commName) info.name = args.commName;
  comms::registerComm(info);
  *ctx = context.release();
  contextCreated();
  return abi::kSuccess;
}

void startEvent(void* ctx, void** eHandle, const abi::ProfilerEventDescrV5* descr) {
  (void)ctx, (void)descr;
  *eHandle = nullptr;
}

void stopEvent(void* eHandle) { (void)eHandle; }

void recordEventState(void* eHandle, int state, const abi::ProfilerEventStateArgsV5* args) {
  (void)eHandle, (void)state, (void)args;
}

abi::Result finalize(void* ctx) {
  if (ctx == nullptr) return abi::kSuccess;
  auto* context = static_cast<ProfilerContext*>(ctx);
  comms::releaseComm(context->commId);
  delete context;
  contextDestroyed();
  return abi::kSuccess;
}

}  // namespace autopilot::profiler

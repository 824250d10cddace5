// Baseline for the overhead benchmarks: a plugin library whose profiler (v5, v7) and tuner (v5, v6)
// do nothing at all. `autopilot profbench` and `autopilot tunerbench` load it through the same
// harness as ours and subtract its cost, so the figures are "ns above an empty plugin".
#include "common/abi/profiler_abi.h"
#include "common/abi/tuner_abi.h"

using namespace autopilot::abi;

namespace {

Result profInit(void** ctx, uint64_t, int*, const char*, int, int, int, Logger) {
  *ctx = nullptr;
  return kSuccess;
}
Result profStart(void*, void** eHandle, ProfilerEventDescrV5*) {
  *eHandle = nullptr;
  return kSuccess;
}
Result profStart7(void*, void** eHandle, ProfilerEventDescrV7*) {
  *eHandle = nullptr;
  return kSuccess;
}
Result profStop(void*) { return kSuccess; }
Result profRecord(void*, int, ProfilerEventStateArgsV5*) { return kSuccess; }
Result profFinalize(void*) { return kSuccess; }

Result tunerInit(void** ctx, uint64_t, size_t, size_t, Logger, NvlDomainInfoV5*,
                 TunerConstantsV5*) {
  *ctx = nullptr;
  return kSuccess;
}
Result tunerGetCollInfo(void*, int, size_t, int, float**, int, int, int, int*) { return kSuccess; }
Result tunerFinalize(void*) { return kSuccess; }
Result tunerGetChunkSize(void*, int, size_t, int, int, int, size_t*) { return kSuccess; }

}  // namespace

AP_EXPORT_TABLE(ProfilerV5, ncclProfiler_v5) = {"empty",  profInit,   profStart,
                                                profStop, profRecord, profFinalize};
AP_EXPORT_TABLE(ProfilerV7, ncclProfiler_v7) = {"empty",  profInit,   profStart7,
                                                profStop, profRecord, profFinalize};
AP_EXPORT_TABLE(TunerV5, ncclTunerPlugin_v5) = {"empty", tunerInit, tunerGetCollInfo,
                                                tunerFinalize};
AP_EXPORT_TABLE(TunerV6, ncclTunerPlugin_v6) = {"empty", tunerInit, tunerGetCollInfo, tunerFinalize,
                                                tunerGetChunkSize};

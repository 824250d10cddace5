// The tuner's one internal interface. Every exported ABI version (v3, v4, v5) is a thin adapter
// in tuner_abi_adapters.cc over these three functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/abi/tuner_abi.h"

namespace autopilot::tuner {

struct TunerInitArgs {
  int abiVersion = 5;
  bool hasCommId = false;  // v3/v4 are not told which communicator they serve
  uint64_t commId = 0;
  size_t nRanks = 0;
  size_t nNodes = 0;
  const abi::NvlDomainInfoV5* nvlDomain = nullptr;  // v5 only
  abi::TunerConstantsV5* constants = nullptr;       // v5 only; NCCL's per-comm copy
};

// Creates the per-communicator context. *ctx is written (possibly NULL) before anything can
// fail, because NCCL treats an init error as fatal for the communicator.
abi::Result init(void** ctx, const TunerInitArgs& args);

// Adjusts NCCL's cost table for one aggregate. Never fails: on any internal problem the table
// and *nChannels are left exactly as NCCL passed them.
void getCollInfo(void* ctx, int collType, size_t nBytes, int numPipeOps, float** costTable,
                 int numAlgo, int numProto, int regBuff, int* nChannels);

abi::Result finalize(void* ctx);

}  // namespace autopilot::tuner

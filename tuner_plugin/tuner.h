// The tuner's one internal interface. Every exported ABI version (v3 to v7) is a thin adapter
// in tuner_abi_adapters.cc over these functions.
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
  // v5+; NCCL's per-comm copy (v7's fifth compute-capability row is not represented: the
  // adapter hands in rows 0-3 and copies them back)
  abi::TunerConstantsV5* constants = nullptr;
};

// Creates the per-communicator context. *ctx is written (possibly NULL) before anything can
// fail, because NCCL treats an init error as fatal for the communicator.
abi::Result init(void** ctx, const TunerInitArgs& args);

// Adjusts NCCL's cost table for one aggregate. Never fails: on any internal problem the table
// and *nChannels are left exactly as NCCL passed them.
void getCollInfo(void* ctx, int collType, size_t nBytes, int numPipeOps, float** costTable,
                 int numAlgo, int numProto, int regBuff, int* nChannels);

// v6+: NCCL's chunk size for one scheduled task, in *chunkSize. Learning a chunk size is not
// done yet, so the value NCCL computed is passed through unchanged (every input is
// bounds-checked first: collType may be any of NCCL 2.29's 15 functions).
void getChunkSize(void* ctx, int collType, size_t nBytes, int algo, int proto, int nChannels,
                  size_t* chunkSize);

abi::Result finalize(void* ctx);

}  // namespace autopilot::tuner

// Tuner plugin ABI, versions 3 to 5 (NCCL 2.20 .. 2.28+). Our declarations, from
// ../shared/docs/nccl-plugin-abi.md §2. The cost table is a contiguous float[7][3] passed as
// float**: index it through costCell(), never as an array of row pointers.
#pragma once

#include "common/abi/nccl_abi.h"

namespace autopilot::abi {

struct NvlDomainInfoV5 {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
};

// Row-major double tables; [4][3] tables are [compCapIdx][scaleIdx].
struct TunerConstantsV5 {
  double baseLatencies[kNumAlgorithms][kNumProtocols];
  double hwLatencies[kNumHwLinks][kNumAlgorithms][kNumProtocols];
  double llMaxBws[kNumCompCaps][kNumTuningScales];
  double perChMaxRingLL128Bws[kNumCompCaps][kNumTuningScales];
  double perChMaxTreeLL128Bws[kNumCompCaps][kNumTuningScales];
  double perChMaxTreeBws[kNumCompCaps][kNumTuningScales];
  double perChMaxNVLSTreeBws[kNumCompCaps][kNumTuningScales];
};

using TunerGetCollInfoV5Fn = Result (*)(void* ctx, int collType, size_t nBytes, int numPipeOps,
                                        float** collCostTable, int numAlgo, int numProto,
                                        int regBuff, int* nChannels);

struct TunerV5 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, Logger logFunction,
                 NvlDomainInfoV5* nvlDomainInfo, TunerConstantsV5* constants);
  TunerGetCollInfoV5Fn getCollInfo;
  Result (*finalize)(void* ctx);
};

struct TunerV4 {
  const char* name;
  Result (*init)(size_t nRanks, size_t nNodes, Logger logFunction, void** ctx);
  TunerGetCollInfoV5Fn getCollInfo;  // identical to v5
  Result (*destroy)(void* ctx);
};

struct TunerV3 {
  const char* name;
  Result (*init)(size_t nRanks, size_t nNodes, Logger logFunction, void** ctx);
  Result (*getCollInfo)(void* ctx, int collType, size_t nBytes, int numPipeOps,
                        float** collCostTable, int numAlgo, int numProto, int* nChannels);
  Result (*destroy)(void* ctx);
};

// The one correct way to reach a cell of NCCL's cost table.
inline float* costCell(float** table, int numProto, int algo, int proto) {
  return reinterpret_cast<float*>(table) + algo * numProto + proto;
}

}  // namespace autopilot::abi

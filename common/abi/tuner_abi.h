// Tuner plugin ABI, versions 3 to 7 (NCCL 2.22 .. 2.32+). Our declarations; the facts are in
// docs/nccl-plugin-abi.md §2. The cost table is a contiguous float[7][3] passed as
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

// v6 (NCCL 2.30.3+): the v5 table plus an optional fifth member. NCCL passes the chunk size it
// computed for one scheduled task in *chunkSize and clamps whatever comes back to its buffers.
using TunerGetChunkSizeFn = Result (*)(void* ctx, int collType, size_t nBytes, int algo, int proto,
                                       int nChannels, size_t* chunkSize);

struct TunerV6 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, Logger logFunction,
                 NvlDomainInfoV5* nvlDomainInfo, TunerConstantsV5* constants);
  TunerGetCollInfoV5Fn getCollInfo;
  Result (*finalize)(void* ctx);
  TunerGetChunkSizeFn getChunkSize;
};

// v7 (NCCL 2.32.6+): the five per-compute-capability tables gain a fifth row; the latency
// tables and the NVL domain info are unchanged.
struct TunerConstantsV7 {
  double baseLatencies[kNumAlgorithms][kNumProtocols];
  double hwLatencies[kNumHwLinks][kNumAlgorithms][kNumProtocols];
  double llMaxBws[kNumCompCapsV7][kNumTuningScales];
  double perChMaxRingLL128Bws[kNumCompCapsV7][kNumTuningScales];
  double perChMaxTreeLL128Bws[kNumCompCapsV7][kNumTuningScales];
  double perChMaxTreeBws[kNumCompCapsV7][kNumTuningScales];
  double perChMaxNVLSTreeBws[kNumCompCapsV7][kNumTuningScales];
};

struct TunerV7 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, Logger logFunction,
                 NvlDomainInfoV5* nvlDomainInfo, TunerConstantsV7* constants);
  TunerGetCollInfoV5Fn getCollInfo;
  Result (*finalize)(void* ctx);
  TunerGetChunkSizeFn getChunkSize;
};

// The one correct way to reach a cell of NCCL's cost table.
inline float* costCell(float** table, int numProto, int algo, int proto) {
  return reinterpret_cast<float*>(table) + algo * numProto + proto;
}

}  // namespace autopilot::abi

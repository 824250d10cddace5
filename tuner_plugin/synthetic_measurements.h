// Test hook (NCCL_AUTOPILOT_TUNER_SYNTHETIC): makes the tuner publish, for every call it sees,
// the measurement NCCL's profiler would publish for the cell NCCL is about to run, from a known
// model (the cost NCCL passed for that cell, times a per-cell factor, times lognormal noise with
// a per-rank seed). The samples go through the measurement bus exactly like the profiler's, so
// multi-process tests exercise the whole learning path (bus, call matching, policy, consensus)
// without a GPU and without depending on the profiler's event replay. Never set it in
// production: the measurements are invented.
//
// Spec: comma-separated key=value: seed=N (mixed with the rank), noise=SIGMA (lognormal, default
// 0.05), scale=CELL:FACTOR[/CELL:FACTOR...] (true time = factor x modelled time; default 1),
// channels=N (the channel count NCCL runs every cell with, reported in each sample; default 0:
// none reported, as a profiler that does not know it), halved=CELL:FACTOR[/...] (time of the
// cell run with fewer channels than NCCL's, relative to the cell at NCCL's count; default 1),
// halfchunk=CELL:FACTOR[/...] (the same for the cell at half NCCL's chunk size; default 1).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tuner_plugin/decision.h"

namespace autopilot::tuner {

class SyntheticMeasurements {
 public:
  static std::unique_ptr<SyntheticMeasurements> fromSpec(const std::string& spec, int rank,
                                                         std::string* error);
  // `original` is NCCL's table as passed (before the tuner's edits); `cell` the one NCCL will
  // run. Allocation-free; called on NCCL's thread.
  // `seqNumber`: the call's ordinal among this communicator's calls of `func`, which is the
  // sequence number NCCL gives a lone collective. `channels`: the count the tuner set (0: NCCL's).
  // `halfChunk`: the call played the cell at half NCCL's chunk size.
  void publish(uint64_t commId, int func, uint64_t seqNumber, uint64_t nBytes,
               const float* original, int cell, int channels = 0, bool halfChunk = false);

 private:
  double uniform();
  uint64_t state_ = 0x9E3779B97F4A7C15ull;
  double noise_ = 0.05;
  double scale_[kNumCells];
  double halved_[kNumCells];
  double halfChunk_[kNumCells];
  int channels_ = 0;
};

}  // namespace autopilot::tuner

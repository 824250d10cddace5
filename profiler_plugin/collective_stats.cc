#include "profiler_plugin/collective_stats.h"

#include <algorithm>

#include "profiler_plugin/nccl_names.h"

namespace autopilot::profiler {

CollectiveStats::CollectiveStats(int nRanks, size_t maxArms, ShiftDetectorConfig detector)
    : nRanks_(nRanks), maxArms_(maxArms), detectorConfig_(detector) {}

bool CollectiveStats::add(int func, int algo, int proto, uint64_t nBytes, uint64_t durationNs,
                          uint64_t atNs, ArmShift* shift) {
  ++samples_;
  ArmKey key;
  key.func = int8_t(func);
  key.algo = int8_t(algo);
  key.proto = int8_t(proto);
  key.bucket = uint8_t(sizeBucket(nBytes));
  auto it = arms_.find(key.packed());
  if (it == arms_.end()) {
    if (arms_.size() >= maxArms_) {
      ++untracked_;
      return false;
    }
    it = arms_.emplace(key.packed(), ArmStats{}).first;
    it->second.key = key;
    it->second.busBwFactor = busBandwidthFactor(func, nRanks_);
    it->second.detector = ShiftDetector(detectorConfig_);
  }
  ArmStats& a = it->second;
  double us = double(durationNs) / 1e3;
  a.minUs = a.count == 0 ? us : std::min(a.minUs, us);
  a.maxUs = a.count == 0 ? us : std::max(a.maxUs, us);
  a.lastUs = us;
  a.sumUs += us;
  a.bytes += nBytes;
  ++a.count;
  // A bucket spans a factor of two in size. Above 64 KiB time grows with size, so the detector
  // sees the duration scaled to the bucket's lower bound: a change in the mix of sizes within
  // a bucket then does not look like a shift. Below, latency dominates and is left as is.
  double value = double(durationNs);
  if (nBytes >= 65536) value *= double(key.bucketBytes()) / double(nBytes);
  Shift s = a.detector.update(value);
  if (!s.fired) return false;
  ++a.shifts;
  a.lastShiftRatio = s.ratio;
  a.lastShiftAtNs = atNs;
  if (shift != nullptr) {
    shift->key = key;
    shift->shift = s;
    shift->atNs = atNs;
  }
  return true;
}

std::vector<const ArmStats*> CollectiveStats::byTotalTime() const {
  std::vector<const ArmStats*> out;
  out.reserve(arms_.size());
  for (const auto& [k, a] : arms_) out.push_back(&a);
  std::sort(out.begin(), out.end(), [](const ArmStats* x, const ArmStats* y) {
    return x->sumUs != y->sumUs ? x->sumUs > y->sumUs : x->key.packed() < y->key.packed();
  });
  return out;
}

}  // namespace autopilot::profiler

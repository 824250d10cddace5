#include "net_plugin/core/rail_striper.h"

#include <algorithm>
#include <cmath>

namespace autopilot::net::core {

RailStriper::RailStriper(const Config& config) : config_(config) { reset(0); }

void RailStriper::reset(int n) {
  n_ = std::clamp(n, 0, kMaxRails);
  for (Rail& r : rails_) {
    r = Rail{};
    r.bandwidth = clampBandwidth(config_.initialBandwidth);
  }
  picks_ = 0;
  nextEqual_ = 0;
  nextTie_ = 0;
}

double RailStriper::clampBandwidth(double bw) const {
  if (!(bw > 0)) bw = config_.minBandwidth;  // also catches NaN
  return std::clamp(bw, config_.minBandwidth, config_.maxBandwidth);
}

void RailStriper::setMode(int rail, RailMode mode) {
  if (rail < 0 || rail >= n_) return;
  rails_[rail].mode = mode;
}

void RailStriper::setBandwidth(int rail, double bytesPerSec) {
  if (rail < 0 || rail >= n_) return;
  Rail& r = rails_[rail];
  r.bandwidth = clampBandwidth(bytesPerSec);
  r.sampleBytes = r.sampleNs = 0;
  r.samples = 0;
  r.outside = r.distinct = false;
}

bool RailStriper::usable(int rail, bool standbyPass) const {
  RailMode m = rails_[rail].mode;
  return standbyPass ? m == RailMode::kStandby : m == RailMode::kActive;
}

bool RailStriper::fits(int rail, uint64_t chunkBytes, uint32_t excludedMask) const {
  if (excludedMask & (1u << rail)) return false;
  const Rail& r = rails_[rail];
  uint64_t window = r.samples == 0 ? std::min(config_.windowBytes, config_.startWindowBytes)
                                   : config_.windowBytes;
  // An empty rail always takes one chunk, however large: otherwise a chunk bigger than the
  // window could never be sent.
  return r.inFlight == 0 || r.inFlight + chunkBytes <= window;
}

double RailStriper::median(bool standbyPass, int* count) const {
  double bw[kMaxRails];
  int n = 0;
  for (int i = 0; i < n_; ++i) {
    if (usable(i, standbyPass)) bw[n++] = rails_[i].bandwidth;
  }
  *count = n;
  if (n == 0) return 0;
  std::nth_element(bw, bw + n / 2, bw + n);
  return bw[n / 2];
}

double RailStriper::refreshBands(uint64_t nowNs, bool standbyPass, int* count) {
  int n = 0;
  double m = median(standbyPass, &n);
  *count = n;
  for (int i = 0; i < n_; ++i) {
    Rail& r = rails_[i];
    if (!usable(i, standbyPass)) continue;
    if (std::abs(r.bandwidth - m) <= config_.equalBand * m) {
      r.outside = r.distinct = false;
      continue;
    }
    if (!r.outside) {
      r.outside = true;
      r.outsideSinceNs = nowNs;
    }
    r.distinct = nowNs - r.outsideSinceNs >= config_.bandHoldNs;
  }
  return m;
}

double RailStriper::effectiveBandwidth(int rail, bool standbyPass) const {
  int n = 0;
  double m = median(standbyPass, &n);
  return effective(rail, m, n);
}

double RailStriper::effective(int rail, double mid, int usableRails) const {
  const Rail& r = rails_[rail];
  // `distinct` is refreshed by pick(); before any pick every measured rail counts as the median.
  return usableRails < 2 || r.samples == 0 || r.distinct ? r.bandwidth : mid;
}

int RailStriper::pick(uint64_t chunkBytes, uint64_t nowNs, uint32_t excludedMask) {
  // Standby rails are a second pass: used only while no active rail is usable at all.
  bool standbyPass = true;
  for (int i = 0; i < n_; ++i) {
    if (usable(i, false)) standbyPass = false;
  }
  ++picks_;
  if (config_.policy == StripingPolicy::kEqualSplit) {
    // Strict rotation: wait for the next rail in turn even if another has room, which is what
    // makes an equal split as slow as its slowest member.
    for (int step = 0; step < n_; ++step) {
      int i = (nextEqual_ + step) % n_;
      if (!usable(i, standbyPass)) continue;
      if (!fits(i, chunkBytes, excludedMask)) return -1;
      nextEqual_ = (i + 1) % n_;
      return i;
    }
    return -1;
  }
  if (config_.probeEvery != 0 && picks_ % config_.probeEvery == 0) {
    int probe = -1;
    for (int i = 0; i < n_; ++i) {
      const Rail& r = rails_[i];
      if (!usable(i, standbyPass) || r.inFlight != 0 || (excludedMask & (1u << i))) continue;
      // The spacing applies only to a rail measured slower than its peers for bandHoldNs: a
      // guess (a re-joined rail starts small) and the first samples of a fresh connection
      // (TCP's slow start) must be measured again soon.
      double idleNeeded = double(config_.probeIdleNs);
      if (r.samples > 0 && r.distinct) {
        const double probeNs =
            double(chunkBytes) * 1e9 / std::max(r.bandwidth, config_.minBandwidth);
        idleNeeded = std::max(idleNeeded, config_.probeSpacing * probeNs);
      }
      if (double(nowNs - r.lastAssignedNs) < idleNeeded) continue;
      if (probe < 0 || r.lastAssignedNs < rails_[probe].lastAssignedNs) probe = i;
    }
    if (probe >= 0) return probe;
  }
  int usableRails = 0;
  const double m = refreshBands(nowNs, standbyPass, &usableRails);
  // Ties are common (a message whose chunks start on idle rails) and must not always go to the
  // lowest index: the scan starts after the rail picked last, so equal rails take turns.
  int best = -1;
  double bestFinish = 0;
  for (int k = 0; k < n_; ++k) {
    int i = (nextTie_ + k) % n_;
    if (!usable(i, standbyPass)) continue;
    const Rail& r = rails_[i];
    double finish = double(r.inFlight + chunkBytes) / effective(i, m, usableRails);
    if (best < 0 || finish < bestFinish) {
      best = i;
      bestFinish = finish;
    }
  }
  // If the rail that would finish first is full, waiting for it beats a slower rail.
  if (best < 0 || !fits(best, chunkBytes, excludedMask)) return -1;
  nextTie_ = (best + 1) % n_;
  return best;
}

void RailStriper::onAssigned(int rail, uint64_t bytes, uint64_t nowNs) {
  if (rail < 0 || rail >= n_) return;
  Rail& r = rails_[rail];
  r.inFlight += bytes;
  r.assignedBytes += bytes;
  r.lastAssignedNs = nowNs;
  if (measurable(bytes)) {
    if (r.measuredInFlight == 0) r.busyMarkNs = nowNs;
    r.measuredInFlight += bytes;
    if (++r.measuredChunks >= 2) r.pipelined = true;
  }
}

void RailStriper::onCompleted(int rail, uint64_t bytes, uint64_t nowNs) {
  if (rail < 0 || rail >= n_) return;
  Rail& r = rails_[rail];
  r.inFlight -= std::min(r.inFlight, bytes);
  if (!measurable(bytes)) return;
  r.measuredInFlight -= std::min(r.measuredInFlight, bytes);
  if (r.measuredChunks > 0) --r.measuredChunks;
  // Throughput while busy: acknowledged bytes over the time the rail held measurable data.
  if (nowNs > r.busyMarkNs) r.sampleNs += nowNs - r.busyMarkNs;
  r.busyMarkNs = nowNs;
  r.sampleBytes += bytes;
  if (r.sampleNs >= config_.sampleMinNs) {
    double sample = clampBandwidth(double(r.sampleBytes) * 1e9 / double(r.sampleNs));
    double alpha = r.samples == 0                                           ? 1.0
                   : (sample > 2 * r.bandwidth || 2 * sample < r.bandwidth) ? config_.fastAlpha
                                                                            : config_.ewmaAlpha;
    if (r.pipelined) {
      r.bandwidth = clampBandwidth(alpha * sample + (1 - alpha) * r.bandwidth);
    } else if (r.samples == 0 || sample > r.bandwidth) {
      // Latency-bound: one chunk at a time measures the path's burst speed (a shaper's bucket,
      // an idle queue), more than the rail sustains. It may lift the rail to its measured
      // peers' level, not above: ratcheted up by bursts, one equal rail would look faster than
      // the others, take more chunks and hold every message back.
      double next = clampBandwidth(alpha * sample + (1 - alpha) * r.bandwidth);
      double peers = measuredPeerMedian(rail);
      if (peers > 0) next = std::min(next, std::max(peers, r.samples == 0 ? 0.0 : r.bandwidth));
      r.bandwidth = clampBandwidth(next);
    }
    r.pipelined = r.measuredChunks >= 2;
    r.sampleBytes = r.sampleNs = 0;
    ++r.samples;
  }
}

double RailStriper::measuredPeerMedian(int rail) const {
  double bw[kMaxRails];
  int n = 0;
  for (int i = 0; i < n_; ++i) {
    if (i != rail && rails_[i].mode == RailMode::kActive && rails_[i].samples > 0) {
      bw[n++] = rails_[i].bandwidth;
    }
  }
  if (n == 0) return 0;
  std::nth_element(bw, bw + n / 2, bw + n);
  return bw[n / 2];
}

void RailStriper::onRailLost(int rail) {
  if (rail < 0 || rail >= n_) return;
  Rail& r = rails_[rail];
  r.inFlight = 0;
  r.measuredInFlight = 0;
  r.measuredChunks = 0;
  r.pipelined = false;
  r.sampleBytes = r.sampleNs = 0;
}

}  // namespace autopilot::net::core

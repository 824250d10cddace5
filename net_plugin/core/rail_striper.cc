#include "net_plugin/core/rail_striper.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace autopilot::net::core {

RailStriper::RailStriper(const Config& config) : config_(config) { reset(0); }

void RailStriper::reset(int n) {
  n_ = std::clamp(n, 0, kMaxRails);
  for (Rail& r : rails_) {
    r = Rail{};
    r.bandwidth = r.sustained = clampBandwidth(config_.initialBandwidth);
    r.burstCredit = double(config_.burstBytes);
  }
  picks_ = 0;
  nextEqual_ = 0;
  nextTie_ = 0;
  lastSticky_ = 0;
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
  r.bandwidth = r.sustained = clampBandwidth(bytesPerSec);
  r.burstCredit = double(config_.burstBytes);
  r.sampleBytes = r.sampleNs = 0;
  r.sampleMinChunk = UINT64_MAX;
  r.samples = r.busySamples = 0;
  r.outside = r.distinct = r.checking = r.provenHeal = false;
  r.closedAtNs = UINT64_MAX;  // a new estimate: nothing to take again
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
  // Also at most windowNs of the rail's measured rate: what a rail holds when its rate drops
  // (a NIC that renegotiates, a congested path) must drain in a bounded time at the new rate.
  if (r.samples != 0 && config_.windowNs != 0) {
    window = std::min(window, uint64_t(r.bandwidth * 1e-9 * double(config_.windowNs)));
  }
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
    const bool outside = std::abs(r.bandwidth - m) > config_.equalBand * m;
    if (outside != r.outside) {
      r.outside = outside;
      r.sideSinceNs = nowNs;
    }
    // Both ways take the hold: one sample must not give a rail measured slow its peers' share
    // back (a shaper's bucket, refilled while the rail was idle, delivers a probe at once).
    // A rail far below the band leaves it sooner: equal rails' noise (2x) does not reach there,
    // and each chunk it takes at its peers' share holds a message back. Not a rail that just
    // (re-)joined: its first samples (TCP's slow start) are as low, and once outside the band
    // it would keep a small share for long.
    const bool farBelow = r.bandwidth < config_.farBelow * m && !settling(r, nowNs);
    const uint64_t hold =
        outside && !r.distinct && farBelow ? config_.farBelowHoldNs : config_.bandHoldNs;
    if (nowNs - r.sideSinceNs >= hold) r.distinct = outside;
    // A check proved the rail healed (it delivered more than any bucket could have saved up):
    // back inside the band, it takes its peers' share at once. The hold is there against one
    // fast sample; a check is many, and held, a healed rail kept the slow rail's margin for
    // another 300 ms (the demo's flapping phase starts with a rail healing from a tenth while
    // another goes down).
    if (r.provenHeal) {
      if (!outside) r.distinct = false;
      r.provenHeal = false;
    }
    r.above = r.bandwidth > m;
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

int RailStriper::pick(uint64_t chunkBytes, uint64_t nowNs, uint32_t excludedMask, bool wholeMessage,
                      bool smallMessage, int* measureRail) {
  if (measureRail != nullptr) *measureRail = -1;
  int measure = -1;  // a slow rail measured by a copy: no candidate for the chunk itself
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
  // A degraded rail whose lone chunk came back fast is being checked (see onCompleted): it
  // takes a chunk whenever it is empty, so that what it delivers soon exceeds what a bucket holds.
  // Not a whole or small message: at a tenth of its peers' rate such a rail holds a 64 KiB
  // message ten times as long as they would (in the demo's degraded phases, the 256 KiB
  // all-reduce, six messages of one chunk each, took 17-47 ms instead of 5-8).
  const bool unhidden = wholeMessage || smallMessage;
  for (int k = 0; k < n_ && !unhidden; ++k) {
    const int i = (nextTie_ + k) % n_;
    const Rail& r = rails_[i];
    if (r.checking && usable(i, standbyPass) && r.inFlight == 0 && !(excludedMask & (1u << i))) {
      if (measureRail == nullptr || !measuredByCopy(i, nowNs)) return i;
      measure = i;
      break;
    }
  }
  if (config_.probeEvery != 0 && measure < 0) {
    const bool turn = picks_ % config_.probeEvery == 0;
    int probe = -1;
    for (int i = 0; i < n_; ++i) {
      const Rail& r = rails_[i];
      if (!usable(i, standbyPass) || r.inFlight != 0 || (excludedMask & (1u << i))) continue;
      // The spacing applies only to a rail measured slower than its peers for bandHoldNs, or
      // judged degraded against its fastest peer (two rails at a tenth of three are the median,
      // inside the band: without this, each was probed every 50 ms, and each probe held a
      // message 21 ms): a guess (a re-joined rail starts small) and the first samples of a
      // fresh connection (TCP's slow start) must be measured again soon.
      const bool spaced = r.samples > 0 && (r.distinct || isSlowRail(i, measuredPeers(i), nowNs));
      const bool aligned = spaced && config_.probeAlign;
      if (!turn && !aligned) continue;
      double idleNeeded = double(config_.probeIdleNs);
      if (spaced) {
        const double probeNs = double(chunkBytes) * 1e9 / r.bandwidth;  // >= minBandwidth
        const double spacing =
            config_.probeSpacing * (unhidden ? config_.wholeMessageSpacing : 1.0);
        idleNeeded = std::max(idleNeeded, spacing * probeNs);
      }
      const uint64_t idle = nowNs - r.lastAssignedNs;
      if (aligned) {
        // In the first quarter of a period (see probeAlign), if the rail has taken nothing for
        // 3/4 of one: probes come a period apart, and a rail that carries its share is not
        // probed.
        const uint64_t period =
            std::bit_ceil(std::max<uint64_t>(4, uint64_t(std::min(idleNeeded, 0x1p62))));
        const uint64_t into = (nowNs + config_.probePhaseNs) % period;
        if (into >= period / 4 || idle < period / 4 * 3) continue;
      } else if (double(idle) < idleNeeded) {
        continue;
      }
      if (probe < 0 || r.lastAssignedNs < rails_[probe].lastAssignedNs) probe = i;
    }
    if (probe >= 0) {
      if (measureRail == nullptr || !measuredByCopy(probe, nowNs)) return probe;
      measure = probe;
    }
  }
  int usableRails = 0;
  const double m = refreshBands(nowNs, standbyPass, &usableRails);
  // A small message stays on the rail the previous small message took (Config::
  // stickyBelowBytes), while that rail is usable, not measured slow and has room.
  const bool sticky = wholeMessage && chunkBytes < config_.stickyBelowBytes;
  const auto candidate = [&](int i) { return i != measure && usable(i, standbyPass); };
  if (sticky && lastSticky_ < n_ && candidate(lastSticky_) &&
      !(rails_[lastSticky_].distinct && rails_[lastSticky_].samples > 0 &&
        rails_[lastSticky_].bandwidth < m) &&
      fits(lastSticky_, chunkBytes, excludedMask)) {
    return lastSticky_;
  }
  // Ties are common (a message whose chunks start on idle rails) and must not always go to the
  // lowest index: the scan starts after the rail picked last, so equal rails take turns. A small
  // message that must move starts the scan at its old rail, which keeps a tie.
  const int first = sticky ? lastSticky_ : nextTie_;
  int best = -1;
  double bestFinish = 0;
  for (int k = 0; k < n_; ++k) {
    int i = (first + k) % n_;
    if (!candidate(i)) continue;
    const Rail& r = rails_[i];
    double finish = double(r.inFlight + chunkBytes) / effective(i, m, usableRails);
    // A chunk on a degraded rail that finishes late holds its whole message back, one on a
    // fast rail that finishes a little late costs little: the degraded rail's prediction (its
    // estimate follows a bursty shaper) must beat the others' by a margin.
    if (r.distinct && r.samples > 0 && r.bandwidth < m) finish *= config_.slowRailMargin;
    if (best < 0 || finish < bestFinish) {
      best = i;
      bestFinish = finish;
    }
  }
  // The slow rail alone is usable: measured by the chunk itself, there is nothing to copy.
  if (best < 0 && measure >= 0) return measure;
  // If the rail that would finish first is full, waiting for it beats a slower rail (and the
  // measurement waits with it).
  if (best < 0 || !fits(best, chunkBytes, excludedMask)) return -1;
  if (sticky) {
    lastSticky_ = best;
  } else {
    nextTie_ = (best + 1) % n_;
  }
  if (measure >= 0) *measureRail = measure;
  return best;
}

void RailStriper::onAssigned(int rail, uint64_t bytes, uint64_t nowNs) {
  if (rail < 0 || rail >= n_) return;
  Rail& r = rails_[rail];
  r.inFlight += bytes;
  r.assignedBytes += bytes;
  r.lastAssignedNs = nowNs;
  if (measurable(bytes)) {
    if (r.measuredInFlight == 0) {
      r.busyMarkNs = nowNs;
      // Idle long enough to save up a measurable chunk's worth of a shaper's tokens at the
      // rail's estimated rate: the sample that starts now may measure that burst.
      if (double(nowNs - r.idleSinceNs) * 1e-9 * r.bandwidth >= double(config_.measureMinBytes))
        r.afterIdle = true;
    }
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
  const bool lone = r.measuredChunks == 1;
  if (r.measuredChunks > 0) --r.measuredChunks;
  if (r.measuredInFlight == 0) r.idleSinceNs = nowNs;
  const uint64_t sinceMarkNs = nowNs > r.busyMarkNs ? nowNs - r.busyMarkNs : 0;
  // Completions reported at one instant are one batch: a poll that found several chunks done,
  // or chunks that shared the rail and finished together. When a sample was taken at this
  // instant, the rest of its batch belongs to it. Carried into the next sample instead, those
  // bytes would count there as moved in no time and lift it far above what the rail carries
  // (twice the line rate, in the simulator, where a message's chunks on one rail finish
  // together). The sample is taken again, from the state it was taken from, with these bytes.
  if (nowNs == r.closedAtNs && sinceMarkNs == 0) {
    const Rail::Estimate& b = r.beforeClose;
    r.bandwidth = b.bandwidth;
    r.sustained = b.sustained;
    r.burstCredit = b.burstCredit;
    r.creditNs = b.creditNs;
    r.sampleBytes = b.sampleBytes + bytes;
    r.sampleNs = b.sampleNs;
    r.sampleMinChunk = std::min(b.sampleMinChunk, bytes);
    r.samples = b.samples;
    r.busySamples = b.busySamples;
    r.firstSampleNs = b.firstSampleNs;
    r.checking = b.checking;
    r.afterIdle = b.afterIdle;
    r.pipelined = b.pipelined;
    r.provenHeal = false;  // decided again with these bytes
    takeSample(rail, nowNs, b.burstSpent, measuredPeers(rail));
    return;
  }
  // The peers are looked at once per chunk at most, and only where they can matter.
  Peers peers;
  bool peersKnown = false;
  auto knownPeers = [&]() -> const Peers& {
    if (!peersKnown) peers = measuredPeers(rail);
    peersKnown = true;
    return peers;
  };
  // A degraded rail whose lone chunk came back fast may have healed, or its shaper may have
  // saved up a burst: it is checked (pick() keeps it busy, one chunk at a time) until a chunk
  // comes back slow or it delivers more than a bucket could hold (takeSample). One chunk decides,
  // not a sample: a probe of a healed rail takes far less than sampleMinNs.
  bool burstSpent = false;
  if (lone) {
    // The rail's own state first: most lone chunks are on rails that cannot be slow.
    const bool slowRail = r.samples > 0 && (r.distinct || !settling(r, nowNs)) &&
                          isSlowRail(rail, knownPeers(), nowNs);
    const bool fast =
        double(bytes) * 1e9 >= config_.slowRailRaise * r.sustained * double(sinceMarkNs);
    // A check that ends with a slow chunk measured a burst: the bucket ran dry.
    burstSpent = r.checking && slowRail && !fast;
    r.checking = slowRail && fast;
  }
  // Throughput while busy: acknowledged bytes over the time the rail held measurable data.
  r.sampleNs += sinceMarkNs;
  r.busyMarkNs = nowNs;
  r.sampleBytes += bytes;
  r.sampleMinChunk = std::min(r.sampleMinChunk, bytes);
  if (r.sampleNs >= config_.sampleMinNs) {
    takeSample(rail, nowNs, burstSpent, knownPeers());
  } else if (burstSpent) {
    // What the burst lifted goes: kept, it would bring the rail's next probe, and the next
    // check with it, sooner than its real rate warrants.
    r.bandwidth = std::min(r.bandwidth, r.sustained);
  }
}

void RailStriper::takeSample(int rail, uint64_t nowNs, bool burstSpent, const Peers& peers) {
  Rail& r = rails_[rail];
  r.beforeClose = {r.bandwidth, r.sustained,      r.burstCredit, r.creditNs,    r.sampleBytes,
                   r.sampleNs,  r.sampleMinChunk, r.samples,     r.busySamples, r.firstSampleNs,
                   r.checking,  r.afterIdle,      r.pipelined,   burstSpent};
  r.closedAtNs = nowNs;
  double sample = clampBandwidth(double(r.sampleBytes) * 1e9 / double(r.sampleNs));
  double alpha = r.samples == 0                                           ? 1.0
                 : (sample > 2 * r.bandwidth || 2 * sample < r.bandwidth) ? config_.fastAlpha
                                                                          : config_.ewmaAlpha;
  double next = alpha * sample + (1 - alpha) * r.bandwidth;
  // Chunks large enough for their latency not to count (loneSampleMinBytes) measure bandwidth
  // one at a time too.
  const bool bandwidthBound =
      config_.loneSampleMinBytes > 0 && r.sampleMinChunk >= config_.loneSampleMinBytes;
  if (!r.pipelined && !bandwidthBound) {
    // Latency-bound: one chunk at a time measures the path's burst speed (a shaper's bucket,
    // an idle queue), more than the rail sustains. It may lift the rail to its measured
    // peers' level, not above: ratcheted up by bursts, one equal rail would look faster than
    // the others, take more chunks and hold every message back. It never lowers it.
    if (r.samples != 0 && sample <= r.bandwidth) next = r.bandwidth;
    if (peers.median > 0) {
      next = std::min(next, std::max(peers.median, r.samples == 0 ? 0.0 : r.bandwidth));
    }
  }
  // A degraded rail (isSlowRail): a sample that one chunk at a time measured, or that began
  // after the rail idled, may be a burst its shaper saved up meanwhile (two chunks fit a 128 KiB
  // bucket as well as one). Such a sample lifts the estimate to slowRailRaise times what the rail
  // sustained at most, as long as a bucket of burstBytes, refilled at that rate, could have
  // delivered what it measured. Once no bucket could (a healed rail keeps delivering fast), the
  // rail is faster now and the estimate follows. A pipelined sample taken while the rail kept
  // busy is never capped: no idle time refilled a bucket, so it measures what the rail
  // sustains.
  const bool trusted = r.pipelined && !r.afterIdle;
  if (!trusted && isSlowRail(rail, peers, nowNs)) {
    // The bucket's tokens: refilled at the sustained rate since the last sample (capped at
    // burstBytes), spent by every byte this sample delivered.
    const double dt = double(nowNs - std::min(nowNs, r.creditNs)) * 1e-9;
    r.burstCredit = std::min(double(config_.burstBytes), r.burstCredit + r.sustained * dt) -
                    double(r.sampleBytes);
    r.creditNs = nowNs;
    if (r.burstCredit >= 0) {
      next = std::min(next, config_.slowRailRaise * r.sustained);
    } else {
      r.provenHeal = r.checking;  // a check that no bucket explains: the rail is faster now
      r.sustained = clampBandwidth(next);
      r.burstCredit = double(config_.burstBytes);
      r.checking = false;
    }
  } else {
    r.checking = false;
    r.sustained = clampBandwidth(next);
    r.burstCredit = double(config_.burstBytes);
    r.creditNs = nowNs;
  }
  r.bandwidth = clampBandwidth(next);
  // Only a pipelined sample drains what a bucket saved up (a probe may leave part of it).
  if (r.pipelined) r.afterIdle = false;
  r.pipelined = r.measuredChunks >= 2;
  r.sampleBytes = r.sampleNs = 0;
  r.sampleMinChunk = UINT64_MAX;
  if (r.samples == 0) r.firstSampleNs = nowNs;
  ++r.samples;
  if (!r.beforeClose.afterIdle) ++r.busySamples;  // (afterIdle as this sample began)
  // What the burst lifted goes (see onCompleted).
  if (burstSpent) r.bandwidth = std::min(r.bandwidth, r.sustained);
}

bool RailStriper::measuredByCopy(int rail, uint64_t nowNs) const {
  const Rail& r = rails_[rail];
  // Not while it settles: a rail that just (re-)joined is measured with the chunks it carries,
  // which also find its rate sooner (pipelined, not one lone copy at a time).
  if (settling(r, nowNs)) return false;
  // Against the lower median of its peers: of two equal rails on a busy host one estimate is
  // often 1.5x the other, and the upper one took a rail at half their rate for a quarter.
  return r.bandwidth < config_.copyProbesBelow * measuredPeers(rail).lowerMedian;
}

bool RailStriper::settling(const Rail& r, uint64_t nowNs) const {
  return r.samples == 0 || nowNs < r.firstSampleNs + config_.settleNs;
}

bool RailStriper::isSlowRail(int rail, const Peers& peers, uint64_t nowNs) const {
  const Rail& r = rails_[rail];
  if (r.samples == 0) return false;
  if (r.distinct && r.bandwidth < peers.median) return true;
  // With two of three rails slow, the slow ones are the median: neither leaves the band, and
  // without this rule a burst lifted one to the fast rail's level, where it counted as the
  // median and gave the other slow rail a full share too. A rail that just (re-)joined is
  // spared: its first samples (TCP's slow start) are low whatever it will sustain, and judged
  // slow, its rising samples would be capped as bursts. Only against a peer measured above the
  // band for the hold, as the fast rail there is: among equal rails of a busy host the fastest
  // estimate is often 1.5x the others for a while (bursts, late acknowledgements), and judged
  // against it an equal rail's fast samples were capped as bursts and its share shrank (the
  // demo's healthy phase ran at 0.62-0.64 Gbit/s, 0.65-0.66 with this condition or with equal
  // split).
  return peers.fastestAboveBand && !settling(r, nowNs) &&
         r.bandwidth < (1 - config_.equalBand) * peers.fastest;
}

RailStriper::Peers RailStriper::measuredPeers(int rail) const {
  double bw[kMaxRails];
  int n = 0;
  Peers p;
  for (int i = 0; i < n_; ++i) {
    if (i != rail && rails_[i].mode == RailMode::kActive && rails_[i].samples > 0) {
      bw[n++] = rails_[i].bandwidth;
      if (rails_[i].bandwidth > p.fastest) {
        p.fastest = rails_[i].bandwidth;
        p.fastestAboveBand = rails_[i].distinct && rails_[i].above;
      }
    }
  }
  if (n == 0) return p;
  std::nth_element(bw, bw + n / 2, bw + n);
  p.median = bw[n / 2];
  // What nth_element left before the median is no larger: the lower median is its largest.
  p.lowerMedian = n % 2 == 1 ? p.median : *std::max_element(bw, bw + n / 2);
  return p;
}

void RailStriper::onWithdrawn(int rail, uint64_t bytes, uint64_t nowNs) {
  if (rail < 0 || rail >= n_) return;
  Rail& r = rails_[rail];
  r.inFlight -= std::min(r.inFlight, bytes);
  if (!measurable(bytes)) return;
  r.measuredInFlight -= std::min(r.measuredInFlight, bytes);
  if (r.measuredChunks > 0) --r.measuredChunks;
  if (r.measuredInFlight == 0) {
    // The time since the last completion was spent holding a chunk never sent: not the
    // rail's speed. It is idle from now on.
    r.busyMarkNs = nowNs;
    r.idleSinceNs = nowNs;
  }
}

void RailStriper::onRailLost(int rail) {
  if (rail < 0 || rail >= n_) return;
  Rail& r = rails_[rail];
  r.inFlight = 0;
  r.measuredInFlight = 0;
  r.measuredChunks = 0;
  r.pipelined = false;
  r.afterIdle = true;
  r.checking = false;
  r.sampleBytes = r.sampleNs = 0;
  r.sampleMinChunk = UINT64_MAX;
  r.closedAtNs = UINT64_MAX;
}

}  // namespace autopilot::net::core

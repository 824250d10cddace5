// RailStriper: which rail carries the next chunk. A pure policy (no sockets, no clock: time is
// an argument), shared by every transport.
//
// Measured mode (default): a chunk goes to the usable rail with the earliest predicted completion,
// (bytes in flight on the rail + chunk) / measured bandwidth; on a degraded rail (below) that
// prediction counts `slowRailMargin` times, since a chunk there that finishes late holds its whole
// message back while one a fast rail finishes a little late costs little (in the demo's degraded
// phase the 4 MiB all-reduce took 104 ms without the margin, 74 ms with it, 72 ms with that rail
// down). Bandwidth is an EWMA of what the rail really delivered while it was busy with measurable
// (large) chunks, clamped to [minBandwidth, maxBandwidth]; a sample more than 2x away from the
// estimate moves it faster (the rail's rate really changed). Until a rail's first measurement (at
// start, or after it re-joined) its estimate is a guess, so it holds at most `startWindowBytes`,
// and the first measurement replaces the guess. A sample taken while the rail never held two
// measurable chunks at once is bounded by latency rather than bandwidth: it may raise the estimate
// but not lower it (otherwise a rail given a small share would measure itself slow and keep its
// small share), and not above the median of the other measured rails (bursts would ratchet it up);
// unless every chunk of it was at least `loneSampleMinBytes`, which RDMA transports set: there a
// large chunk's time is its bytes over the rate, and a job that sends one chunk per rail per step
// would otherwise never see a slow rail.
// On a degraded rail (measured slower than its peers for `bandHoldNs`, or below the band under its
// fastest peer where that peer has been above the band as long: two degraded rails of three are
// the median, inside the band, and their healthy peer is far above it), a fast sample taken
// one chunk at a time, or after the rail idled, may be a burst its shaper saved up meanwhile (a
// token bucket, as cloud NICs and our tc test bed have): it lifts the estimate to `slowRailRaise`
// times what the rail last sustained at most, as long as a bucket of `burstBytes` refilled at that
// rate could explain what the rail delivered. (Lifted to its peers' level by one probe, the demo's
// degraded rail took a full share for the band's hold every few hundred ms, and the ring waited on
// it.) A lone chunk that comes back fast from a degraded rail starts a check: the rail takes a
// chunk whenever it is empty (but not one that is its whole message, which nothing else would
// hide the wait for), one at a time, until a chunk comes back slow (the bucket ran dry: a burst,
// and what the bursts lifted goes) or the rail has delivered more than any such bucket (a heal:
// the estimate follows). For `settleNs` after its first measurement since it (re-)joined, the
// fastest peer does not count (nor does the early exit from the band, below): a fresh connection's
// first samples (TCP's slow start) are low whatever it will sustain. Every `probeEvery`-th pick, a
// usable rail that has been idle for `probeIdleNs` gets the chunk instead, so that idle or slow
// rails stay measured and a healed rail's share can grow again. A probe delays the message it
// carries by its time on that rail, which on a much slower rail is long (a 256 KiB chunk at 25
// Mbit/s: 84 ms, while the message's other chunks took a few), so a rail is probed only after it
// has been idle for `probeSpacing` times the chunk's expected time on it as well: probes then hold
// at most a tenth of the time (a hundredth for a chunk that is its whole message). Only once the
// rail has been measured outside the band (below) for `bandHoldNs`, or is judged degraded against
// its fastest peer (see isSlowRail: two rails at a tenth of three are the median): a guess (a
// re-joined rail starts small) and a fresh connection's first samples (TCP's slow start) must be
// measured again soon. (With the spacing applied to every measured rail, three single demo runs
// gave the healed phase 0.62-0.64 of the rails' capacity, against 0.71 with this condition; within
// the run-to-run noise, not isolated by a unit test.) In the demo's degraded phase (one rail at a
// tenth of its peers' rate) the 4 MiB all-reduce took 187 ms with probes at the plain cadence,
// 83-110 ms with the spacing, 72-76 ms with that rail down. A rail never holds more than
// `windowBytes` (unless it is empty), which keeps the assignment adaptive: chunks are placed as
// acknowledgements free room, with up-to-date estimates.
//
// Estimates within `equalBand` of the rails' median count as the median: on equal rails,
// measurement noise must not skew the split, since a message completes only when its slowest
// chunk does. The noise is large: latency-bound traffic measures burst speed, not the line
// rate, and a loaded host delays acknowledgements. The band therefore matches the degradation
// threshold (a rail below half its peers' median is degraded): a rail outside it (a degraded
// one, a much slower or faster NIC) keeps its own estimate and its own share, once it has been
// outside for `bandHoldNs`, and until it has been back inside as long. The hold matters: a rail
// given a smaller share is measured less often, so one unlucky sample (a receiver that was busy
// computing) would otherwise shrink an equal rail's share for a long time. Below `farBelow` of
// the median, where that noise does not reach, a rail leaves the band after `farBelowHoldNs`
// (unless it is still settling, above): every chunk a rail at a tenth of its peers' rate takes
// at their share holds a message back (in the simulated ring, the first 8 MiB after such a drop
// took 1.5-1.7x what the other rails alone take, against 2.5x with the full hold). A rail whose
// estimate was set (setBandwidth: a re-joined rail starts small) keeps it until its first
// measurement.
//
// Equal-split mode: chunks rotate over the usable rails regardless of bandwidth (what NCCL's
// own multi-NIC merge and aws-ofi-nccl do); kept as a baseline for benchmarks.
//
// Rail modes: kActive rails carry data; kStandby rails (configured weight 0) carry data only
// while no active rail is usable; kDown rails carry nothing.
#pragma once

#include <cstdint>

namespace autopilot::net::core {

enum class RailMode : uint8_t { kDown = 0, kActive = 1, kStandby = 2 };
enum class StripingPolicy : uint8_t { kMeasured = 0, kEqualSplit = 1 };

class RailStriper {
 public:
  static constexpr int kMaxRails = 16;

  struct Config {
    StripingPolicy policy = StripingPolicy::kMeasured;
    double initialBandwidth = 1.25e9;  // bytes/s before the first measurement
    double minBandwidth = 1.0e6;
    double maxBandwidth = 1.0e12;
    double ewmaAlpha = 0.3;                // weight of a new sample
    double fastAlpha = 0.75;               // ... when it is 2x away from the estimate
    uint64_t windowBytes = 4u << 20;       // in-flight cap per rail
    uint64_t windowNs = 50'000'000;        // ... and this long at its measured rate (0: none)
    uint64_t startWindowBytes = 1u << 20;  // ... before the rail's first measurement
    uint64_t measureMinBytes = 64u << 10;  // smaller chunks do not feed the estimate
    uint64_t sampleMinNs = 5'000'000;      // a sample spans at least this much busy time
    uint32_t probeEvery = 32;              // probe cadence, in picks (0: never)
    uint64_t probeIdleNs = 50'000'000;     // a rail idle this long is due for a probe
    double probeSpacing = 10;              // ... and this many times the probe's time on it
    double wholeMessageSpacing = 10;       // ... times this for a chunk that is its whole message
    // A spaced probe (of a rail judged slower than its peers, above) comes in the first quarter
    // of a period, the spacing's idle time rounded up to a power of two of ns, counted from
    // `probePhaseNs` before the clock's zero, and only if the rail took nothing for 3/4 of a
    // period. Every connection that probes such a rail then probes it at about the same
    // instant, whatever rank it runs on, at about the cadence the spacing alone gives. In a ring
    // every step waits for every connection: probes taken independently each hold the whole
    // ring, probes taken together hold it about once (simulated ring of 64 GPUs, one NIC at a
    // tenth: the network phases took 0.398 s with independent probes, 0.331 s aligned, 0.302 s
    // with the NIC down; README, At scale). Powers of two nest, so connections whose estimates
    // round to different periods still meet at the longer one's boundaries.
    bool probeAlign = true;
    uint64_t probePhaseNs = 0;                // the transport sets CLOCK_REALTIME - CLOCK_MONOTONIC
    uint64_t smallMessageBytes = 128u << 10;  // (or of a message under this, see pick())
    double equalBand = 0.5;                   // |bw - median| <= band * median: the median
    uint64_t bandHoldNs = 300'000'000;        // ... and until outside (or back inside) that long
    double farBelow = 0.25;                   // below this fraction of the median ...
    uint64_t farBelowHoldNs = 50'000'000;     // ... a rail leaves the band after this long
    double slowRailMargin = 2;       // a degraded rail's predicted completion counts this much more
    double slowRailRaise = 2;        // a possible burst lifts a slow rail this much at most ...
    uint64_t burstBytes = 1u << 20;  // ... while a bucket this large could explain it
    // For this long after its first sample since it (re-)joined, a rail is not judged against
    // its fastest peer, nor leaves the band early (a fresh connection's first samples are low:
    // TCP's slow start).
    uint64_t settleNs = 300'000'000;
    // A sample whose chunks were all at least this large measures bandwidth even when the rail
    // held them one at a time, and may lower the estimate (0: never). Right where a lone chunk's
    // time is its bytes over the line rate plus a small fixed latency, as on RDMA
    // (kRdmaLoneSampleMinBytes); wrong on TCP, where a rail that idled restarts in slow start.
    uint64_t loneSampleMinBytes = 0;
    // A message of one chunk smaller than this goes where the previous one went while that rail
    // can take it (0: never). Such messages are latency-bound: spreading them gains nothing, and
    // every rail that carries them costs an acknowledgement per pass and a read per pass on
    // both sides. On two loopback rails, a stream of 8 B or 2 KiB messages took a median 13%
    // less time per message this way (with the TCP transport's read pacing, rail_link.h; 8
    // interleaved pairs, from 8% more to 18% less); 32 KiB ones were as fast spread as not,
    // 64 KiB ones faster spread.
    uint64_t stickyBelowBytes = 32u << 10;
    // A settled rail measured below this fraction of its peers' lower median is probed and
    // checked with copies where the caller can send them (pick's measureRail): a probe chunk
    // takes it at least four times as long as a peer, long past the step it belongs to. At half
    // its peers' rate a rail carries a probe chunk in about the time its step takes anyway, as
    // useful work (with copies there too, the demo's half-rate phase ran 3% slower: 0.425
    // Gbit/s against 0.439, medians of four runs; README, the demo, "Probes by copy").
    double copyProbesBelow = 0.25;
  };
  // 1 MiB at 400 Gbit/s takes 21 us on the wire: a few microseconds of completion latency are a
  // small part of it. Used by the ibverbs transport and the simulator's RDMA fabric.
  static constexpr uint64_t kRdmaLoneSampleMinBytes = 1u << 20;

  RailStriper() : RailStriper(Config{}) {}
  explicit RailStriper(const Config& config);

  // Forgets everything and manages `n` rails (<= kMaxRails), all kDown.
  void reset(int n);
  int railCount() const { return n_; }
  const Config& config() const { return config_; }

  void setMode(int rail, RailMode mode);
  RailMode mode(int rail) const { return rails_[rail].mode; }
  // Replaces the estimate (start-up from the nominal speed; a re-joined rail starts small).
  void setBandwidth(int rail, double bytesPerSec);

  // The rail for a chunk of `chunkBytes`, or -1 when the chosen rail is at its window (wait
  // for acknowledgements) or no rail is usable. Rails whose bit is set in `excludedMask` (e.g.
  // their queue is full) are treated as full. `wholeMessage`: the chunk is its message's only
  // one, so the message waits for it wherever it goes, with no other chunk to hide the wait
  // behind: a check never takes it, and a probe of a degraded rail only after
  // `wholeMessageSpacing` times the idle time a probe needs otherwise. `smallMessage`: its
  // message is under `smallMessageBytes`, cut into a few small chunks; it gets the same
  // protection (a few milliseconds of other chunks hide no wait on a slow rail either), but
  // stays a chunk among its message's others for placing. `measureRail`, where given, lets a
  // rail far slower than its peers (copyProbesBelow) be measured by a copy: when its probe or
  // check is due, the chunk's rail is picked as if that rail were not there, and *measureRail
  // names it for a copy of the chunk (-1 otherwise). A caller that can send a chunk twice passes
  // it, so that no message waits for such a measurement. Other rails are probed with the chunk
  // itself (they carry it in about the time its message takes anyway), and so is the slow rail
  // when no other rail is usable.
  int pick(uint64_t chunkBytes, uint64_t nowNs, uint32_t excludedMask = 0,
           bool wholeMessage = false, bool smallMessage = false, int* measureRail = nullptr);

  // Bookkeeping the transport reports back. `measurable` chunks (>= measureMinBytes) feed the
  // bandwidth estimate; the flag must be the same on both calls for one chunk.
  void onAssigned(int rail, uint64_t bytes, uint64_t nowNs);
  void onCompleted(int rail, uint64_t bytes, uint64_t nowNs);
  // The rail's in-flight chunks are gone (they are re-sent elsewhere).
  void onRailLost(int rail);
  // A chunk assigned to the rail was taken back before it was sent (its message completed
  // without it): no longer in flight, and no measurement.
  void onWithdrawn(int rail, uint64_t bytes, uint64_t nowNs);

  double bandwidth(int rail) const { return rails_[rail].bandwidth; }
  // The estimate the split uses (see equalBand).
  double effectiveBandwidth(int rail, bool standbyPass = false) const;
  uint64_t inFlight(int rail) const { return rails_[rail].inFlight; }
  // When a chunk of `bytes` placed on the rail now would land, in ns from now: what the rail
  // holds and the chunk, at the rail's own estimate (not the split's: this is a prediction of
  // time, for the transport's late copies). Estimates never leave [minBandwidth, maxBandwidth].
  double landsInNs(int rail, uint64_t bytes) const {
    return double(rails_[rail].inFlight + bytes) * 1e9 / rails_[rail].bandwidth;
  }
  uint64_t assignedBytes(int rail) const { return rails_[rail].assignedBytes; }
  // Measurements since the estimate was last set (0: still a guess).
  uint64_t samples(int rail) const { return rails_[rail].samples; }
  // ... of which began while the rail was busy: not right after it idled (since its last
  // pipelined sample), when a shaper's bucket may have saved up a burst. The evidence a
  // degradation verdict counts: a connection that sends a few chunks now and then measures only
  // its rails' bursts, which differ from rail to rail with what other connections left in each
  // bucket (in the mistuned demo scenario, samples of 55-150 MB/s on 31 MB/s rails). A rail
  // given one chunk at a time without a pause (a slow rail's small share) still counts.
  uint64_t busySamples(int rail) const { return rails_[rail].busySamples; }
  bool measurable(uint64_t bytes) const { return bytes >= config_.measureMinBytes; }

 private:
  struct Rail {
    RailMode mode = RailMode::kDown;
    double bandwidth = 0;
    uint64_t inFlight = 0;
    uint64_t measuredInFlight = 0;  // bytes of measurable chunks in flight
    uint32_t measuredChunks = 0;    // ... and their number
    bool pipelined = false;         // two or more during the current sample
    uint64_t busyMarkNs = 0;        // start of the busy time not yet accounted
    uint64_t sampleBytes = 0;
    uint64_t sampleNs = 0;
    uint64_t sampleMinChunk = UINT64_MAX;  // the smallest chunk in the sample
    uint64_t lastAssignedNs = 0;
    uint64_t idleSinceNs = 0;  // when the rail last ran out of measurable chunks
    bool afterIdle = true;     // the current sample began after the rail idled (see onAssigned)
    double sustained = 0;      // the estimate as of the last sample no burst could explain
    double burstCredit = 0;    // tokens a bucket refilled at that rate could still hold
    uint64_t creditNs = 0;     // ... as of this time
    bool checking = false;     // a fast lone chunk on a degraded rail: a heal or a burst?
    uint64_t assignedBytes = 0;
    uint64_t samples = 0;
    uint64_t busySamples = 0;
    uint64_t firstSampleNs = 0;  // the first sample since the estimate was set
    bool outside = false;        // the estimate is outside the band (or inside) ...
    uint64_t sideSinceNs = 0;    // ... since then
    bool distinct = false;       // the split uses the rail's own estimate
    bool provenHeal = false;     // a check proved it faster: inside the band without the hold
    bool above = false;          // above the median at the last pick (distinct too: above the band)
    // The last sample, as it stood before it was taken (Estimate), and when: completions
    // reported at that same instant belong to it (see onCompleted).
    uint64_t closedAtNs = UINT64_MAX;
    struct Estimate {
      double bandwidth, sustained, burstCredit;
      uint64_t creditNs, sampleBytes, sampleNs, sampleMinChunk, samples, busySamples, firstSampleNs;
      bool checking, afterIdle, pipelined, burstSpent;
    } beforeClose{};
  };
  bool usable(int rail, bool standbyPass) const;
  double median(bool standbyPass, int* count) const;
  // Updates each usable rail's band state; returns the median (and *count, the usable rails).
  double refreshBands(uint64_t nowNs, bool standbyPass, int* count);
  double effective(int rail, double mid, int usableRails) const;
  bool fits(int rail, uint64_t chunkBytes, uint32_t excludedMask) const;
  double clampBandwidth(double bw) const;
  // The other active rails that have been measured: their median and fastest estimate (0: none).
  struct Peers {
    double median = 0;       // the upper median of an even count
    double lowerMedian = 0;  // ... and the lower one
    double fastest = 0;
    bool fastestAboveBand = false;  // the fastest peer is distinct, above the median
  };
  Peers measuredPeers(int rail) const;
  // A degraded rail: measured below its peers' median for bandHoldNs (`distinct`), or, once
  // settled, below the band under its fastest peer when that peer is itself outside the band,
  // above the median.
  bool isSlowRail(int rail, const Peers& peers, uint64_t nowNs) const;
  // Probed and checked with copies where the caller allows them (Config::copyProbesBelow).
  bool measuredByCopy(int rail, uint64_t nowNs) const;
  // No sample yet since the estimate was set, or the first one came less than settleNs ago.
  bool settling(const Rail& r, uint64_t nowNs) const;
  // Turns the rail's accumulated bytes and busy time into a sample and the estimate (`peers`:
  // measuredPeers(rail), which the caller may already have).
  void takeSample(int rail, uint64_t nowNs, bool burstSpent, const Peers& peers);

  Config config_;
  int n_ = 0;
  Rail rails_[kMaxRails];
  uint64_t picks_ = 0;
  int nextEqual_ = 0;
  int nextTie_ = 0;
  int lastSticky_ = 0;  // the rail of the last small message (stickyBelowBytes)
};

}  // namespace autopilot::net::core

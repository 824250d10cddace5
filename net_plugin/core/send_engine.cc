#include "net_plugin/core/send_engine.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "common/clock.h"
#include "common/human_bytes.h"
#include "common/log.h"
#include "net_plugin/core/engine_timing.h"

namespace autopilot::net::core {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
// A message whose chunks were caught on this many failing rails is not a path problem (a
// receiver that rejects the same bytes every time, a usage error the NIC reports as a path
// error): replaying it again would loop forever.
constexpr uint32_t kMaxFailovers = 16;

std::vector<RailHealth::RailInfo> healthInfos(const std::vector<SendEngine::RailInfo>& rails) {
  std::vector<RailHealth::RailInfo> out;
  for (const auto& r : rails) out.push_back({r.telemetryId, r.name, r.standby});
  return out;
}

}  // namespace

SendEngine::SendEngine(uint32_t magic, uint64_t commId, const char* label, const CommConfig& config,
                       const std::vector<RailInfo>& rails, uint32_t trackerDepth,
                       uint32_t matchWindow)
    : CommBase(magic),
      commId_(commId),
      label_(label),
      config_(config),
      nRails_(int(rails.size())),
      striper_(config_.striper),
      tracker_(nRails_, uint32_t(abi::kNetMaxRequests * config_.maxRecvs), trackerDepth),
      matcher_(matchWindow),
      pool_(uint32_t(abi::kNetMaxRequests * config_.maxRecvs), this) {
  health_.init(commId_, "send", healthInfos(rails), config_.health, monotonicNs());
  std::vector<int> telemetryIds;
  for (const auto& r : rails) telemetryIds.push_back(r.telemetryId);
  metrics_.init(telemetryIds);
  striper_.reset(nRails_);
  for (int r = 0; r < nRails_; ++r) {
    striper_.setBandwidth(r, rails[size_t(r)].nominalBytesPerSec);
    news_[r].start(&RailNews::instance(), rails[size_t(r)].telemetryId);
  }
}

SendEngine::~SendEngine() = default;

std::string SendEngine::railSummary(int r) const {
  char part[160];
  std::snprintf(part, sizeof(part), "%s rail %d %s %s, %.2f Gbit/s (%llu samples), %llu failure%s",
                r ? ";" : "", r, telemetry::railStateName(health_.state(r)),
                humanBytes(striper_.assignedBytes(r)).c_str(), striper_.bandwidth(r) * 8e-9,
                (unsigned long long)striper_.samples(r), (unsigned long long)health_.failures(r),
                health_.failures(r) == 1 ? "" : "s");
  return part;
}

int SendEngine::usableRails() const {
  int n = 0;
  for (int r = 0; r < nRails_; ++r) n += striper_.mode(r) == RailMode::kActive;
  return std::max(n, 1);
}

double SendEngine::medianLiveBandwidth() const {
  double bw[RailStriper::kMaxRails];
  int n = 0;
  for (int r = 0; r < nRails_; ++r) {
    if (health_.live(r)) bw[n++] = striper_.bandwidth(r);
  }
  if (n == 0) return 0;
  std::nth_element(bw, bw + n / 2, bw + n);
  return bw[n / 2];
}

double SendEngine::measuredPeerBandwidth(int r) const {
  double bw[RailStriper::kMaxRails];
  int n = 0;
  for (int q = 0; q < nRails_; ++q) {
    if (q != r && health_.live(q) && striper_.samples(q) > 0) bw[n++] = striper_.bandwidth(q);
  }
  if (n == 0) return striper_.bandwidth(r);
  std::nth_element(bw, bw + n / 2, bw + n);
  return bw[n / 2];
}

double SendEngine::detectorBandwidth(int r) const {
  return striper_.samples(r) > 0 ? striper_.bandwidth(r) : measuredPeerBandwidth(r);
}

bool SendEngine::livenessDue(uint64_t lastPingNs, uint64_t stallStartNs, uint64_t nowNs) const {
  return lastPingNs <= stallStartNs ||
         nowNs - lastPingNs >= config_.health.failure.stallTimeoutNs / 4;
}

// ---------------------------------------------------------------------------- requests

abi::Result SendEngine::postSend(const void* data, size_t size, int tag, SendRequest** request) {
  *request = nullptr;
  if (size > abi::kMaxNetSizeBytes) {
    AP_WARN(kFlags, "isend of %zu bytes: more than the %llu bytes a message may have", size,
            (unsigned long long)abi::kMaxNetSizeBytes);
    return abi::kInvalidArgument;
  }
  // A broken comm still answers isend with success: the error reaches NCCL through test() of
  // the request, as NCCL's own transports report a failed connection.
  SendRequest* q = failed_ != abi::kSuccess ? pool_.take() : pool_.post();
  if (q == nullptr) return abi::kSuccess;  // NULL request: NCCL retries later
  q->state = failed_ != abi::kSuccess ? SendRequest::State::kFailed
                                      : SendRequest::State::kWaitingForReceive;
  q->data = static_cast<const uint8_t*>(data);
  q->size = size;
  q->tag = tag;
  q->failovers = 0;
  q->error = failed_;
  *request = q;
  return abi::kSuccess;
}

bool SendEngine::withdrawIfUnmatched(SendRequest* q) {
  if (q->state != SendRequest::State::kWaitingForReceive) return false;
  q->state = SendRequest::State::kFree;
  pool_.withdrawLast(q);
  return true;
}

void SendEngine::freeRequest(SendRequest* q) {
  if (tracker_.inUse(q->index)) tracker_.release(q->index);
  q->state = SendRequest::State::kFree;
  pool_.release(q);
  if (!pending()) passes_.idle();
}

abi::Result SendEngine::test(SendRequest* q, int* done, int* sizes) {
  *done = 0;
  if (q->state == SendRequest::State::kFree) {
    AP_WARN_ONCE(kFlags, "test() on a send request that is not in flight");
    return abi::kInvalidArgument;
  }
  progress(monotonicNs());
  if (q->state == SendRequest::State::kDone) {
    *done = 1;
    if (sizes) *sizes = int(std::min<uint64_t>(q->size, INT_MAX));
    freeRequest(q);
    return abi::kSuccess;
  }
  if (q->state == SendRequest::State::kFailed || failed_ != abi::kSuccess) {
    // Every pending send fails once the comm is broken; the slot is NCCL's to forget.
    abi::Result e = q->state == SendRequest::State::kFailed ? q->error : failed_;
    freeRequest(q);
    return e;
  }
  return abi::kSuccess;
}

void SendEngine::failComm(abi::Result error, const std::string& reason) {
  if (failed_ != abi::kSuccess) return;
  failed_ = error;
  AP_WARN(kFlags, "comm 0x%llx %s: %s; every pending send fails", (unsigned long long)commId_,
          label_, reason.c_str());
}

void SendEngine::matchRequests() {
  while (pool_.anyWaiting()) {
    SendRequest* q = pool_.firstWaiting();
    ReceiveMatcher::Slot slot;
    ReceiveMatcher::Match m = matcher_.match(q->tag, q->size, &slot);
    // Not announced yet, or the receive next in line has no free buffer with this tag: the
    // send waits, and isend hands NCCL a NULL request (withdrawIfUnmatched). NCCL posts again
    // later, by then perhaps after sends with the tags this receive waits for
    // (docs/net-contract.md).
    if (m == ReceiveMatcher::Match::kWait || m == ReceiveMatcher::Match::kTagMismatch) return;
    pool_.popWaiting();
    if (m != ReceiveMatcher::Match::kMatched) {
      // The peer's buffer for this tag is smaller than the send: NCCL's collectives disagree
      // between the two ranks, a usage error that breaks every later send on this connection.
      q->state = SendRequest::State::kFailed;
      q->error = abi::kInvalidUsage;
      failComm(abi::kInvalidUsage, "a send is larger than the receive buffer posted for it (" +
                                       std::to_string(q->size) + " bytes)");
      return;
    }
    q->recvSeq = slot.seq;
    q->buffer = uint8_t(slot.buffer);
    onMatched(*q, slot);
    q->state = SendRequest::State::kActive;
    tracker_.start(q->index, planChunks(q->size, usableRails(), config_.chunks));
  }
}

void SendEngine::placeChunks(uint64_t nowNs) {
  beforePlacing();
  uint32_t excluded = railsClosedForPlacing();
  for (int r = 0; r < nRails_; ++r) {
    if (tracker_.queueFull(r)) excluded |= 1u << r;
  }
  SendTracker::Entry e;
  while (tracker_.peek(&e)) {
    if (mustWait(e)) return;
    const ChunkPlan& plan = tracker_.plan(e.message);
    const bool whole = plan.count == 1;
    const bool small = plan.totalBytes < config_.striper.smallMessageBytes;
    // A slow rail's probe or check is a copy of the chunk (below), which goes where it would
    // go without the measurement. In a ring every step waits for its slowest chunk: a 64 KiB
    // probe of a rail at a tenth held each 256 KiB step it fell into 21 ms instead of 4 (the
    // demo's degraded phase, 1 MiB collectives alone, ran at 0.37 Gbit/s with such probes and
    // at 0.44 with copies, as with no probe at all).
    int measured = -1;
    const int r = striper_.pick(e.bytes, nowNs, excluded, whole, small,
                                probeCopiesAllowed() ? &measured : nullptr);
    if (r < 0) return;
    // When it should land: the rail's queue and the chunk at the rail's estimate (what
    // placeLateCopies holds the rail to).
    const double dueInNs = striper_.landsInNs(r, e.bytes);
    tracker_.placeNext(r, nowNs, nowNs + uint64_t(std::min(dueInNs, 1e15)));
    striper_.onAssigned(r, e.bytes, nowNs);
    if (e.resend) {
      if (auto* c = metrics_.at(r)) {
        RailMetrics::add(c->retransmittedChunks, 1);
        RailMetrics::add(c->retransmittedBytes, e.bytes);
      }
    }
    if (tracker_.queueFull(r)) excluded |= 1u << r;
    if (measured >= 0 && tracker_.placeCopy(r, tracker_.queued(r) - 1, measured, nowNs)) {
      striper_.onAssigned(measured, e.bytes, nowNs);
      ++probeCopies_;
      if (auto* c = metrics_.at(measured)) RailMetrics::add(c->probeCopyBytes, e.bytes);
      if (tracker_.queueFull(measured)) excluded |= 1u << measured;
    }
  }
  // Nothing waits to be placed: what is left to wait for is the chunks in flight.
  placeLateCopies(nowNs, excluded);
}

void SendEngine::placeLateCopies(uint64_t nowNs, uint32_t excluded) {
  // Without failover (a baseline) a slow or silent rail holds its chunks, copies included.
  if (!lateCopiesAllowed() || !(config_.lateCopyFactor > 0) || !config_.failover) return;
  const double factor = config_.lateCopyFactor;
  const double minNs = double(config_.lateCopyMinNs);
  // A bounded look at each queue, oldest first: the copies a pass can place are few.
  constexpr uint32_t kMaxLooked = 64;
  for (int a = 0; a < nRails_; ++a) {
    const uint32_t n = std::min(tracker_.queued(a), kMaxLooked);
    if (n == 0) continue;
    // The rail works through its queue in order, from its last acknowledgement (or from when
    // its oldest chunk was placed, if later): by its current estimate a chunk lands once the
    // rail has moved it and what is ahead of it.
    const uint64_t base =
        std::max(health_.failure(a).stallStartNs(), tracker_.entry(a, 0).placedNs);
    const double bwA = striper_.bandwidth(a);  // never below minBandwidth
    const bool degraded = health_.state(a) == RailHealth::State::kDegraded;
    // Most passes find nothing to copy, and this scan ran in full on every one of them (0.71%
    // of the CPU samples of the demo's healthy phase, 0.43% with this check). A queue is placed
    // in time order, so its oldest chunk has waited longest and its last lands last: if that
    // wait plus that landing stay within minNs, no chunk of it can have slipped (each may take
    // at least minNs), and on a rail not reported degraded nothing else makes a copy.
    if (!degraded) {
      const double oldestWaitedNs = double(nowNs - std::min(nowNs, tracker_.entry(a, 0).placedNs));
      const double lastLandsInNs =
          std::max(0.0, double(base) + double(tracker_.queuedBytes(a)) * 1e9 / bwA - double(nowNs));
      if (oldestWaitedNs + lastLandsInNs <= minNs) continue;
    }
    uint64_t ahead = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const SendTracker::Entry& e = tracker_.entry(a, i);
      ahead += e.bytes;
      if (e.leftover || e.copy || e.copied) continue;
      // Held to the plan made when the chunk was placed (its rail's queue and the chunk at the
      // rail's estimate then): `factor` times that, and at least minNs, is what it may take.
      // Late: it has waited that long already; then a copy goes if it takes no longer than the
      // chunk has waited (a rail spends on copies at most the time they save, and when every
      // rail is held up alike, a receiver that stopped reading, nothing is copied). Slipped:
      // by the rail's current estimate it will have waited that long when it lands (the
      // rail's rate dropped since: its estimate catches up within a few chunks, while what it
      // holds would keep every message waiting); then, and for any chunk on a rail reported
      // degraded, a copy goes if the chunk would land `factor` times later than the copy (and
      // minNs more). Never merely because another rail would be faster now: the striper chose
      // this rail knowing its estimate, and on equal rails of a busy host such copies cost the
      // demo's healthy phase 3-6% (CPU spent sending bytes twice). The floor is for the same
      // host: a receiver descheduled for 10-20 ms made chunks placed on idle rails look late.
      const double plannedNs = double(e.dueNs - std::min(e.dueNs, e.placedNs));
      const double allowedNs = std::max(minNs, factor * plannedNs);
      const double waitedNs = double(nowNs - std::min(nowNs, e.placedNs));
      const double landsInNs =
          std::max(0.0, double(base) + double(ahead) * 1e9 / bwA - double(nowNs));
      const bool late = waitedNs > allowedNs;
      const bool slipped = waitedNs + landsInNs > allowedNs;  // also when late
      if (!slipped && !degraded) continue;
      // The copy goes where it would land first (that rail's queue at its estimate).
      int best = -1;
      double bestNs = 0;
      for (int b = 0; b < nRails_; ++b) {
        if (b == a || (excluded & (1u << b)) || striper_.mode(b) != RailMode::kActive) continue;
        const double ns = striper_.landsInNs(b, e.bytes);
        if (best < 0 || ns < bestNs) {
          best = b;
          bestNs = ns;
        }
      }
      if (best < 0) break;
      const bool worth = (late && bestNs <= waitedNs) || landsInNs > factor * bestNs + minNs;
      if (!worth) continue;
      const uint64_t bytes = e.bytes;
      if (!tracker_.placeCopy(a, i, best, nowNs)) break;
      striper_.onAssigned(best, bytes, nowNs);
      if (auto* c = metrics_.at(best)) {
        RailMetrics::add(c->retransmittedChunks, 1);
        RailMetrics::add(c->retransmittedBytes, bytes);
      }
      ++lateCopies_;
      if (tracker_.queueFull(best)) excluded |= 1u << best;
    }
  }
}

// ---------------------------------------------------------------------------- failure handling

uint32_t SendEngine::moveChunksOff(int r, bool orderly, uint64_t* bytes, bool* proceed) {
  *bytes = 0;
  *proceed = false;
  if (!config_.failover && !orderly) {
    failComm(abi::kRemoteError, "rail " + std::to_string(r) +
                                    " failed and failover is off "
                                    "(NCCL_AUTOPILOT_NET_FAILOVER=0)");
    return 0;
  }
  // A message counts once per failed rail, however many of its chunks the rail held.
  const uint32_t mark = ++railFailures_;
  for (uint32_t i = 0; i < tracker_.queued(r); ++i) {
    const SendTracker::Entry& e = tracker_.entry(r, i);
    if (e.leftover || e.copy) continue;  // nothing of it is replayed
    SendRequest& q = pool_[e.message];
    if (q.failoverMark == mark) continue;
    q.failoverMark = mark;
    if (++q.failovers == kMaxFailovers) {
      failComm(abi::kInternalError,
               "a send's chunks were caught on " + std::to_string(kMaxFailovers) +
                   " failing rails in a row; giving up rather than replaying forever");
    }
  }
  uint32_t moved = tracker_.railFailed(r, bytes);
  striper_.onRailLost(r);
  striper_.setMode(r, RailMode::kDown);
  *proceed = true;
  return moved;
}

void SendEngine::rejoinRail(int r, uint64_t nowNs, double nominalBytesPerSec) {
  // Start small: a fraction of what the others deliver (measured before this rail counts as
  // live again); measurements grow it from there.
  double peers = medianLiveBandwidth();
  health_.rejoin(r, nowNs);
  striper_.setMode(r, placementMode(r));
  striper_.setBandwidth(r, peers > 0 ? peers * config_.rejoinShare : nominalBytesPerSec);
}

RailMode SendEngine::placementMode(int r) const {
  RailMode m = health_.mode(r);
  return m == RailMode::kActive && suspectSinceNs_[r] != 0 ? RailMode::kStandby : m;
}

void SendEngine::followRailNews(uint64_t nowNs) {
  for (int r = 0; r < nRails_; ++r) {
    uint64_t failedAt = 0;
    bool failedElsewhere = news_[r].failedSinceLook(&failedAt);
    if (news_[r].rejoinedSinceLook() && !health_.live(r)) health_.failback(r).retryNow(nowNs);
    if (!health_.live(r) || !config_.failover) {
      suspectSinceNs_[r] = 0;
      continue;
    }
    // This host's own link of the rail is down: evidence for every connection over it, idle
    // ones included (they would otherwise keep the rail through the outage, suspect but never
    // failed, and fail it after the repair: a failover counted while every rail is up).
    if (failedElsewhere && failIfLocalLinkDown(r, nowNs)) {
      suspectSinceNs_[r] = 0;
      continue;
    }
    FailureDetector& fd = health_.failure(r);
    // Evidence here since the other connection's verdict: the rail works for this comm.
    if (failedElsewhere && suspectSinceNs_[r] == 0 && fd.lastEvidenceNs() <= failedAt) {
      suspectSinceNs_[r] = nowNs;
      peerSeenNs_[r] = 0;
      striper_.setMode(r, placementMode(r));
      pingRail(r, nowNs);
      AP_INFO(kFlags,
              "comm 0x%llx %s rail %d (%s): another connection of this process found it "
              "dead; no new data on it here until it answers",
              (unsigned long long)commId_, label_, r, health_.info(r).name.c_str());
    }
    if (suspectSinceNs_[r] == 0) continue;
    uint64_t waited = nowNs - suspectSinceNs_[r];
    if (fd.lastEvidenceNs() > suspectSinceNs_[r]) {
      suspectSinceNs_[r] = 0;
      striper_.setMode(r, placementMode(r));
      AP_INFO(kFlags,
              "comm 0x%llx %s rail %d (%s): it answered here after %llu ms; back to its "
              "share",
              (unsigned long long)commId_, label_, r, health_.info(r).name.c_str(),
              (unsigned long long)(waited / 1000000));
      continue;
    }
    // Silence proves something only while the peer answers elsewhere (a peer with nothing
    // posted answers nowhere); from then on the rail gets the detector's whole allowance.
    if (peerSeenNs_[r] == 0) {
      for (int q = 0; q < nRails_; ++q) {
        if (q != r && health_.live(q) && health_.failure(q).lastEvidenceNs() > suspectSinceNs_[r]) {
          peerSeenNs_[r] = nowNs;
        }
      }
    }
    if (peerSeenNs_[r] != 0 &&
        nowNs - peerSeenNs_[r] >= fd.timeoutNs(tracker_.queuedBytes(r), detectorBandwidth(r))) {
      suspectSinceNs_[r] = 0;
      char why[192];
      std::snprintf(why, sizeof(why),
                    "another connection of this process found it dead, and it answered nothing "
                    "here for %llu ms while the peer answered on other rails",
                    (unsigned long long)(waited / 1000000));
      failRailFor(r, nowNs, why);
    }
  }
}

void SendEngine::evaluateHealth(uint64_t nowNs) {
  if (nowNs >= nextEvaluateNs_) {
    nextEvaluateNs_ = nowNs + kEvaluateNs;
    double bw[RailStriper::kMaxRails];
    uint64_t samples[RailStriper::kMaxRails];
    for (int r = 0; r < nRails_; ++r) {
      bw[r] = striper_.bandwidth(r);
      samples[r] = striper_.busySamples(r);
    }
    health_.evaluate(nowNs, bw, samples);
    for (int r = 0; r < nRails_; ++r) striper_.setMode(r, placementMode(r));
    metrics_.publish(nowNs, striper_);
  }
  uint64_t noRailNs = health_.noLiveRailForNs(nowNs);
  if (noRailNs != 0 && noRailNs >= config_.peerTimeoutNs && pending()) {
    failComm(abi::kRemoteError, "no rail left for " + std::to_string(noRailNs / 1000000) + " ms");
  }
}

}  // namespace autopilot::net::core

// The send comm's failure handling, beside its hot path (send_comm.cc): liveness probes, failing
// a rail, re-creating its queue pair through the receiver, the probe that lets it re-join, and
// the health check that decides them.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "common/clock.h"
#include "common/human_bytes.h"
#include "common/log.h"
#include "net_plugin/transport/ibverbs/completion.h"
#include "net_plugin/transport/ibverbs/ib_config.h"
#include "net_plugin/transport/ibverbs/send_comm.h"

namespace autopilot::net::ib {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;

}  // namespace

void SendComm::failRail(int r, uint64_t nowNs, const std::string& reason, bool notifyPeer) {
  Rail& rail = rails_[r];
  if (!health_.fail(r, nowNs, reason)) return;
  // Destroying the QP stops the NIC retransmitting its writes; one already in the fabric can
  // still land until the receiver destroys its half: the fence below.
  rail.qp.reset();
  rail.livenessOutstanding = false;
  rail.failback = Failback::kIdle;
  if (notifyPeer) announceDown(r, rail.generation);
  uint32_t held = tracker_.queued(r);
  if (held == 0 || !ibConfig().fence || !config_.failover) {
    // Nothing at stake, the fence is off, or failover is off (the comm fails at once).
    rail.fenceGen = rail.generation;
    rail.fenceSinceNs = nowNs;
    AP_INFO(kFlags, "comm 0x%llx ib send: rail %d failed at monotonic %.6f s",
            (unsigned long long)commId_, r, double(nowNs) * 1e-9);
    resolveFence(r, nowNs, false, 0);
    return;
  }
  rail.fenceGen = rail.generation;
  rail.fenceSinceNs = nowNs;
  rail.fenceWindowEndNs = nowNs + retryWindowNs();
  rail.fenceGiveUpNs = nowNs + std::max(retryWindowNs(), config_.peerTimeoutNs);
  // The monotonic time lets tests and operators line the failover up with external events.
  AP_INFO(kFlags,
          "comm 0x%llx ib send: rail %d failed at monotonic %.6f s; %u unacknowledged chunk%s "
          "(%s) wait until the receiver confirms that nothing more lands through the rail "
          "(at most %llu ms, %llu while the control connection is open)",
          (unsigned long long)commId_, r, double(nowNs) * 1e-9, held, held == 1 ? "" : "s",
          humanBytes(tracker_.queuedBytes(r)).c_str(),
          (unsigned long long)((rail.fenceWindowEndNs - nowNs) / 1000000),
          (unsigned long long)((rail.fenceGiveUpNs - nowNs) / 1000000));
}

void SendComm::announceDown(int r, uint32_t gen) {
  Rail& rail = rails_[r];
  if (rail.downSentGen >= gen) return;
  rail.downSentGen = gen;
  bool current = gen == rail.generation;
  control_->sendRailDown(connectionId_, r, gen, current ? rail.writesPosted : 0,
                         current ? rail.writesAcked : 0);
}

void SendComm::peerDown(const wire::ControlMessage& m, uint64_t nowNs) {
  if (m.rail >= nRails_) return;
  int r = m.rail;
  Rail& rail = rails_[r];
  if (m.generation != rail.generation) return;  // an older QP: its fence is long resolved
  if (health_.live(r)) {
    failRail(r, nowNs, "the receiver gave the rail up");
  } else if (rail.failback != Failback::kIdle) {
    abandonReplace(r, nowNs, "the receiver gave the new queue pair up", true);
  }
  announceDown(r, m.generation);  // the answer, when this side had not announced it yet
  if (rail.fenceGen == m.generation) resolveFence(r, nowNs, true, m.writesLanded);
}

void SendComm::delivered(int r, const core::SendTracker::Entry& e) {
  if (auto* m = metrics_.at(r)) {
    core::RailMetrics::add(m->chunksSent, 1);
    core::RailMetrics::add(m->bytesSent, e.bytes);
  }
  if (tracker_.done(e.message)) pool_[e.message].state = SendRequest::State::kDone;
}

void SendComm::resolveFence(int r, uint64_t nowNs, bool known, uint32_t landed) {
  Rail& rail = rails_[r];
  if (rail.fenceGen == 0) return;
  const uint32_t gen = rail.fenceGen;
  rail.fenceGen = 0;
  const uint32_t held = tracker_.queued(r);
  const uint32_t posted = tracker_.posted(r);
  // The QP's writes landed in posting order: after the `writesAcked` this side saw complete,
  // the next `landed - writesAcked` are the oldest posted entries of the rail's queue.
  uint32_t alreadyThere = 0;
  if (known && held > 0) {
    if (landed >= rail.writesAcked && landed - rail.writesAcked <= posted) {
      alreadyThere = landed - rail.writesAcked;
    } else {
      AP_WARN(kFlags,
              "comm 0x%llx ib send rail %d: the receiver counts %u writes landed through "
              "generation %u, but %u were posted and %u completed here; replaying all",
              (unsigned long long)commId_, r, landed, gen, rail.writesPosted, rail.writesAcked);
      known = false;
    }
  }
  if (alreadyThere > 0) {
    tracker_.acknowledge(r, alreadyThere,
                         [&](const core::SendTracker::Entry& e) { delivered(r, e); });
  }
  uint64_t bytes = 0;
  bool proceed = false;
  uint32_t moved = moveChunksOff(r, false, &bytes, &proceed);
  if (!proceed) return;
  if (moved > 0) {
    // Without the receiver's count a replayed chunk may duplicate one that landed.
    if (!known) replayGuard_ = true;
    if (replayFailedNs_ == 0) {
      replayFailedNs_ = rail.fenceSinceNs;
      replayFailedRail_ = r;
    }
  }
  if (held == 0) return;
  if (ibConfig().fence) {
    (known ? fencesConfirmed_ : fencesWaitedOut_)++;
    fencedLanded_ += alreadyThere;
  }
  double waitedMs = double(nowNs - rail.fenceSinceNs) * 1e-6;
  if (!ibConfig().fence) {
    AP_INFO(kFlags,
            "comm 0x%llx ib send: rail %d: replaying %u unacknowledged chunk%s (%s) on the other "
            "rails at once (NCCL_AUTOPILOT_IB_FENCE=0: a write of the failed rail may still land)",
            (unsigned long long)commId_, r, moved, moved == 1 ? "" : "s",
            humanBytes(bytes).c_str());
  } else if (known) {
    AP_INFO(kFlags,
            "comm 0x%llx ib send: rail %d fenced %.1f ms after it failed: the receiver's queue "
            "pair of generation %u is destroyed; of %u unacknowledged chunks %u had landed "
            "there; replaying %u (%s) on the other rails",
            (unsigned long long)commId_, r, waitedMs, gen, held, alreadyThere, moved,
            humanBytes(bytes).c_str());
  } else {
    AP_INFO(kFlags,
            "comm 0x%llx ib send: rail %d: no word from the receiver %.1f ms after it failed "
            "(the NIC's retry window has passed, so no write of generation %u can land any "
            "more); replaying all %u unacknowledged chunk%s (%s) on the other rails",
            (unsigned long long)commId_, r, waitedMs, gen, moved, moved == 1 ? "" : "s",
            humanBytes(bytes).c_str());
  }
}

bool SendComm::fencePending() const {
  for (int r = 0; r < nRails_; ++r) {
    if (rails_[r].fenceGen != 0) return true;
  }
  return false;
}

void SendComm::requestLiveness(int r, uint64_t nowNs) {
  // Idle rails: one carrying data shows the peer's life through its own completions.
  pingIdleRails(
      r, nowNs, [&](int q) { return tracker_.queued(q) == 0; },
      [&](int q) { return rails_[q].livenessSentNs; }, [&](int q) { pingRail(q, nowNs); });
}

// A small RDMA write to the receiver's probe area; one at a time per rail.
void SendComm::pingRail(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  if (!rail.qp || rail.livenessOutstanding) return;
  if (rail.qp->postWrite(workId(Work::kLiveness), area_->data() + kProbeSourceAt, 8,
                         area_->memory().lkey[r], probeAddress_, rail.probeKey) == 0) {
    rail.livenessOutstanding = true;
    rail.livenessSentNs = nowNs;
  }
}

void SendComm::startReplace(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  core::FailbackScheduler& fb = health_.failback(r);
  fb.onAttemptStarted();
  rail.attempts++;
  std::string error;
  if (!control_->up()) {
    fb.onAttemptFailed(nowNs);
    return;
  }
  auto qp = std::make_unique<RailQp>();
  if (!qp->create(rail.global, {kSendDepth, 0}, &error)) {
    fb.onAttemptFailed(nowNs);
    AP_INFO(kFlags, "comm 0x%llx ib send rail %d: re-creation attempt %llu failed: %s",
            (unsigned long long)commId_, r, (unsigned long long)rail.attempts, error.c_str());
    return;
  }
  wire::ControlMessage m;
  m.type = wire::ControlType::kReplace;
  m.connectionId = connectionId_;
  m.rail = uint8_t(r);
  m.generation = rail.generation + 1;
  m.endpoints[0] = qp->endpoint(area_->memory().rkey[r]);
  if (!control_->send(m)) {
    fb.onAttemptFailed(nowNs);
    return;
  }
  rail.generation++;
  rail.writesPosted = 0;
  rail.writesAcked = 0;
  rail.qp = std::move(qp);
  rail.failback = Failback::kAwaitingPeer;
  rail.attemptDeadlineNs = nowNs + config_.probeTimeoutNs;
}

void SendComm::replaced(const wire::ControlMessage& m, uint64_t nowNs) {
  if (m.rail >= nRails_) return;
  int r = m.rail;
  Rail& rail = rails_[r];
  if (m.generation != rail.generation || rail.failback != Failback::kAwaitingPeer) return;
  if (m.status != wire::ControlStatus::kOk) {
    abandonReplace(r, nowNs, std::string("the receiver: ") + wire::controlStatusText(m.status),
                   false);
    return;
  }
  std::string error;
  if (!rail.qp->connect(m.endpoints[0], trafficClass_, &error)) {
    abandonReplace(r, nowNs, error, true);
    return;
  }
  // The rail re-joins only when a write crosses it end to end.
  rail.probeKey = m.endpoints[0].rkey;
  if (rail.qp->postWrite(workId(Work::kProbe), area_->data() + kProbeSourceAt, 8,
                         area_->memory().lkey[r], probeAddress_, rail.probeKey) != 0) {
    abandonReplace(r, nowNs, "the probe could not be posted", true);
    return;
  }
  rail.failback = Failback::kProbing;
}

void SendComm::abandonReplace(int r, uint64_t nowNs, const std::string& why, bool notifyPeer) {
  Rail& rail = rails_[r];
  if (rail.failback == Failback::kIdle) return;
  rail.qp.reset();
  rail.failback = Failback::kIdle;
  health_.failback(r).onAttemptFailed(nowNs);
  if (notifyPeer) announceDown(r, rail.generation);
  // Attempts repeat for as long as the comm lives: log the 1st, 2nd, 4th, 8th, ...
  if ((rail.attempts & (rail.attempts - 1)) == 0) {
    AP_INFO(kFlags,
            "comm 0x%llx ib send rail %d: re-creation attempt %llu failed: %s; next in "
            "%llu ms",
            (unsigned long long)commId_, r, (unsigned long long)rail.attempts, why.c_str(),
            (unsigned long long)(health_.failback(r).backoffNs() / 1000000));
  }
}

void SendComm::rejoin(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  if (rail.failback != Failback::kProbing) return;
  rail.failback = Failback::kIdle;
  rail.port.catchUp();
  rejoinRail(r, nowNs, rail.nominalBytesPerSec);
}

void SendComm::checkHealth(uint64_t nowNs) {
  auto& events = IbRails::instance().events();
  for (int r = 0; r < nRails_; ++r) {
    Rail& rail = rails_[r];
    if (rail.port.resetSinceLook() && health_.live(r)) {
      failRail(r, nowNs, "SIMULATED queue pair reset", false);  // the peer is not told
      continue;
    }
    if (rail.port.upSinceLook()) {
      health_.failback(r).expedite(nowNs);  // the link is back: try now, not at the backoff
    }
    if (!health_.live(r)) {
      if (rail.fenceGen != 0) {
        // The failed QP's chunks are still in the rail's queue: no new QP before they leave.
        // Past the retry window nothing of the QP can land; the receiver's answer (which
        // spares duplicates) is still awaited while it can come.
        bool open = control_->up() && control_->closedForNs(nowNs) == 0;
        if (nowNs >= rail.fenceGiveUpNs || (nowNs >= rail.fenceWindowEndNs && !open)) {
          resolveFence(r, nowNs, false, 0);
        }
        continue;
      }
      if (rail.failback != Failback::kIdle) {
        if (nowNs >= rail.attemptDeadlineNs) {
          abandonReplace(r, nowNs,
                         rail.failback == Failback::kProbing ? "the probe write did not complete"
                                                             : "no answer from the receiver",
                         true);
        }
      } else if (health_.failback(r).due(nowNs)) {
        if (events.active(rail.global)) {
          startReplace(r, nowNs);
        } else {
          health_.failback(r).onAttemptStarted();  // the port is down: nothing to try yet
          health_.failback(r).onAttemptFailed(nowNs);
        }
      }
      continue;
    }
    if (rail.port.downSinceLook()) {
      failRail(r, nowNs, "port down (asynchronous event)");
      continue;
    }
    // Without failover (the baseline mode) nothing is declared dead from silence: like a
    // transport without failure detection, a dead path stalls until the NIC reports it.
    if (!config_.failover) continue;
    core::FailureDetector& fd = health_.failure(r);
    bool outstanding = tracker_.queued(r) > 0;
    fd.setOutstanding(outstanding, nowNs);
    if (!outstanding) continue;
    uint64_t held = tracker_.queuedBytes(r);
    double bw = detectorBandwidth(r);
    if (!fd.failed(nowNs, held, bw)) continue;
    if (!health_.stallBlamesRail(r, nowNs)) {
      requestLiveness(r, nowNs);
      continue;
    }
    char why[192];
    std::snprintf(why, sizeof(why),
                  "no completion for %llu ms while holding %s in %u chunks, %u posted (allowed "
                  "%llu ms at %.2f Gbit/s)",
                  (unsigned long long)(fd.stalledForNs(nowNs) / 1000000), humanBytes(held).c_str(),
                  tracker_.queued(r), tracker_.posted(r),
                  (unsigned long long)(fd.timeoutNs(held, bw) / 1000000), bw * 8e-9);
    failRail(r, nowNs, why);
  }
  uint64_t closedNs = control_->closedForNs(nowNs);
  if (closedNs != 0 && closedNs >= config_.peerTimeoutNs && pending()) {
    failComm(abi::kRemoteError, "the receiver closed the connection " +
                                    std::to_string(closedNs / 1000000) +
                                    " ms ago (its side is closed or its process is gone)");
  }
  evaluateHealth(nowNs);
}

}  // namespace autopilot::net::ib

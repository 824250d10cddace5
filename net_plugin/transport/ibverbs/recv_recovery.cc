// The receive comm's failure handling, beside its hot path (recv_comm.cc): failing a rail,
// answering the sender's queue pair replacement, and the health check.
#include <arpa/inet.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "net_plugin/transport/ibverbs/completion.h"
#include "net_plugin/transport/ibverbs/ib_config.h"
#include "net_plugin/transport/ibverbs/recv_comm.h"

namespace autopilot::net::ib {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;

}  // namespace

void RecvComm::failRail(int r, uint64_t nowNs, const std::string& reason, bool notifyPeer,
                        bool warn) {
  Rail& rail = rails_[r];
  // What landed before the failure is recorded only in the CQ, and the sender, which saw those
  // writes acknowledged, will not replay them: harvest them before the CQ goes. The QP is in the
  // error state first, so nothing lands after the harvest (the count RAIL_DOWN carries).
  if (rail.qp) drain(r, nowNs);
  // A rail re-created by the sender is not live until data crosses it, yet has a QP to drop.
  bool wasLive = health_.fail(r, nowNs, reason, warn);
  bool hadQp = bool(rail.qp);
  rail.qp.reset();
  if (wasLive && !config_.failover && warn) {
    failComm(abi::kRemoteError, "rail " + std::to_string(r) +
                                    " failed and failover is off "
                                    "(NCCL_AUTOPILOT_NET_FAILOVER=0)");
    return;
  }
  rail.recvsPosted = 0;
  rail.ctsInFlight = 0;
  if (lastDataRail_ == r) lastDataRail_ = -1;
  // Entries whose write was in flight there may not have landed: write them again elsewhere.
  // The old write may still land (identical bytes), so the slot waits for the fence.
  bool fenced = false;
  for (int i = 0; i < kSlots; ++i) {
    CtsState& cts = cts_[i];
    if (cts.rail != r) continue;
    cts.rail = -1;
    cts.fenceRail = r;
    cts.fenceGen = rail.generation;
    fenced = true;
    if (slots_[i].state == RecvRequest::State::kPosted && !cts.landed) cts.pending = true;
  }
  if (fenced && rail.senderDownGen < rail.generation) {
    rail.ctsFenceGen = rail.generation;
    rail.ctsFenceWindowEndNs = nowNs + retryWindowNs();
    rail.ctsFenceGiveUpNs = nowNs + std::max(retryWindowNs(), config_.peerTimeoutNs);
  }
  if (notifyPeer && hadQp) announceDown(r, rail.generation);
}

void RecvComm::announceDown(int r, uint32_t gen) {
  Rail& rail = rails_[r];
  if (rail.downSentGen >= gen) return;
  rail.downSentGen = gen;
  control_->sendRailDown(connectionId_, r, gen, 0, 0,
                         gen == rail.generation ? rail.writesLanded : 0);
}

void RecvComm::senderDown(const wire::ControlMessage& m, uint64_t nowNs) {
  if (m.rail >= nRails_) return;
  int r = m.rail;
  Rail& rail = rails_[r];
  if (m.generation != rail.generation) return;
  // Live: the sender lost it; not live: its re-creation attempt failed.
  if (rail.qp) failRail(r, nowNs, "the sender gave the rail up", true);
  // The answer, also when this side dropped its QP without a word: the sender's replay waits
  // for it.
  announceDown(r, m.generation);
  rail.senderDownGen = std::max(rail.senderDownGen, m.generation);
  if (rail.ctsFenceGen != 0 && rail.ctsFenceGen <= rail.senderDownGen) rail.ctsFenceGen = 0;
  if (m.writesPosted > m.writesAcked) {
    // The writes the sender gave up on: those that landed anyway (late: without the fence, a
    // replay could have completed their request before them) and those cut off.
    uint32_t late = rail.writesLanded > m.writesAcked ? rail.writesLanded - m.writesAcked : 0;
    uint32_t cut = m.writesPosted > rail.writesLanded ? m.writesPosted - rail.writesLanded : 0;
    fences_++;
    lateWrites_ += late;
    cutWrites_ += cut;
    AP_INFO(kFlags,
            "comm 0x%llx ib recv: rail %d fenced (generation %u): of %u writes the sender "
            "posted it saw %u complete; %u more landed here after that, %u had not landed and "
            "cannot any more",
            (unsigned long long)commId_, r, m.generation, m.writesPosted, m.writesAcked, late, cut);
  }
}

void RecvComm::replace(const wire::ControlMessage& m, uint64_t nowNs) {
  wire::ControlMessage answer;
  answer.type = wire::ControlType::kReplaced;
  answer.connectionId = connectionId_;
  answer.rail = m.rail;
  answer.generation = m.generation;
  if (m.rail >= nRails_) {
    answer.status = wire::ControlStatus::kBadRails;
    control_->send(answer);
    return;
  }
  int r = m.rail;
  Rail& rail = rails_[r];
  if (m.generation <= rail.generation) {
    answer.status = wire::ControlStatus::kStale;
    control_->send(answer);
    return;
  }
  if (rail.qp) {
    // The sender gave up on this QP (it saw no progress): follow it.
    failRail(r, nowNs, "the sender re-creates the rail", false, false);
  }
  rail.generation = m.generation;
  rail.writesLanded = 0;
  auto qp = std::make_unique<RailQp>();
  std::string error;
  if (!qp->create(rail.global, {kSendDepth, kRecvDepth}, &error) ||
      !qp->connect(m.endpoints[0], trafficClass_, &error)) {
    AP_INFO(kFlags, "comm 0x%llx ib recv rail %d: cannot re-create the queue pair: %s",
            (unsigned long long)commId_, r, error.c_str());
    answer.status = wire::ControlStatus::kNoResources;
    control_->send(answer);
    return;
  }
  rail.qp = std::move(qp);
  rail.fifoKey = m.endpoints[0].rkey;
  rail.recvsPosted = 0;
  replenish(r, nowNs);
  if (!rail.qp) return;
  answer.endpoints[0] = rail.qp->endpoint(area_->memory().rkey[r]);
  control_->send(answer);
  // The rail re-joins when data crosses it (completed()): the sender's probe comes first.
}

void RecvComm::checkHealth(uint64_t nowNs) {
  for (int r = 0; r < nRails_; ++r) {
    Rail& rail = rails_[r];
    bool open = control_->up() && control_->closedForNs(nowNs) == 0;
    if (rail.ctsFenceGen != 0 &&
        (nowNs >= rail.ctsFenceGiveUpNs || (nowNs >= rail.ctsFenceWindowEndNs && !open))) {
      // No word from the sender (its control connection may be gone too): past the retry
      // window its writes cannot land, nor can ours be in flight any more.
      AP_INFO(kFlags,
              "comm 0x%llx ib recv rail %d: no RAIL_DOWN from the sender for generation %u; "
              "past the NIC's retry window, its clear-to-send slots are reused",
              (unsigned long long)commId_, r, rail.ctsFenceGen);
      rail.senderDownGen = std::max(rail.senderDownGen, rail.ctsFenceGen);
      rail.ctsFenceGen = 0;
    }
    if (rail.port.resetSinceLook() && health_.live(r)) {
      failRail(r, nowNs, "SIMULATED queue pair reset", false);  // the peer is not told
      continue;
    }
    if (!health_.live(r)) continue;
    if (rail.port.downSinceLook()) {
      failRail(r, nowNs, "port down (asynchronous event)");
      continue;
    }
    if (!config_.failover) continue;  // the baseline mode: silence is never a failure
    // What this side writes (clear-to-send entries) must complete.
    core::FailureDetector& fd = health_.failure(r);
    fd.setOutstanding(rail.ctsInFlight > 0, nowNs);
    if (rail.ctsInFlight > 0 && fd.failed(nowNs, 0, 0) && health_.stallBlamesRail(r, nowNs)) {
      failRail(r, nowNs,
               "a clear-to-send write has not completed for " +
                   std::to_string(fd.stalledForNs(nowNs) / 1000000) + " ms");
    }
  }
  // NCCL closes both sides: the sender's end closing while receives are posted is also how
  // an orderly teardown races, so they fail only after the peer timeout (ControlLink).
  uint64_t closedNs = control_->closedForNs(nowNs);
  if (closedNs != 0 && closedNs >= config_.peerTimeoutNs && outstanding()) {
    failComm(abi::kRemoteError, "the sender closed the connection " +
                                    std::to_string(closedNs / 1000000) +
                                    " ms ago (its side is closed or its process is gone)");
  }
  evaluateHealth(nowNs);
}

}  // namespace autopilot::net::ib

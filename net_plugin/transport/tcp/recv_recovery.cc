// The receive comm's failure handling, beside its hot path (recv_comm.cc): failing a rail, the
// health check, and installing rails the sender re-connects.
#include <poll.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "net_plugin/transport/tcp/discovery.h"
#include "net_plugin/transport/tcp/recovery_timing.h"
#include "net_plugin/transport/tcp/recv_comm.h"

namespace autopilot::net::tcp {

void RecvComm::failRail(int r, uint64_t nowNs, const std::string& reason, bool warn) {
  if (!health_.fail(r, nowNs, reason, warn)) return;
  rails_[r].link.detach(true);
  rails_[r].tcpWatch = false;
  if (!config_.failover && warn) {
    failComm(abi::kRemoteError, "rail " + std::to_string(r) +
                                    " failed and failover is off "
                                    "(NCCL_AUTOPILOT_NET_FAILOVER=0)");
    return;
  }
  if (lastDataRail_ == r) lastDataRail_ = -1;
  // Announcements queued or in flight on that rail may be lost: repeat them elsewhere.
  announceAll();
}

bool RecvComm::failIfLocalLinkDown(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  if (simulatedDown(r) || simulatedDeaf(r)) return false;
  const std::string& ifname = interfaceOf(rail.globalIndex);
  if (!rail.link.interfaceDown(ifname)) return false;
  failRail(r, nowNs, RailLink::interfaceDownReason(ifname, true));
  return true;
}

void RecvComm::checkHealth(uint64_t nowNs) {
  for (int r = 0; r < nRails_; ++r) {
    Rail& rail = rails_[r];
    uint64_t failedAt = 0;
    const bool failedElsewhere = news_[r].failedSinceLook(&failedAt);
    if (!health_.live(r) || !rail.link.up() || !config_.failover) continue;
    // Another connection of this process found the rail dead. An idle receive connection
    // gathers no evidence of its own (nothing of it is held anywhere), so it would keep the rail
    // through the outage and learn only after the repair, from the sender's reset or
    // re-connection: a failover counted while every rail is up. When this host's own link is
    // down, that is evidence for every connection over it: fail the rail now. Any other reason
    // may be specific to the other connection (its peer, its socket), and is left to it.
    if (failedElsewhere && failIfLocalLinkDown(r, nowNs)) continue;
    // What this side sends (announcements, acknowledgements) must be taken by the peer's TCP;
    // a dead link leaves it queued here or unacknowledged in the kernel.
    // A deaf rail (simulated) has lost its inbound direction, TCP's acknowledgements included.
    if (rail.tcpWatch && nowNs - rail.link.lastTcpSampleNs() >= kTcpSampleNs && !simulatedDown(r) &&
        !simulatedDeaf(r)) {
      if (rail.link.sampleTcp(nowNs)) {
        health_.failure(r).onProgress(nowNs);
      } else if (const std::string& ifname = interfaceOf(rail.globalIndex);
                 rail.link.tcpUnacked() > 0 && rail.link.interfaceDown(ifname)) {
        // This host's own link went down: what it holds will not leave.
        failRail(r, nowNs, RailLink::interfaceDownReason(ifname, false));
        continue;
      }
      if (rail.link.tcpUnacked() == 0) rail.tcpWatch = false;
    }
    core::FailureDetector& fd = health_.failure(r);
    rail.link.informDetector(fd, nowNs);
    bool held = rail.link.controlQueued() > 0 || (rail.tcpWatch && rail.link.tcpUnacked() > 0);
    fd.setOutstanding(held, nowNs);
    if (held && fd.failed(nowNs, 0, 0) && health_.stallBlamesRail(r, nowNs)) {
      failRail(r, nowNs,
               "the sender has taken none of our control frames for " +
                   std::to_string(fd.stalledForNs(nowNs) / 1000000) +
                   " ms (TCP's retransmission timeout " +
                   std::to_string(rail.link.tcp().rtoNs / 1000000) + " ms)");
    }
  }
  reannounceIfQuiet(nowNs);
  evaluateHealth(nowNs);
}

void RecvComm::installRail(int r, Fd fd, uint32_t generation, const SockAddr& peer) {
  uint64_t now = nowNs_;
  if (health_.live(r)) {
    // The sender gave up on this connection (it saw no progress): follow it.
    failRail(r, now, "the sender re-connected the rail from " + peer.str(), false);
  }
  rails_[r].link.attach(std::move(fd), generation);
  rails_[r].tcpWatch = false;
  health_.rejoin(r, now);
  announceAll();
}

}  // namespace autopilot::net::tcp

// The send comm's failure handling, beside its hot path (send_comm.cc): liveness pings, failing
// a rail, re-connecting it in the background and the health check that decides both.
#include <algorithm>
#include <climits>
#include <cstdio>

#include "common/clock.h"
#include "common/human_bytes.h"
#include "common/log.h"
#include "net_plugin/transport/tcp/discovery.h"
#include "net_plugin/transport/tcp/recovery_timing.h"
#include "net_plugin/transport/tcp/send_comm.h"

namespace autopilot::net::tcp {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;

}  // namespace

void SendComm::requestLiveness(int r, uint64_t nowNs) {
  pingIdleRails(
      r, nowNs, [&](int q) { return canPing(q); }, [&](int q) { return rails_[q].pingSentNs; },
      [&](int q) { pingRail(q, nowNs); });
}

// A ping must never land inside a half-written DATA frame: only a rail with nothing left to
// write takes one.
bool SendComm::canPing(int r) const {
  const Rail& rail = rails_[r];
  return rail.link.up() && !simulatedDown(r) && tracker_.posted(r) == tracker_.queued(r) &&
         rail.link.partialBytes == 0;
}

bool SendComm::failIfLocalLinkDown(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  if (simulatedDown(r) || simulatedDeaf(r) || !rail.link.up()) return false;
  const std::string& ifname = interfaceOf(rail.globalIndex);
  if (!rail.link.interfaceDown(ifname)) return false;
  failRail(r, nowNs, RailLink::interfaceDownReason(ifname, true));
  rail.lostLocalLink = true;
  return true;
}

void SendComm::pingRail(int r, uint64_t nowNs) {
  if (!canPing(r)) return;
  Rail& rail = rails_[r];
  uint8_t ping[wire::kFrameHeaderBytes];
  size_t n = wire::encodeLiveness(wire::FrameType::kPing, nowNs, ping);
  iovec iov{ping, n};
  IoResult res = writeVec(rail.link.fd(), &iov, 1);
  if (res.status == Io::kOk && res.bytes == n) {
    rail.pingSentNs = nowNs;
  } else if (res.status == Io::kOk && res.bytes > 0) {
    // A partial 32-byte write on an idle socket: the stream is no longer framed.
    failRail(r, nowNs, "write: partial liveness ping");
  }
}

void SendComm::failRail(int r, uint64_t nowNs, const std::string& reason, bool warn) {
  Rail& rail = rails_[r];
  if (!health_.fail(r, nowNs, reason, warn)) return;
  rail.link.detach(true);
  uint64_t bytes = 0;
  bool proceed = false;
  uint32_t moved = moveChunksOff(r, !warn, &bytes, &proceed);
  if (!proceed) return;
  rail.dialer.abandon();
  if (moved > 0) {
    AP_INFO(kFlags,
            "comm 0x%llx send: re-sending %u unacknowledged chunk%s (%s) of rail %d on "
            "the other rails",
            (unsigned long long)commId_, moved, moved == 1 ? "" : "s", humanBytes(bytes).c_str(),
            r);
  }
}

void SendComm::startReconnect(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  core::FailbackScheduler& fb = health_.failback(r);
  fb.onAttemptStarted();
  rail.attempts++;
  if (simulatedDown(r)) {
    fb.onAttemptFailed(nowNs);  // a simulated dead link cannot be re-connected either
    return;
  }
  wire::Hello hello;
  std::copy(secret_, secret_ + wire::kSecretBytes, hello.secret);
  hello.railIndex = uint8_t(r);
  hello.railCount = uint8_t(nRails_);
  hello.connectionId = connectionId_;
  hello.generation = ++rail.generation;
  rail.dialer.start(rail.local, rail.remote, hello, nowNs, config_.probeTimeoutNs);
  pumpDialer(r, nowNs);
}

void SendComm::pumpDialer(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  RailDialer::State s = rail.dialer.progress(nowNs);
  if (s == RailDialer::State::kDone) {
    rail.link.attach(rail.dialer.take(), rail.generation);
    rail.refused = false;
    rejoinRail(r, nowNs, rail.nominalBytesPerSec);
    return;
  }
  if (s == RailDialer::State::kFailed) {
    rail.refused = rail.dialer.refused();
    health_.failback(r).onAttemptFailed(nowNs);
    // Attempts repeat for as long as the comm lives: log the 1st, 2nd, 4th, 8th, ...
    if ((rail.attempts & (rail.attempts - 1)) == 0) {
      AP_INFO(kFlags,
              "comm 0x%llx send rail %d: re-connection attempt %llu to %s failed: %s; "
              "next in %llu ms",
              (unsigned long long)commId_, r, (unsigned long long)rail.attempts,
              rail.remote.str().c_str(), rail.dialer.error().c_str(),
              (unsigned long long)(health_.failback(r).backoffNs() / 1000000));
    }
  }
}

// A rail lost with this host's own link is tried again as soon as the link is back (watched
// every kLinkCheckNs), not when the failback backoff says: that backoff grew to seconds while
// the link stayed down, and a repaired link would sit unused that long.
void SendComm::retryWhenLinkReturns(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  if (nowNs - rail.linkCheckNs < kLinkCheckNs) return;
  rail.linkCheckNs = nowNs;
  // Any socket of this namespace answers the question; the failed rail's own is closed.
  int probeFd = -1;
  for (int q = 0; q < nRails_ && probeFd < 0; ++q) {
    if (rails_[q].link.up()) probeFd = rails_[q].link.fd();
  }
  const std::string& ifname = interfaceOf(rail.globalIndex);
  if (probeFd < 0 || ifname.empty() || interfaceDown(probeFd, ifname.c_str())) return;
  rail.lostLocalLink = false;
  core::FailbackScheduler& fb = health_.failback(r);
  if (rail.dialer.active()) {
    // Started while the link was down: its connection attempt went nowhere.
    rail.dialer.abandon();
    fb.onAttemptFailed(nowNs);
  }
  fb.retryNow(nowNs);
  AP_INFO(kFlags, "comm 0x%llx send rail %d: interface %s is up again; re-connecting now",
          (unsigned long long)commId_, r, ifname.c_str());
}

void SendComm::checkHealth(uint64_t nowNs) {
  bool allRefused = true;
  for (int r = 0; r < nRails_; ++r) {
    Rail& rail = rails_[r];
    if (!health_.live(r)) {
      allRefused = allRefused && rail.refused;
      if (rail.lostLocalLink) retryWhenLinkReturns(r, nowNs);
      if (!rail.dialer.active() && health_.failback(r).due(nowNs)) startReconnect(r, nowNs);
      continue;
    }
    allRefused = false;
    // Without failover (the baseline mode) nothing is declared dead from silence: like a
    // transport without failure detection, a dead link stalls until the socket errors.
    if (!config_.failover) continue;
    core::FailureDetector& fd = health_.failure(r);
    // Leftover copies of completed messages are not held: the receiver may rightly not read them
    // for a long time.
    bool outstanding = tracker_.heldBytes(r) > 0;
    fd.setOutstanding(outstanding, nowNs);
    if (!outstanding) continue;
    // No acknowledgement for a while: ask the kernel whether the peer's TCP still takes bytes
    // (a slow rail does; a dead one does not).
    if (fd.stalledForNs(nowNs) > kTcpSampleNs &&
        nowNs - rail.link.lastTcpSampleNs() >= kTcpSampleNs && !simulatedDown(r) &&
        !simulatedDeaf(r)) {
      if (rail.link.sampleTcp(nowNs)) {
        fd.onProgress(nowNs);
      } else if (const std::string& ifname = interfaceOf(rail.globalIndex);
                 rail.link.interfaceDown(ifname)) {
        // This host's own link went down (port, cable, `ip link set down`): no stall needs
        // waiting out to know it.
        failRail(r, nowNs, RailLink::interfaceDownReason(ifname, false));
        rail.lostLocalLink = true;
        continue;
      }
    }
    rail.link.informDetector(fd, nowNs);
    uint64_t held = tracker_.heldBytes(r);
    double bw = detectorBandwidth(r);
    if (fd.failed(nowNs, held, bw) && !health_.stallBlamesRail(r, nowNs)) {
      requestLiveness(r, nowNs);
    } else if (fd.failed(nowNs, held, bw)) {
      char why[200];
      std::snprintf(why, sizeof(why),
                    "no progress for %llu ms while holding %s (allowed %llu ms at %.2f Gbit/s; "
                    "TCP's retransmission timeout %llu ms)",
                    (unsigned long long)(fd.stalledForNs(nowNs) / 1000000),
                    humanBytes(held).c_str(),
                    (unsigned long long)(fd.timeoutNs(held, bw) / 1000000), bw * 8e-9,
                    (unsigned long long)(rail.link.tcp().rtoNs / 1000000));
      failRail(r, nowNs, why);
    }
  }
  if (allRefused && health_.noLiveRailSinceNs() != 0) {
    failComm(abi::kRemoteError,
             "every rail is down and the receiver refuses re-connections "
             "(its side is closed or its process is gone)");
  }
  evaluateHealth(nowNs);
}

}  // namespace autopilot::net::tcp

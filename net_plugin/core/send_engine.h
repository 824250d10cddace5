// SendEngine: the half of a send comm that does not depend on the transport, written once for
// TCP and RDMA. It owns the requests (a fixed pool), the match of sends to the receiver's
// announced buffers (in order), the chunk plan of each message, the striper that places chunks
// on rails, the tracker that keeps each chunk until its rail confirms it, the rails' health and
// the comm's sticky error. A transport's SendComm derives from it and adds what is its own: how
// chunks travel (frames on a socket, RDMA writes), how confirmations come back, how a rail is
// torn down and rebuilt.
//
// The rules that must not drift between transports live here: when a request completes or
// fails, how a failed rail's chunks move to the others, what bandwidth the failure detector
// assumes for a rail not yet measured, when a re-joined rail starts and at what share, when
// the comm gives up.
//
// Threading: NCCL drives a comm from one thread at a time; nothing here locks. Nothing
// allocates after construction except log text on rare events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/abi/net_abi.h"
#include "net_plugin/core/comm_config.h"
#include "net_plugin/core/fault_injector.h"
#include "net_plugin/core/lateness_meter.h"
#include "net_plugin/core/opaque_handles.h"
#include "net_plugin/core/rail_health.h"
#include "net_plugin/core/rail_metrics.h"
#include "net_plugin/core/rail_news.h"
#include "net_plugin/core/rail_striper.h"
#include "net_plugin/core/receive_matcher.h"
#include "net_plugin/core/send_request_pool.h"
#include "net_plugin/core/send_tracker.h"

namespace autopilot::net::core {

struct SendRequest : RequestHeader {
  enum class State : uint8_t { kFree, kWaitingForReceive, kActive, kDone, kFailed };
  uint32_t index = 0;  // slot in the pool, also the SendTracker message id
  State state = State::kFree;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  int32_t tag = 0;
  uint64_t recvSeq = 0;       // the matched receive
  uint8_t buffer = 0;         // buffer within it
  uint32_t failovers = 0;     // rails that failed while holding some of its chunks
  uint32_t failoverMark = 0;  // the rail failure that last counted it (once per failure)
  abi::Result error = abi::kSuccess;
};

class SendEngine : public CommBase {
 public:
  // Rails of the comm as setup left them: what the health tracker and the metrics need.
  struct RailInfo {
    int telemetryId = -1;
    std::string name;
    bool standby = false;
    double nominalBytesPerSec = 0;  // the port's speed: the striper's first estimate
  };

  abi::Result test(SendRequest* request, int* done, int* sizes);

 protected:
  // `label` prefixes this comm's log lines ("send", "ib send"); `trackerDepth` bounds the
  // chunks queued per rail; `matchWindow` the receives announced ahead.
  SendEngine(uint32_t magic, uint64_t commId, const char* label, const CommConfig& config,
             const std::vector<RailInfo>& rails, uint32_t trackerDepth, uint32_t matchWindow);
  virtual ~SendEngine();
  SendEngine(const SendEngine&) = delete;
  SendEngine& operator=(const SendEngine&) = delete;

  // A send of `size` bytes takes a request of the pool, waiting for its receive (NULL in
  // *request when none is free: NCCL retries). The transport fills in what it adds, then runs
  // a progress pass, then calls withdrawIfUnmatched. On a broken comm the request is handed out
  // failed: test() reports the error.
  abi::Result postSend(const void* data, size_t size, int tag, SendRequest** request);
  // After the progress pass of an isend: a send that found no receive to match (not announced
  // yet, or the receive next in line has no free buffer with its tag) goes back to the pool
  // and true is returned; isend then hands NCCL a NULL request, as NCCL's IB transport does,
  // and NCCL posts it again later. A request handed out is therefore always matched (or
  // failed): it never waits on a receive that NCCL could post only after a later send.
  bool withdrawIfUnmatched(SendRequest* q);
  // One progress pass: the transport's own (reads, writes, completions, health).
  virtual void progress(uint64_t nowNs) = 0;
  // The send was matched to receive slot `slot`: the transport keeps what it needs of the
  // announcement (the RDMA target, say).
  virtual void onMatched(SendRequest& /*q*/, const ReceiveMatcher::Slot& /*slot*/) {}
  // Rails that cannot take chunks now although the striper may pick them (no queue pair).
  virtual uint32_t railsClosedForPlacing() const { return 0; }
  // Whether a chunk may travel twice (late copies, placeLateCopies): only where the receiver
  // drops a copy that lands after its message completed. TCP's receiver reads such data and
  // discards it; an RDMA write into a buffer NCCL already got back would overwrite it.
  virtual bool lateCopiesAllowed() const { return false; }
  // Probes of slow rails as copies (CommConfig::probeCopies), where copies are allowed at all
  // and, as for late copies, not in the failover-off baseline.
  bool probeCopiesAllowed() const {
    return config_.probeCopies && config_.failover && lateCopiesAllowed();
  }
  // Called once at the start of every placing pass.
  virtual void beforePlacing() {}
  // Whether this chunk must wait (the RDMA replay guard: new data must not overtake a replay
  // into the same receive memory). Placing stops at the first chunk that must wait.
  virtual bool mustWait(const SendTracker::Entry& /*e*/) { return false; }
  // A liveness ping on rail r itself, when the rail can take one now (one with data in flight
  // answers through that data).
  virtual void pingRail(int r, uint64_t nowNs) = 0;
  // The transport's own failing of rail r, for a reason found by the engine.
  virtual void failRailFor(int r, uint64_t nowNs, const std::string& reason) = 0;
  // Fails rail r if this host's own link of it is down (port, cable, `ip link set down`), which
  // is evidence for every connection over it; returns whether it did. False where the
  // transport cannot tell.
  virtual bool failIfLocalLinkDown(int /*r*/, uint64_t /*nowNs*/) { return false; }

  // Sticky: every pending and later send fails with `error`.
  void failComm(abi::Result error, const std::string& reason);
  void freeRequest(SendRequest* q);
  // Sends whose receive is announced start: their chunks are planned. Sends match receives in
  // order; within a multi-receive, the tag picks the buffer.
  void matchRequests();
  // Planned chunks go to rails (earliest predicted completion). Once every chunk is placed,
  // late ones are copied (placeLateCopies).
  void placeChunks(uint64_t nowNs);
  // The chunks a rail is late with get a copy on the rail that would deliver it first, where
  // that saves time. A ring step, and with it the whole collective, waits for its slowest
  // chunk: when a rail's rate drops tenfold, what it holds (its window, up to 50 ms of its old
  // rate) would take ten times as long, and the stall lasts until that queue has drained.
  // Copies end it as soon as the chunks are late, without declaring a slow but working rail
  // failed.
  void placeLateCopies(uint64_t nowNs, uint32_t excluded);

  // The transport-independent half of failing rail r, after the transport stopped the rail
  // (its frames or writes can no longer land): every chunk it held moves to the others.
  // Returns the chunks moved (their bytes in *bytes). False in *proceed when the comm failed
  // instead (failover off, unless `orderly`: the peer closed an idle rail, nothing at stake).
  uint32_t moveChunksOff(int r, bool orderly, uint64_t* bytes, bool* proceed);
  // Rail r re-joins: its first share is a fraction of what the other rails deliver.
  void rejoinRail(int r, uint64_t nowNs, double nominalBytesPerSec);
  // The bandwidth the failure detector assumes for rail r: its measurement, or before the
  // first one what its measured peers deliver (a guess too high would fail a rail that is
  // merely as slow as the others; far too low would hide a dead one for long).
  double detectorBandwidth(int r) const;
  // Rail r stalls and no other rail shows the peer alive: every other live rail that is idle
  // (`idle(q)`: a rail carrying data shows the peer's life through its own progress) and due
  // (`lastPingNs(q)`: not pinged in this stall, or the last ping is getting old, since
  // evidence must be recent to count, RailHealth::stallBlamesRail) gets a ping (`ping(q)`).
  template <typename Idle, typename LastPing, typename Ping>
  void pingIdleRails(int r, uint64_t nowNs, Idle&& idle, LastPing&& lastPingNs, Ping&& ping) {
    const uint64_t stallStart = health_.failure(r).stallStartNs();
    for (int q = 0; q < nRails_; ++q) {
      if (q != r && health_.live(q) && idle(q) && livenessDue(lastPingNs(q), stallStart, nowNs)) {
        ping(q);
      }
    }
  }
  // What other connections of the process found out about this comm's rails (RailNews): a
  // rail found dead elsewhere takes no new data here and is pinged; it fails when it stays
  // silent for the detector's allowance after the peer was seen answering on another rail
  // (and stays suspect while the peer answers nowhere); a rail that re-joined elsewhere is
  // retried here at once. The transports call it at the start of every progress pass.
  void followRailNews(uint64_t nowNs);
  // The striper's mode for rail r: its health's, or standby while it is suspect.
  RailMode placementMode(int r) const;
  // The periodic part of the health check: rail states from measured bandwidth (every
  // kEvaluateNs), then the comm fails when no rail has been left for the peer timeout while
  // sends are pending.
  void evaluateHealth(uint64_t nowNs);
  bool pending() const { return pool_.anyWaiting() || pool_.anyInUse(); }
  // The start of every progress pass: this process's lateness, measured and allowed for.
  // The pass ends when the returned scope does.
  PassClock::Scope beginPass(uint64_t nowNs) {
    health_.setLateness(passes_.begin(nowNs, pending()));
    return PassClock::Scope(passes_);
  }
  int usableRails() const;
  double medianLiveBandwidth() const;
  std::string railSummary(int r) const;

  const uint64_t commId_;
  const char* const label_;
  CommConfig config_;
  const int nRails_;
  RailHealth health_;
  FaultView faults_;  // the simulated faults on this comm's rails (set by the transport)
  RailStriper striper_;
  SendTracker tracker_;
  ReceiveMatcher matcher_;
  RailMetrics metrics_;
  SendRequestPool<SendRequest> pool_;
  abi::Result failed_ = abi::kSuccess;  // sticky comm error
  uint64_t lateCopies_ = 0;             // chunks copied because their rail was late
  uint64_t probeCopies_ = 0;            // chunks copied to measure a slow rail
  uint64_t nextEvaluateNs_ = 0;
  RailNewsWatch news_[RailStriper::kMaxRails];
  uint64_t suspectSinceNs_[RailStriper::kMaxRails] = {};  // 0: not suspect
  uint64_t peerSeenNs_[RailStriper::kMaxRails] = {};  // suspect, and the peer answered elsewhere
  PassClock passes_;

 private:
  double measuredPeerBandwidth(int r) const;
  bool livenessDue(uint64_t lastPingNs, uint64_t stallStartNs, uint64_t nowNs) const;

  uint32_t railFailures_ = 0;  // numbers the rail failures, for SendRequest::failoverMark
};

}  // namespace autopilot::net::core

// RailQp: one rail's reliable-connected queue pair of a comm, with its own completion queue.
// Created in INIT with a random starting PSN, connected (RTR, RTS) to the peer's endpoint, and
// destroyed as a unit: destroying the QP stops the NIC retransmitting its writes, so a rail's
// unacknowledged chunks are replayed elsewhere (a write already in the fabric can still land
// through the receiver's QP until the receiver stops it: README, "Not yet guaranteed"); its CQ
// goes with it, so no stale completion of an old QP is ever seen.
// A receiver stops the QP (error state) and drains the CQ before that: a write the sender saw
// acknowledged is recorded nowhere but in its receive completion (README, "Failure and failback").
//
// Every work request posted here is signaled: the sender acknowledges chunks by their
// completions (in posting order on an RC QP), and a bounded queue never overflows because the
// owners cap what they post (core::SendTracker's per-rail capacity, one clear-to-send write per
// slot).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "net_plugin/transport/ibverbs/discovery.h"
#include "net_plugin/transport/ibverbs/wire.h"

namespace autopilot::net::ib {

class RailQp {
 public:
  struct Depths {
    int send = 0;  // outstanding send work requests (writes, reads)
    int recv = 0;  // posted receives (one per incoming write with immediate)
  };
  // What the peer may do through the QP: data QPs take writes only; the loopback QP of the
  // flush takes its own reads only.
  static constexpr int kDataAccess = IBV_ACCESS_REMOTE_WRITE;
  static constexpr int kFlushAccess = IBV_ACCESS_REMOTE_READ;

  RailQp() = default;
  RailQp(const RailQp&) = delete;
  RailQp& operator=(const RailQp&) = delete;

  // CQ + QP in INIT on global rail `rail`, granting the peer `access`. False with the reason.
  bool create(int rail, Depths depths, std::string* error, int access = kDataAccess);
  // What the peer needs to connect to this QP; `rkey` is passed through for the message.
  wire::QpEndpoint endpoint(uint32_t rkey) const;
  // INIT -> RTR -> RTS towards the peer. trafficClass < 0: 0.
  bool connect(const wire::QpEndpoint& peer, int trafficClass, std::string* error);
  // To the error state: the QP takes no more packets and flushes what is posted; completions
  // already generated stay in the CQ for poll(). 0 or an errno.
  int stop();
  void destroy();
  bool exists() const { return bool(qp_); }
  bool connected() const { return connected_; }
  int rail() const { return rail_; }

  // Work requests; 0 or an errno (ENOMEM: the queue is full).
  int postWrite(uint64_t wrId, const void* local, uint32_t length, uint32_t lkey, uint64_t remote,
                uint32_t rkey);
  int postWriteImm(uint64_t wrId, const void* local, uint32_t length, uint32_t lkey,
                   uint64_t remote, uint32_t rkey, uint32_t immHostOrder);
  int postRead(uint64_t wrId, void* local, uint32_t length, uint32_t lkey, uint64_t remote,
               uint32_t rkey);
  // `count` receives without buffers (writes with immediate consume one each); returns how
  // many were posted.
  int postRecvs(uint64_t wrId, int count);
  int poll(ibv_wc* wc, int max) { return VerbsLibrary::pollCq(cq_.get(), max, wc); }

 private:
  int post(ibv_send_wr* wr);

  const VerbsLibrary* lib_ = nullptr;
  int rail_ = -1;
  uint32_t psn_ = 0;
  bool connected_ = false;
  CompletionQueue cq_;  // declared before the QP: released after it
  QueuePair qp_;
};

}  // namespace autopilot::net::ib

// AcceptHub: one listen comm's listening sockets (one per rail), shared by the listen comm and
// by every receive comm accepted from it. NCCL may connect to one listen handle several times
// and accept each connection in turn until it closes the listen comm (its socket and IB
// transports do; docs/net-contract.md), and it usually closes the listen comm as soon as the
// accepts it needs are done. The receive comms still need the listening sockets afterwards:
// the sender re-connects failed rails through them. So the hub lives as long as its last
// owner, and routes each newcomer by the connection id in its HELLO:
//  - a connection already accepted: the rail goes to that receive comm's Mailbox, which the
//    comm empties on its next progress pass (the hub may be served from another comm's thread);
//  - a connection being accepted: the rail joins it; accept() hands out a connection once all
//    its rails arrived, or at least one and the others are late (the straggler time);
//  - anything else, or any new connection once the listen comm is closed: refused.
//
// Threading: NCCL may drive the listen comm and each receive comm from different threads;
// everything here is guarded by one mutex. Receive comms only try it (a comm whose thread finds
// it busy checks again on a later pass): the data path never waits for it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net_plugin/transport/tcp/acceptor.h"
#include "net_plugin/transport/tcp/socket.h"
#include "net_plugin/transport/tcp/wire.h"

namespace autopilot::net::tcp {

class AcceptHub final : private RailAcceptor::Owner {
 public:
  // Connections being accepted at once: a legitimate peer connects each one with its own id,
  // one socket per rail; a peer needs the listen's secret to get this far.
  static constexpr int kMaxIncoming = 16;

  // Rails the sender re-connected to one accepted connection, waiting for its receive comm.
  struct Mailbox {
    uint64_t connectionId = 0;
    int rails = 0;
    // Under the hub's mutex: the newest generation accepted per rail (an arrival not yet taken
    // is always of that generation).
    uint32_t generations[wire::kMaxRails] = {};
    Fd arrived[wire::kMaxRails];  // not yet taken by the comm
    SockAddr from[wire::kMaxRails];
    std::atomic<bool> any{false};  // read by the comm without the lock
  };

  // A connection whose rails are here (fds invalid for rails that never came).
  struct Accepted {
    uint64_t connectionId = 0;
    int rails = 0;
    Fd fds[wire::kMaxRails];
    uint32_t generations[wire::kMaxRails] = {};
    int connected = 0;
    Mailbox* mailbox = nullptr;  // the comm's, registered before the hub's lock was released
  };

  // Opens a listener on each address. False with a reason.
  bool open(const SockAddr* addresses, int n, const uint8_t* secret, std::string* error);
  const SockAddr& bound(int r) const { return acceptor_.bound(r); }

  // The listen comm's accept step: serves the listeners, then hands out one connection that is
  // ready (true) with its mailbox registered. `pausedMask`: rails not accepted on (simulated
  // link down).
  bool acceptOne(uint64_t nowNs, uint32_t pausedMask, uint64_t stragglerNs, Accepted* out);
  // The listen comm is closed: connections being accepted are dropped, new ones refused.
  void stopAccepting();

  // A receive comm's pass: serves the listeners unless another thread is doing so.
  void serve(uint64_t nowNs, uint32_t pausedMask);
  // Takes the rails waiting in `m` (call when m.any): fn(rail, fd, generation, from) for each.
  template <typename Fn>
  void takeArrivals(Mailbox& m, Fn&& fn) {
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return;
    m.any.store(false, std::memory_order_relaxed);
    for (int r = 0; r < m.rails; ++r) {
      if (m.arrived[r].valid()) fn(r, std::move(m.arrived[r]), m.generations[r], m.from[r]);
    }
  }
  // The receive comm goes away: nothing is routed to its mailbox any more.
  void release(Mailbox* m);

 private:
  struct Incoming {
    uint64_t connectionId = 0;  // 0: free
    int rails = 0;
    uint64_t firstRailNs = 0;
    Fd fds[wire::kMaxRails];
    uint32_t generations[wire::kMaxRails] = {};
  };

  wire::AckStatus decide(const wire::Hello& hello, const SockAddr& peer) override;
  void install(const wire::Hello& hello, Fd fd, const SockAddr& peer) override;
  Mailbox* mailboxFor(uint64_t connectionId);
  Incoming* incomingFor(uint64_t connectionId);

  std::mutex mu_;
  RailAcceptor acceptor_;
  int rails_ = 0;
  bool accepting_ = true;
  uint64_t nowNs_ = 0;  // time of the current serve (for install)
  Incoming incoming_[kMaxIncoming];
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
};

}  // namespace autopilot::net::tcp

// RailAcceptor: the listening side of connection setup, inside the AcceptHub that a listen comm
// shares with the receive comms it accepted (first rails, rails re-connected by the sender after
// a failure, or joining late). It owns one listening socket per rail, accepts without blocking,
// reads each newcomer's HELLO within a deadline and checks the protocol version and the per-listen
// secret; a connection that fails any check is answered with the reason, closed and logged
// with the peer's address. What to do with a valid HELLO (which connection, which generation)
// is the caller's decision.
#pragma once

#include <cstdint>
#include <string>

#include "net_plugin/transport/tcp/handshake.h"
#include "net_plugin/transport/tcp/socket.h"
#include "net_plugin/transport/tcp/wire.h"

namespace autopilot::net::tcp {

class RailAcceptor {
 public:
  // Connections waiting for their hello: bounded, the oldest evicted for a newcomer, at most
  // half of them from one source host (core/pending_admission.h). A legitimate peer connects
  // one socket per rail (at most wire::kMaxRails) per connection.
  static constexpr int kMaxPending = 16;
  static constexpr int kMaxPendingPerSource = 8;
  static constexpr uint64_t kHelloTimeoutNs = 2'000'000'000;

  // What the owner does with a HELLO that carried the right secret and version.
  class Owner {
   public:
    virtual wire::AckStatus decide(const wire::Hello& hello, const SockAddr& peer) = 0;
    // Takes the accepted rail connection (after the positive answer was sent).
    virtual void install(const wire::Hello& hello, Fd fd, const SockAddr& peer) = 0;

   protected:
    ~Owner() = default;
  };

  // Opens a listener on each address (port chosen by the kernel). False with a reason.
  bool open(const SockAddr* addresses, int n, std::string* error);
  int rails() const { return rails_; }
  const SockAddr& bound(int r) const { return bound_[r]; }
  const uint8_t* secret() const { return secret_; }
  void setSecret(const uint8_t* secret);
  // Rails whose bit is set are not accepted on (simulated link down).
  void progress(uint64_t nowNs, uint32_t pausedMask, Owner& owner);
  void close();
  const char* role = "accept";  // for log messages
  uint64_t evicted() const { return evicted_; }

 private:
  int rails_ = 0;
  Fd listeners_[wire::kMaxRails];
  SockAddr bound_[wire::kMaxRails];
  HelloReader pending_[kMaxPending];
  uint8_t secret_[wire::kSecretBytes] = {};
  uint64_t evicted_ = 0;
};

// A per-listen random secret from the kernel's generator.
bool randomBytes(void* out, size_t n);

}  // namespace autopilot::net::tcp

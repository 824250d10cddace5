#include "net_plugin/transport/tcp/acceptor.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "net_plugin/core/pending_admission.h"

namespace autopilot::net::tcp {

namespace {
constexpr unsigned long kFlags = abi::subsys::kNet;

bool sameSecret(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // constant time: the secret is an authenticator
  for (size_t i = 0; i < wire::kSecretBytes; ++i) diff |= uint8_t(a[i] ^ b[i]);
  return diff == 0;
}
}  // namespace

bool randomBytes(void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += got;
    n -= size_t(got);
  }
  return true;
}

bool RailAcceptor::open(const SockAddr* addresses, int n, std::string* error) {
  close();
  for (int r = 0; r < n && r < wire::kMaxRails; ++r) {
    int err = 0;
    listeners_[r] = makeListener(addresses[r], &bound_[r], &err);
    if (!listeners_[r].valid()) {
      *error = "listen on " + addresses[r].host() + ": " + errnoText(err);
      close();
      return false;
    }
    rails_ = r + 1;
  }
  return true;
}

void RailAcceptor::setSecret(const uint8_t* secret) {
  std::memcpy(secret_, secret, wire::kSecretBytes);
}

void RailAcceptor::close() {
  for (Fd& l : listeners_) l.reset();
  for (HelloReader& p : pending_) p.close();
  rails_ = 0;
}

void RailAcceptor::progress(uint64_t nowNs, uint32_t pausedMask, Owner& owner) {
  for (int r = 0; r < rails_; ++r) {
    if (!listeners_[r].valid() || (pausedMask & (1u << r))) continue;
    for (int burst = 0; burst < kMaxPending; ++burst) {
      Fd fd;
      SockAddr peer;
      IoResult res = acceptOne(listeners_[r].get(), &fd, &peer);
      if (res.status != Io::kOk) break;
      // Bounded, and never refusing a newcomer (core/pending_admission.h). Every reader has the
      // same hello timeout, so the earliest deadline is the oldest connection.
      PendingSlotView views[kMaxPending];
      for (int i = 0; i < kMaxPending; ++i) {
        views[i] = {pending_[i].inUse(), pending_[i].inUse() && pending_[i].peer().sameHost(peer),
                    pending_[i].deadlineNs()};
      }
      PendingAdmission a = admitPending(views, kMaxPending, kMaxPendingPerSource);
      HelloReader& slot = pending_[a.slot];
      if (a.evicts) {
        ++evicted_;
        AP_WARN_LIMITED(
            kFlags,
            "%s: too many connections waiting for their hello (at most %d); closed the oldest, "
            "from %s",
            role, kMaxPending, slot.peer().str().c_str());
        slot.close();
      }
      slot = HelloReader(std::move(fd), peer, nowNs + kHelloTimeoutNs);
    }
  }
  for (HelloReader& p : pending_) {
    if (!p.inUse()) continue;
    HelloReader::State s = p.progress(nowNs);
    if (s == HelloReader::State::kReading) continue;
    if (s == HelloReader::State::kFailed) {
      AP_WARN_LIMITED(kFlags, "%s: rejected a connection from %s: %s", role, p.peer().str().c_str(),
                      p.error().c_str());
      p.close();
      continue;
    }
    const wire::Hello& hello = p.hello();
    wire::AckStatus status = sameSecret(hello.secret, secret_) ? owner.decide(hello, p.peer())
                                                               : wire::AckStatus::kBadSecret;
    p.reply(status, hello.generation);
    if (status != wire::AckStatus::kAccepted) {
      AP_WARN_LIMITED(kFlags, "%s: rejected rail %d connection from %s: %s", role, hello.railIndex,
                      p.peer().str().c_str(), wire::ackStatusText(status));
      p.close();
      continue;
    }
    SockAddr peer = p.peer();
    owner.install(hello, p.take(), peer);
  }
}

}  // namespace autopilot::net::tcp

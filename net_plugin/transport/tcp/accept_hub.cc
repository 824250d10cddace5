#include "net_plugin/transport/tcp/accept_hub.h"

#include <algorithm>

namespace autopilot::net::tcp {

bool AcceptHub::open(const SockAddr* addresses, int n, const uint8_t* secret, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  acceptor_.setSecret(secret);
  if (!acceptor_.open(addresses, n, error)) return false;
  rails_ = acceptor_.rails();
  return true;
}

AcceptHub::Mailbox* AcceptHub::mailboxFor(uint64_t connectionId) {
  for (auto& m : mailboxes_) {
    if (m->connectionId == connectionId) return m.get();
  }
  return nullptr;
}

AcceptHub::Incoming* AcceptHub::incomingFor(uint64_t connectionId) {
  for (Incoming& in : incoming_) {
    if (in.connectionId == connectionId) return &in;
  }
  return nullptr;
}

wire::AckStatus AcceptHub::decide(const wire::Hello& hello, const SockAddr&) {
  if (hello.connectionId == 0) return wire::AckStatus::kWrongConnection;
  if (Mailbox* m = mailboxFor(hello.connectionId)) {
    if (hello.railCount != m->rails || hello.railIndex >= m->rails) {
      return wire::AckStatus::kBadRail;
    }
    if (hello.generation <= m->generations[hello.railIndex]) {
      return wire::AckStatus::kStaleGeneration;
    }
    return wire::AckStatus::kAccepted;
  }
  if (!accepting_) return wire::AckStatus::kWrongConnection;
  Incoming* in = incomingFor(hello.connectionId);
  if (in == nullptr) {
    if (hello.railCount > rails_ || hello.railCount < 1) return wire::AckStatus::kBadRail;
    in = incomingFor(0);
    if (in == nullptr) return wire::AckStatus::kWrongConnection;  // full: the sender retries
    // Claimed by install(), once the positive answer went out.
  } else if (hello.railCount != in->rails) {
    return wire::AckStatus::kBadRail;
  }
  if (hello.railIndex >= hello.railCount) return wire::AckStatus::kBadRail;
  if (in->connectionId != 0 && hello.generation <= in->generations[hello.railIndex]) {
    return wire::AckStatus::kStaleGeneration;
  }
  return wire::AckStatus::kAccepted;
}

void AcceptHub::install(const wire::Hello& hello, Fd fd, const SockAddr& peer) {
  int r = hello.railIndex;
  if (Mailbox* m = mailboxFor(hello.connectionId)) {
    m->arrived[r] = std::move(fd);  // a newer generation replaces one not yet taken
    m->generations[r] = hello.generation;
    m->from[r] = peer;
    m->any.store(true, std::memory_order_release);
    return;
  }
  Incoming* in = incomingFor(hello.connectionId);
  if (in == nullptr) {
    in = incomingFor(0);  // decide() found one free, and nothing ran in between
    if (in == nullptr) return;
    in->connectionId = hello.connectionId;
    in->rails = hello.railCount;
    in->firstRailNs = nowNs_;
  }
  in->fds[r] = std::move(fd);
  in->generations[r] = hello.generation;
}

bool AcceptHub::acceptOne(uint64_t nowNs, uint32_t pausedMask, uint64_t stragglerNs,
                          Accepted* out) {
  std::lock_guard<std::mutex> lock(mu_);
  nowNs_ = nowNs;
  acceptor_.progress(nowNs, pausedMask, *this);
  for (Incoming& in : incoming_) {
    if (in.connectionId == 0) continue;
    int have = 0;
    for (int r = 0; r < in.rails; ++r) have += in.fds[r].valid();
    bool late = nowNs - in.firstRailNs >= stragglerNs;
    if (have < in.rails && !late) continue;
    auto m = std::make_unique<Mailbox>();
    m->connectionId = in.connectionId;
    m->rails = in.rails;
    out->connectionId = in.connectionId;
    out->rails = in.rails;
    out->connected = have;
    for (int r = 0; r < in.rails; ++r) {
      m->generations[r] = in.generations[r];
      out->generations[r] = in.generations[r];
      out->fds[r] = std::move(in.fds[r]);
    }
    out->mailbox = m.get();
    mailboxes_.push_back(std::move(m));
    in = Incoming{};
    return true;
  }
  return false;
}

void AcceptHub::stopAccepting() {
  std::lock_guard<std::mutex> lock(mu_);
  accepting_ = false;
  for (Incoming& in : incoming_) in = Incoming{};
}

void AcceptHub::serve(uint64_t nowNs, uint32_t pausedMask) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  nowNs_ = nowNs;
  acceptor_.progress(nowNs, pausedMask, *this);
}

void AcceptHub::release(Mailbox* m) {
  std::lock_guard<std::mutex> lock(mu_);
  mailboxes_.erase(std::remove_if(mailboxes_.begin(), mailboxes_.end(),
                                  [&](const std::unique_ptr<Mailbox>& p) { return p.get() == m; }),
                   mailboxes_.end());
}

}  // namespace autopilot::net::tcp

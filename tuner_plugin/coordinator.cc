#include "tuner_plugin/coordinator.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/event_journal.h"
#include "common/log.h"
#include "tuner_plugin/tuner_comm.h"

namespace autopilot::tuner {
namespace {

constexpr unsigned long kFlags = abi::subsys::kTuning | abi::subsys::kInit;
constexpr size_t kMaxJoining = 32;  // handshakes in progress; beyond, the oldest is evicted
// Before authentication only a challenge, hello or welcome frame is accepted (all far below).
constexpr size_t kMaxHandshakeBody = 256;
constexpr size_t kFramesPerRound = 64;  // per authenticated peer and service round
constexpr uint64_t kMaxConnectBackoffNs = 200'000'000;
// After a busy refusal the next proposal waits at least this long (a call may take less).
constexpr uint64_t kMinBusyHoldNs = 1'000'000;

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

std::string byeReason(wire::Reader& r) {
  char buf[201];
  size_t n = std::min(r.remaining(), sizeof(buf) - 1);
  r.bytes(buf, n);
  for (size_t i = 0; i < n; ++i) {
    if (buf[i] < 0x20 || buf[i] > 0x7e) buf[i] = '?';  // peer text goes into our log
  }
  return std::string(buf, n);
}

}  // namespace

struct Coordinator::Peer {
  enum class Stage { kConnecting, kAwaitChallenge, kAwaitHello, kAwaitWelcome, kReady };
  FrameConnection conn;
  Stage stage = Stage::kConnecting;
  wire::Nonce leaderNonce = {};
  wire::Nonce followerNonce = {};
  wire::SecureSession session;
  int rank = -1;
  uint32_t flags = 0;
  uint64_t handshakeDeadline = 0;
  uint64_t lastHeardNs = 0;
  uint64_t lastSentNs = 0;
  bool acked = false;
};

void CallRate::update(uint64_t calls, uint64_t nowNs) {
  if (!started_) {
    started_ = true;
    markNs_ = nowNs;
    markCalls_ = calls;
    return;
  }
  const bool firstEarly =
      !known_ && nowNs >= markNs_ + kFirstWindowMinNs && calls >= markCalls_ + kFirstWindowCalls;
  if (nowNs < markNs_ + kWindowNs && !firstEarly) return;
  const double sample = double(calls - std::min(calls, markCalls_)) * 1e9 / double(nowNs - markNs_);
  // A slowdown counts at once, a speed-up is smoothed. The lead is a number of calls: one sized
  // at an earlier, faster rate lasts longer than leadNs, by the full ratio (a size sweep that
  // goes from 20 us to 6 ms per call waited seconds for a change), while one sized too short is
  // refused by a rank already past the switch point and retried with a longer lead.
  rate_ = known_ && sample >= rate_ ? 0.5 * (rate_ + sample) : sample;
  provisional_ = !known_ && nowNs < markNs_ + kWindowNs;
  known_ = true;
  markNs_ = nowNs;
  markCalls_ = calls;
}

uint64_t leadCalls(const CoordinatorConfig& config, const CallRate& rate, uint64_t scale) {
  double timed = config.leadNs == 0 ? 0
                 : rate.known()     ? std::ceil(rate.perSecond() * double(config.leadNs) * 1e-9)
                                    : double(config.unknownRateLead);
  // A first window closed early only shortens the lead: a short window at a job's start can
  // catch a burst (CTest tuner_consensus_mp, 8 ranks on 2 cores: hot swaps of up to 22 ms mean
  // and 43 ms at most per communicator when it could lengthen it, 1.4-2.1 ms and 4.4 ms now).
  if (config.leadNs != 0 && rate.provisional())
    timed = std::min(timed, double(config.unknownRateLead));
  // In floating point: a large scale times a large lead must not wrap.
  const double lead = std::max({timed, double(config.minLead), 1.0}) * double(scale);
  return lead >= double(kMaxLeadCalls) ? kMaxLeadCalls : uint64_t(lead);
}

Coordinator::Coordinator(TunerComm* comm, const CoordinatorConfig& config)
    : comm_(comm), config_(config) {}

Coordinator::~Coordinator() {
  // Orderly goodbye, so that ranks finalizing a little later freeze quietly instead of
  // reporting a lost peer.
  sayGoodbye("finalized the communicator");
  bool bound = listen_.valid();
  peers_.clear();
  listen_.reset();
  if (bound && role_ == Role::kLeader) unlinkEndpoint(config_.endpoint);
}

size_t Coordinator::readyFollowers() const {
  size_t n = 0;
  for (const auto& p : peers_) n += p->stage == Peer::Stage::kReady;
  return n;
}

bool Coordinator::canPropose() const {
  return role_ == Role::kLeader && phase_ == Phase::kReady && !veto_ && !open_;
}

std::string Coordinator::describe() const {
  const char* role = role_ == Role::kLeader     ? "leader"
                     : role_ == Role::kFollower ? "follower"
                     : role_ == Role::kOff      ? "off"
                                                : "undecided";
  const char* phase = phase_ == Phase::kJoining  ? "joining"
                      : phase_ == Phase::kReady  ? "ready"
                      : phase_ == Phase::kFrozen ? "frozen"
                                                 : "off";
  return std::string(role) + "/" + phase + " at " + config_.endpoint.describe();
}

void Coordinator::turnOff(const char* why) {
  if (phase_ == Phase::kOff) return;
  AP_INFO(kFlags, "tuner: comm 0x%llx: no cross-rank agreement (%s); NCCL's choices stand",
          ull(config_.commId), why);
  phase_ = Phase::kOff;
  if (role_ == Role::kUndecided) role_ = Role::kOff;
  open_ = false;
  comm_->setRecording(false);
  comm_->orphan();
  peers_.clear();
  if (listen_.valid() && role_ == Role::kLeader) unlinkEndpoint(config_.endpoint);
  listen_.reset();
}

void Coordinator::freeze(const char* why, bool orderly) {
  if (phase_ == Phase::kFrozen || phase_ == Phase::kOff) return;
  if (open_) abortProposal(why);
  phase_ = Phase::kFrozen;
  comm_->orphan();
  comm_->setRecording(false);
  log::emit(orderly ? abi::kLogInfo : abi::kLogWarn, kFlags, __func__, __LINE__,
            "tuner: comm 0x%llx: %s; frozen at policy v%u (every rank keeps the last table all "
            "ranks committed; no further changes)",
            ull(config_.commId), why, committedVersion_);
  journal::EventJournal::instance().record(journal::Source::kTuner, config_.commId, -1,
                                           "tuner_frozen", "%s at v%u", why, committedVersion_);
  // Tell the others why (they freeze too), then close.
  sayGoodbye(why);
  peers_.clear();
  if (listen_.valid() && role_ == Role::kLeader) unlinkEndpoint(config_.endpoint);
  listen_.reset();
}

void Coordinator::sayGoodbye(const std::string& why) {
  std::string reason = why.substr(0, 200);
  for (auto& p : peers_) {
    if (p->stage == Peer::Stage::kReady) sendSealed(*p, wire::kBye, reason, p->lastSentNs);
  }
}

void Coordinator::decideRole(uint64_t nowNs) {
  startNs_ = nowNs;
  veto_ = config_.userAlgoProto;
  if (config_.endpoint.kind == Endpoint::Kind::kNone) {
    turnOff("no rendezvous");
    return;
  }
  if (config_.nRanks <= 1) {
    role_ = Role::kLeader;
    phase_ = Phase::kReady;
    comm_->setRecording(true);
    return;
  }
  if (config_.rank <= 0) {
    bool inUse = false;
    std::string error;
    listen_ = listenOn(config_.endpoint, config_.rank == 0, &inUse, &error);
    if (listen_.valid()) {
      role_ = Role::kLeader;
      comm_->setRecording(true);
      AP_INFO(kFlags, "tuner: comm 0x%llx: leading %d ranks at %s (rank %d)", ull(config_.commId),
              config_.nRanks, config_.endpoint.describe().c_str(), config_.rank);
      return;
    }
    // In use: another rank of the job already leads (with ranks unknown, or several ranks of
    // one process that the registry cannot tell apart). Follow it; the handshake proves it is
    // one of ours.
    if (!inUse) {
      turnOff(error.c_str());
      return;
    }
  }
  role_ = Role::kFollower;
  AP_INFO(kFlags, "tuner: comm 0x%llx: following the leader at %s (rank %d)", ull(config_.commId),
          config_.endpoint.describe().c_str(), config_.rank);
  startConnect(nowNs);
}

void Coordinator::startConnect(uint64_t nowNs) {
  peers_.clear();
  bool inProgress = false;
  std::string error;
  Fd fd = connectTo(config_.endpoint, &inProgress, &error);
  if (!fd.valid()) {
    // The leader may not be listening yet: retry with a growing delay until the join deadline.
    nextConnectNs_ = nowNs + connectBackoffNs_;
    connectBackoffNs_ = std::min(connectBackoffNs_ * 2, kMaxConnectBackoffNs);
    return;
  }
  auto p = std::make_unique<Peer>();
  p->conn = FrameConnection(std::move(fd));
  p->stage = inProgress ? Peer::Stage::kConnecting : Peer::Stage::kAwaitChallenge;
  p->handshakeDeadline = nowNs + config_.handshakeTimeoutNs;
  p->lastHeardNs = nowNs;
  peers_.push_back(std::move(p));
}

void Coordinator::acceptAll(uint64_t nowNs) {
  for (;;) {
    Fd fd = acceptFrom(listen_.get());
    if (!fd.valid()) return;
    if (phase_ != Phase::kJoining) {
      // Every rank already joined: nobody legitimate is left to come. Closed at once.
      if (++stats_.strangersRejected <= 3) {
        AP_WARN(kFlags, "tuner: comm 0x%llx: closed an unexpected connection to %s",
                ull(config_.commId), config_.endpoint.describe().c_str());
      }
      continue;
    }
    if (peers_.size() - readyFollowers() >= kMaxJoining) {
      // Too many handshakes at once: the oldest goes, not the newcomer, so that connections
      // that never speak (slowloris) cannot keep a late rank out; a legitimate rank completes
      // its handshake in one round trip, and one evicted by mistake reconnects.
      for (size_t k = 0; k < peers_.size(); ++k) {
        if (peers_[k]->stage == Peer::Stage::kReady) continue;
        peers_.erase(peers_.begin() + long(k));
        ++stats_.evicted;
        ++stats_.strangersRejected;
        break;
      }
    }
    auto p = std::make_unique<Peer>();
    p->conn = FrameConnection(std::move(fd));
    p->stage = Peer::Stage::kAwaitHello;
    wire::randomBytes(p->leaderNonce, wire::kNonceSize);
    p->handshakeDeadline = nowNs + config_.handshakeTimeoutNs;
    p->lastHeardNs = nowNs;
    if (p->conn.send(wire::frame(wire::challengeBody(p->leaderNonce)))) {
      peers_.push_back(std::move(p));
    }
  }
}

void Coordinator::collectFds(std::vector<pollfd>* fds) {
  appendPollSlice(listen_, peers_, fds, &fdPeers_, &fdBase_, &fdCount_);
}

void Coordinator::handleEvents(const pollfd* fds, size_t count, uint64_t nowNs) {
  if (count < fdBase_ + fdCount_) return;
  std::vector<Peer*> broken;
  bool accept = false;
  for (size_t i = 0; i < fdCount_; ++i) {
    const pollfd& f = fds[fdBase_ + i];
    Peer* p = fdPeers_[i];
    if (f.revents == 0 && (p == nullptr || !p->conn.hasBufferedFrame())) continue;
    if (p == nullptr) {
      // After the peers: accepting may evict a handshake that fdPeers_ still points to.
      accept = listen_.valid();
      continue;
    }
    if (p->stage == Peer::Stage::kConnecting) {
      std::string error;
      if (!connectFinished(p->conn.fd(), &error)) {
        broken.push_back(p);
        continue;
      }
      p->stage = Peer::Stage::kAwaitChallenge;
    }
    if ((f.revents & POLLOUT) && !p->conn.flush()) {
      broken.push_back(p);
      continue;
    }
    if ((f.revents & (POLLIN | POLLHUP | POLLERR)) || p->conn.hasBufferedFrame()) {
      // Before authentication a peer may send exactly one small handshake frame; after it,
      // a bounded number of frames per round (the rest wait in its buffer).
      const bool ready = p->stage == Peer::Stage::kReady;
      frames_.clear();
      bool alive = p->conn.readFrames(&frames_, ready ? wire::kMaxFrameBody : kMaxHandshakeBody,
                                      ready ? kFramesPerRound : 1);
      for (const std::string& body : frames_) {
        bool ok = onFrame(*p, body, nowNs);
        if (phase_ == Phase::kOff || phase_ == Phase::kFrozen) return;  // peers_ was cleared
        if (!ok) {
          alive = false;
          break;
        }
      }
      if (!alive) broken.push_back(p);
    }
  }
  for (Peer* p : broken) {
    for (size_t i = 0; i < peers_.size(); ++i) {
      if (peers_[i].get() == p) {
        dropPeer(i, "connection closed", nowNs);
        break;
      }
    }
    if (phase_ == Phase::kOff || phase_ == Phase::kFrozen) return;
  }
  if (accept) acceptAll(nowNs);
}

void Coordinator::dropPeer(size_t index, const char* why, uint64_t nowNs) {
  const bool wasReady = peers_[index]->stage == Peer::Stage::kReady;
  const int rank = peers_[index]->rank;
  peers_.erase(peers_.begin() + long(index));
  if (role_ == Role::kLeader) {
    if (wasReady) {
      std::string msg = "lost the follower of rank " + std::to_string(rank) + " (" + why + ")";
      freeze(msg.c_str());
    }
    return;
  }
  if (phase_ == Phase::kReady) {
    std::string msg = std::string("lost the leader (") + why + ")";
    freeze(msg.c_str());
  } else if (phase_ == Phase::kJoining) {
    nextConnectNs_ = nowNs + connectBackoffNs_;  // the handshake failed: try again later
  }
}

bool Coordinator::sendSealed(Peer& p, uint8_t type, const std::string& payload, uint64_t nowNs) {
  p.lastSentNs = nowNs;
  return p.conn.send(wire::frame(p.session.seal(type, payload)));
}

bool Coordinator::onFrame(Peer& p, const std::string& body, uint64_t nowNs) {
  p.lastHeardNs = nowNs;
  if (p.stage != Peer::Stage::kReady) return onHandshakeFrame(p, body, nowNs);
  uint8_t type;
  std::string payload;
  if (!p.session.open(body, &type, &payload)) {
    AP_WARN(kFlags,
            "tuner: comm 0x%llx: a control message failed authentication; dropping the "
            "connection",
            ull(config_.commId));
    return false;
  }
  wire::Reader r(payload.data(), payload.size());
  return role_ == Role::kLeader ? onLeaderMessage(p, type, r, nowNs)
                                : onFollowerMessage(p, type, r, nowNs);
}

bool Coordinator::onHandshakeFrame(Peer& p, const std::string& body, uint64_t nowNs) {
  wire::Reader r(body.data(), body.size());
  uint8_t type = 0;
  if (!r.u8(&type)) return false;
  if (role_ == Role::kFollower && p.stage == Peer::Stage::kAwaitChallenge &&
      type == wire::kChallenge) {
    uint32_t version;
    if (!wire::readChallenge(&r, &version, p.leaderNonce)) return false;
    if (version != wire::kProtocolVersion) {
      turnOff("the leader speaks another protocol version (library versions differ)");
      return false;
    }
    uint32_t flags = config_.userAlgoProto ? wire::kFlagUserAlgoProto : 0;
    p.stage = Peer::Stage::kAwaitWelcome;
    return p.conn.send(wire::frame(
        wire::helloBody(config_.key, p.leaderNonce, p.followerNonce, config_.rank, flags)));
  }
  if (role_ == Role::kFollower && p.stage == Peer::Stage::kAwaitWelcome && type == wire::kWelcome) {
    bool authentic = false;
    if (!wire::readWelcome(&r, config_.key, p.leaderNonce, p.followerNonce, &authentic)) {
      return false;
    }
    if (!authentic) {
      AP_WARN(kFlags,
              "tuner: comm 0x%llx: the process at %s cannot prove the job key: not our "
              "leader; refusing it",
              ull(config_.commId), config_.endpoint.describe().c_str());
      return false;
    }
    p.session =
        wire::SecureSession(wire::sessionKey(config_.key, p.leaderNonce, p.followerNonce), false);
    p.stage = Peer::Stage::kReady;
    phase_ = Phase::kReady;
    stats_.joinedAfterNs = nowNs - startNs_;
    AP_INFO(kFlags, "tuner: comm 0x%llx: joined the leader after %llu ms", ull(config_.commId),
            ull(stats_.joinedAfterNs / 1000000));
    return true;
  }
  if (role_ == Role::kLeader && p.stage == Peer::Stage::kAwaitHello && type == wire::kHello) {
    int32_t rank;
    uint32_t flags;
    bool ok = false;
    if (!wire::readHello(&r, config_.key, p.leaderNonce, p.followerNonce, &rank, &flags, &ok)) {
      return false;
    }
    const char* why = ok ? nullptr : "cannot prove the job key";
    // Rank claims. A follower claims a rank of the communicator other than the leader's, or -1
    // (unknown: no profiler of ours, or several ranks of one process that the registry cannot
    // tell apart). A second claim of a rank already claimed means someone who holds the key is
    // not one of our ranks (or a rank came twice). Since nothing is proposed before every rank
    // joined, freezing now leaves every rank at NCCL's defaults, whoever came first; pushing
    // the real rank out instead would let the others switch without it and hang NCCL. Unknown
    // ranks cannot be checked for duplicates.
    if (ok && (rank < -1 || rank >= config_.nRanks || (rank >= 0 && rank == config_.rank))) {
      why = "claims no valid rank of the communicator";
    }
    if (ok && why == nullptr && rank >= 0) {
      for (const auto& other : peers_) {
        if (other->stage != Peer::Stage::kReady || other->rank != rank) continue;
        ++stats_.duplicateClaims;
        std::string msg = "rank " + std::to_string(rank) + " was claimed by two connections at " +
                          config_.endpoint.describe() +
                          " (a process outside the job holds the key, or a rank joined twice); "
                          "NCCL's defaults stand on every rank";
        freeze(msg.c_str());
        return false;
      }
    }
    if (why != nullptr) {
      ++stats_.strangersRejected;
      if (stats_.strangersRejected <= 3) {
        AP_WARN(kFlags, "tuner: comm 0x%llx: rejected a connection to %s: it %s",
                ull(config_.commId), config_.endpoint.describe().c_str(), why);
      }
      return false;
    }
    if (!p.conn.send(wire::frame(wire::welcomeBody(config_.key, p.leaderNonce, p.followerNonce)))) {
      return false;
    }
    p.session =
        wire::SecureSession(wire::sessionKey(config_.key, p.leaderNonce, p.followerNonce), true);
    p.rank = rank;
    p.flags = flags;
    p.stage = Peer::Stage::kReady;
    p.lastSentNs = nowNs;
    if (flags & wire::kFlagUserAlgoProto) veto_ = true;
    if (readyFollowers() == size_t(config_.nRanks - 1)) {
      phase_ = Phase::kReady;
      stats_.joinedAfterNs = nowNs - startNs_;
      AP_INFO(kFlags, "tuner: comm 0x%llx: all %d ranks joined after %llu ms%s",
              ull(config_.commId), config_.nRanks, ull(stats_.joinedAfterNs / 1000000),
              veto_ ? "; NCCL_ALGO/NCCL_PROTO set on some rank: learning off, NCCL's "
                      "choices stand"
                    : "");
    }
    return true;
  }
  return false;  // anything else during a handshake is a protocol violation
}

bool Coordinator::onLeaderMessage(Peer& p, uint8_t type, wire::Reader& r, uint64_t nowNs) {
  uint32_t version;
  uint64_t calls;
  switch (type) {
    case wire::kAck:
    case wire::kNack:
      if (!r.u32(&version) || !r.u64(&calls)) return false;
      maxReportedCalls_ = std::max(maxReportedCalls_, calls);
      if (!open_ || version != version_) return true;  // an answer to an aborted proposal
      if (type == wire::kNack) {
        ++stats_.refusals;
        if (calls < openAt_) {
          // Not late: the rank still holds the previous table, short of its switch point.
          // Retry once it can have made the calls up to there (at least one call interval).
          ++stats_.busyRefusals;
          const uint64_t behind = committedAt_ > calls ? committedAt_ - calls + 1 : 1;
          const double perSecond = callRate_.known() ? callRate_.perSecond() : 0;
          const uint64_t capNs = std::max<uint64_t>(config_.leadNs, kMinBusyHoldNs);
          const uint64_t holdNs =
              perSecond > 0 ? uint64_t(std::min(double(capNs), double(behind) * 1e9 / perSecond))
                            : capNs;
          proposeNotBeforeNs_ = nowNs + std::max(holdNs, kMinBusyHoldNs);
          abortProposal("a rank still held the previous table");
          return true;
        }
        leadScale_ = std::min(leadScale_ * 4, kMaxLeadCalls);
        abortProposal("a rank was already past the switch point");
        return true;
      }
      if (!p.acked) {
        p.acked = true;
        ++acks_;
      }
      if (acks_ == size_t(config_.nRanks - 1)) {
        comm_->resolve(version_, true);
        wire::Writer w;
        w.u32(version_);
        for (auto& peer : peers_) {
          if (peer->stage == Peer::Stage::kReady) sendSealed(*peer, wire::kCommit, w.str(), nowNs);
        }
        committed_ = proposed_;
        committedVersion_ = version_;
        committedAt_ = openAt_;
        open_ = false;
        ++stats_.commits;
        leadScale_ = std::max<uint64_t>(1, leadScale_ / 2);
      }
      return true;
    case wire::kHeartbeat:
      if (!r.u64(&calls)) return false;
      maxReportedCalls_ = std::max(maxReportedCalls_, calls);
      return true;
    case wire::kBye: {
      std::string why = "rank " + std::to_string(p.rank) + ": " + byeReason(r);
      freeze(why.c_str(), true);
      return true;
    }
    default:
      return false;
  }
}

bool Coordinator::onFollowerMessage(Peer& p, uint8_t type, wire::Reader& r, uint64_t nowNs) {
  uint32_t version;
  switch (type) {
    case wire::kPropose: {
      uint64_t at, proposedAt, calls = comm_->calls();
      DecisionTable table;
      if (!r.u32(&version) || !r.u64(&at) || !r.u64(&proposedAt)) return false;
      bool valid = wire::decodeTable(&r, &table);
      if (!valid) {
        AP_WARN(kFlags, "tuner: comm 0x%llx: refusing malformed policy v%u", ull(config_.commId),
                version);
      }
      TunerComm::StageResult result = valid ? comm_->stage(version, at, proposedAt, table, &calls)
                                            : TunerComm::StageResult::kFrozen;
      wire::Writer w;
      w.u32(version);
      w.u64(calls);
      return sendSealed(p, result == TunerComm::StageResult::kStaged ? wire::kAck : wire::kNack,
                        w.str(), nowNs);
    }
    case wire::kCommit:
    case wire::kAbort:
      if (!r.u32(&version)) return false;
      comm_->resolve(version, type == wire::kCommit);
      if (type == wire::kCommit) committedVersion_ = version;
      return true;
    case wire::kHeartbeat: {
      uint64_t calls;
      return r.u64(&calls);
    }
    case wire::kBye: {
      std::string why = "the leader: " + byeReason(r);
      freeze(why.c_str(), true);
      return true;
    }
    default:
      return false;
  }
}

bool Coordinator::propose(const DecisionTable& desired, uint64_t nowNs) {
  if (!canPropose() || nowNs < proposeNotBeforeNs_) return false;
  // The leader stages exactly what the followers will decode (the wire form is canonical), so
  // every rank holds the same bytes.
  wire::Writer encoded;
  wire::encodeTable(desired, &encoded);
  DecisionTable table;
  wire::Reader decoder(encoded.str().data(), encoded.str().size());
  if (!wire::decodeTable(&decoder, &table)) return false;
  const uint32_t version = version_ + 1;
  const uint64_t at =
      std::max(comm_->calls(), maxReportedCalls_) + leadCalls(config_, callRate_, leadScale_);
  uint64_t calls = 0;
  switch (comm_->stage(version, at, nowNs, table, &calls)) {
    case TunerComm::StageResult::kStaged:
      break;
    case TunerComm::StageResult::kTooLate:
      leadScale_ = std::min(leadScale_ * 2, kMaxLeadCalls);
      return false;
    case TunerComm::StageResult::kBusy:
      return false;
    case TunerComm::StageResult::kFrozen:
      freeze("this rank stopped taking changes");
      return false;
  }
  version_ = version;
  open_ = true;
  openAt_ = at;
  acks_ = 0;
  proposed_ = table;
  openDeadline_ = nowNs + config_.ackTimeoutNs;
  ++stats_.proposals;
  if (config_.nRanks <= 1) {
    comm_->resolve(version, true);
    committed_ = table;
    committedVersion_ = version;
    open_ = false;
    ++stats_.commits;
    return true;
  }
  wire::Writer w;
  w.u32(version);
  w.u64(at);
  w.u64(nowNs);
  w.bytes(encoded.str().data(), encoded.str().size());
  for (size_t i = 0; i < peers_.size(); ++i) {
    Peer& p = *peers_[i];
    if (p.stage != Peer::Stage::kReady) continue;
    p.acked = false;
    if (!sendSealed(p, wire::kPropose, w.str(), nowNs)) {
      dropPeer(i, "send failed", nowNs);
      return true;  // dropPeer froze the comm (and aborted the proposal)
    }
  }
  return true;
}

void Coordinator::abortProposal(const char* why) {
  if (!open_) return;
  AP_TRACE(kFlags, "tuner: comm 0x%llx: policy v%u aborted: %s", ull(config_.commId), version_,
           why);
  (void)why;
  comm_->resolve(version_, false);
  wire::Writer w;
  w.u32(version_);
  for (auto& peer : peers_) {
    if (peer->stage == Peer::Stage::kReady)
      sendSealed(*peer, wire::kAbort, w.str(), peer->lastSentNs);
  }
  open_ = false;
  ++stats_.aborts;
}

void Coordinator::tick(uint64_t nowNs) {
  if (role_ == Role::kUndecided) decideRole(nowNs);
  if (phase_ == Phase::kOff || phase_ == Phase::kFrozen) return;
  if (role_ == Role::kLeader) callRate_.update(comm_->calls(), nowNs);
  if (phase_ == Phase::kJoining && nowNs - startNs_ > config_.joinTimeoutNs) {
    std::string why = role_ == Role::kLeader ? std::to_string(readyFollowers()) + " of " +
                                                   std::to_string(config_.nRanks - 1) +
                                                   " followers joined within the join timeout"
                                             : "no leader answered within the join timeout";
    turnOff(why.c_str());
    return;
  }
  if (role_ == Role::kFollower && peers_.empty() && phase_ == Phase::kJoining &&
      nowNs >= nextConnectNs_) {
    startConnect(nowNs);
  }
  for (size_t i = 0; i < peers_.size();) {
    Peer& p = *peers_[i];
    if (p.stage != Peer::Stage::kReady && nowNs > p.handshakeDeadline) {
      if (role_ == Role::kLeader) ++stats_.strangersRejected;  // never completed the handshake
      dropPeer(i, "handshake timed out", nowNs);
      continue;
    }
    if (p.stage == Peer::Stage::kReady && nowNs - p.lastHeardNs > config_.peerTimeoutNs) {
      dropPeer(i, "silent beyond the peer timeout", nowNs);
      if (phase_ != Phase::kJoining && phase_ != Phase::kReady) return;
      continue;
    }
    if (p.stage == Peer::Stage::kReady && nowNs - p.lastSentNs >= config_.heartbeatNs) {
      wire::Writer w;
      w.u64(comm_->calls());
      if (!sendSealed(p, wire::kHeartbeat, w.str(), nowNs)) {
        dropPeer(i, "send failed", nowNs);
        if (phase_ != Phase::kJoining && phase_ != Phase::kReady) return;
        continue;
      }
    }
    ++i;
  }
  if (open_ && nowNs > openDeadline_) {
    freeze("a rank did not answer a proposal within the ack timeout");
  }
}

uint64_t Coordinator::nextDeadline() const {
  if (role_ == Role::kUndecided) return 0;
  if (phase_ == Phase::kOff || phase_ == Phase::kFrozen) return ~uint64_t(0);
  uint64_t next = ~uint64_t(0);
  if (phase_ == Phase::kJoining) next = std::min(next, startNs_ + config_.joinTimeoutNs);
  if (role_ == Role::kFollower && peers_.empty()) next = std::min(next, nextConnectNs_);
  for (const auto& p : peers_) {
    if (p->stage != Peer::Stage::kReady) {
      next = std::min(next, p->handshakeDeadline);
    } else {
      next = std::min(next, p->lastSentNs + config_.heartbeatNs);
      next = std::min(next, p->lastHeardNs + config_.peerTimeoutNs);
    }
  }
  if (open_) next = std::min(next, openDeadline_);
  for (const auto& p : peers_) {
    if (p->conn.hasBufferedFrame()) return 0;  // frames left from the last round's budget
  }
  return next;
}

}  // namespace autopilot::tuner

// Agreement on decision tables across the ranks of one communicator (the consensus protocol).
// Runs only on the tuner service thread.
//
// Roles. With ranks known (our profiler recorded them), rank 0 leads; with ranks unknown
// (another profiler plugin, or none) every rank tries to bind the rendezvous address and the one
// that wins leads: bind() on one address succeeds exactly once; a rank 0 that finds the address
// held by a live listener follows it. Only the leader learns. The leader proposes only once
// nRanks-1 authenticated followers joined: all other ranks, whatever rank numbers they report;
// two processes that both believe they lead cannot both gather them, so they never propose.
//
// Protocol (one proposal at a time; see tuner_comm.h for the switch point):
//  1. All nRanks-1 followers join through the authenticated handshake (wire_format.h). Until
//     then, and forever if they do not within the join timeout, nothing is proposed: every rank
//     leaves NCCL's tables untouched.
//  2. The leader proposes table v to take effect at call index E = max(own calls, calls last
//     reported by any follower) + lead, staging it for itself first.
//  3. Each follower stages it and acknowledges if it has made fewer than E calls, else refuses.
//     It also refuses while it still holds the previous committed table, short of that table's
//     switch point (one staged table per rank).
//  4. All acknowledged: COMMIT v. Any refusal: ABORT v. A refusal that reports E or more calls
//     was late, and the lead grows (x4). One that reports fewer came from a rank still short of
//     the previous switch point: the lead stays, and the next proposal waits until that rank
//     can have reached it. (In the mistuned demo every refusal was of this kind: the leader
//     proposes as soon as its own table took effect, and other ranks trail it by a call or two.
//     Grown on them, the lead made single hot swaps take up to 14 s.) No answer from everyone
//     within the ack timeout: ABORT v and freeze.
//     The lead is counted in calls, since E must be a call index, but sized in time: what
//     CoordinatorConfig::leadNs spans at the communicator's call rate. A job that calls rarely
//     (a few large collectives a second) would otherwise wait seconds for every change, and one
//     that calls thousands of times a second would see its ranks reach E before the commit.
//  5. Every rank switches exactly at call E if committed, and keeps its table if aborted; a
//     rank that reaches E before the verdict waits for it (bounded by the sync timeout).
//
// Failure outcomes (all bounded in time; none crashes or blocks NCCL beyond the sync timeout):
//  - a stranger connects (no key): rejected at the handshake and counted; the job is unaffected;
//    connections that never complete a handshake are bounded (the oldest is evicted) and time
//    out; a flood costs bounded reads per service round (control_channel.h);
//  - a rank claimed twice (someone outside the job holds the key): the communicator freezes
//    while every rank is still at NCCL's defaults;
//    a stranger that squats the address first (TCP) cannot prove the key, so followers refuse it
//    and nothing is ever proposed (NCCL's own choices everywhere);
//  - a follower dies or its channel is cut: the leader aborts any open proposal and freezes;
//    every rank keeps the last table all of them committed (no rank changes alone);
//  - the leader dies or its channel is cut: followers drop any open proposal and freeze at the
//    last committed table;
//  - the one window no protocol with bounded waits can close: a channel cut after a follower
//    acknowledged and before the commit reached it. That follower keeps its table while the
//    others switch. The window is one message delay long, once per proposal; after it the
//    communicator is frozen, so it cannot recur. (A dead leader makes the point moot: NCCL cannot
//    complete a collective without it anyway.)
#pragma once

#include <poll.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "tuner_plugin/control_channel.h"
#include "tuner_plugin/decision.h"
#include "tuner_plugin/wire_format.h"

namespace autopilot::tuner {

class TunerComm;

struct CoordinatorConfig {
  uint64_t commId = 0;
  int nRanks = 1;
  int nNodes = 1;
  int rank = -1;               // -1: unknown (leader elected by the rendezvous)
  bool userAlgoProto = false;  // NCCL_ALGO/NCCL_PROTO set here: veto learning for the comm
  Endpoint endpoint;
  Digest key{};
  uint64_t joinTimeoutNs = 120'000'000'000ull;
  uint64_t ackTimeoutNs = 5'000'000'000ull;
  uint64_t peerTimeoutNs = 30'000'000'000ull;
  uint64_t heartbeatNs = 200'000'000ull;
  uint64_t handshakeTimeoutNs = 2'000'000'000ull;
  // The lead, calls between a proposal and its switch point: what leadNs spans at the
  // communicator's call rate (CallRate), at least minLead calls; unknownRateLead calls before the
  // rate is known (leadNs 0: minLead calls always). Refusals scale it up, commits back down.
  uint64_t minLead = 2;
  uint64_t leadNs = 100'000'000;
  uint64_t unknownRateLead = 64;
};

// The communicator's call rate as the leader sees it: its own calls, since every rank makes the
// same ones. Estimated over windows of kWindowNs: a window with fewer calls than the estimate
// replaces it, one with more is averaged in (the lead errs towards short, see update()). The
// first window closes as soon as it spans kFirstWindowMinNs and kFirstWindowCalls calls: a
// policy proposes its first table a few calls into a job, and before the rate is known the lead
// is unknownRateLead calls (64: 3.2 s in the mistuned demo, at 20 calls a second). What that
// early window measured may shorten the lead below unknownRateLead, never lengthen it
// (provisional(), leadCalls()).
class CallRate {
 public:
  static constexpr uint64_t kWindowNs = 250'000'000;
  static constexpr uint64_t kFirstWindowMinNs = 20'000'000;
  static constexpr uint64_t kFirstWindowCalls = 4;
  // `calls` made so far, at `nowNs`.
  void update(uint64_t calls, uint64_t nowNs);
  bool known() const { return known_; }
  // The rate comes from a first window closed early (it may only shorten the lead).
  bool provisional() const { return provisional_; }
  double perSecond() const { return rate_; }

 private:
  bool started_ = false, known_ = false;
  bool provisional_ = false;  // only a first window closed early measured the rate
  uint64_t markNs_ = 0, markCalls_ = 0;
  double rate_ = 0;
};

// The lead for a proposal now (see CoordinatorConfig), times `scale` (1, or more after refusals),
// capped at kMaxLeadCalls.
inline constexpr uint64_t kMaxLeadCalls = 1ull << 24;
uint64_t leadCalls(const CoordinatorConfig& config, const CallRate& rate, uint64_t scale);

class Coordinator {
 public:
  enum class Role { kUndecided, kLeader, kFollower, kOff };
  enum class Phase { kJoining, kReady, kFrozen, kOff };

  struct Stats {
    uint64_t proposals = 0, commits = 0, aborts = 0, refusals = 0;
    uint64_t busyRefusals = 0;  // of the refusals: a rank still short of the previous switch
    uint64_t strangersRejected = 0;
    uint64_t evicted = 0;          // unauthenticated connections closed to make room
    uint64_t duplicateClaims = 0;  // a rank claimed twice (the communicator froze)
    uint64_t joinedAfterNs = 0;    // time until every follower had joined
  };

  Coordinator(TunerComm* comm, const CoordinatorConfig& config);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  Role role() const { return role_; }
  Phase phase() const { return phase_; }
  // Leader: everyone joined, no veto, not frozen, and no proposal open.
  bool canPropose() const;
  bool vetoed() const { return veto_; }
  // Leader: starts a proposal (no-op unless canPropose()). Returns false when the comm could not
  // stage it yet (the previous table has not reached its switch point, here or, as a refusal
  // said, on a follower): try again later.
  bool propose(const DecisionTable& table, uint64_t nowNs);
  // The committed table (what every rank runs from its switch point on).
  const DecisionTable& committed() const { return committed_; }
  uint32_t committedVersion() const { return committedVersion_; }

  // Poll plumbing: append fds, then hand back the same slice after poll().
  void collectFds(std::vector<pollfd>* fds);
  void handleEvents(const pollfd* fds, size_t count, uint64_t nowNs);
  // Timers (connect retries, handshake/ack/peer timeouts, heartbeats, join deadline).
  void tick(uint64_t nowNs);
  // Earliest time tick() has something to do.
  uint64_t nextDeadline() const;

  const Stats& stats() const { return stats_; }
  // Leader: the factor on the lead (1, grown by late refusals, halved by commits).
  uint64_t leadScale() const { return leadScale_; }
  std::string describe() const;

 private:
  struct Peer;
  void decideRole(uint64_t nowNs);
  void startConnect(uint64_t nowNs);
  void acceptAll(uint64_t nowNs);
  bool onFrame(Peer& p, const std::string& body, uint64_t nowNs);
  bool onHandshakeFrame(Peer& p, const std::string& body, uint64_t nowNs);
  bool onLeaderMessage(Peer& p, uint8_t type, wire::Reader& r, uint64_t nowNs);
  bool onFollowerMessage(Peer& p, uint8_t type, wire::Reader& r, uint64_t nowNs);
  bool sendSealed(Peer& p, uint8_t type, const std::string& payload, uint64_t nowNs);
  void dropPeer(size_t index, const char* why, uint64_t nowNs);
  void abortProposal(const char* why);
  // Stops all changes (every rank keeps the last committed table). `orderly`: a goodbye from
  // another rank, logged at INFO; otherwise a fault, at WARN.
  void freeze(const char* why, bool orderly = false);
  void sayGoodbye(const std::string& why);
  void turnOff(const char* why);
  size_t readyFollowers() const;

  TunerComm* comm_;
  CoordinatorConfig config_;
  Role role_ = Role::kUndecided;
  Phase phase_ = Phase::kJoining;
  bool veto_ = false;
  uint64_t startNs_ = 0;
  uint64_t nextConnectNs_ = 0;
  uint64_t connectBackoffNs_ = 10'000'000;

  Fd listen_;
  std::vector<std::unique_ptr<Peer>> peers_;  // leader: followers (joining or ready); follower: 1
  size_t fdBase_ = 0, fdCount_ = 0;           // this coordinator's slice of the poll array
  std::vector<Peer*> fdPeers_;                // peer of each polled fd (nullptr: the listener)
  std::vector<std::string> frames_;           // one peer's frames of this round (reused)

  // Leader's open proposal.
  bool open_ = false;
  uint32_t version_ = 0;
  uint64_t openAt_ = 0;
  uint64_t openDeadline_ = 0;
  size_t acks_ = 0;
  DecisionTable proposed_;
  uint64_t leadScale_ = 1;           // x4 per late refusal, x2 per late staging, halved per commit
  uint64_t committedAt_ = 0;         // the switch point of the last committed table
  uint64_t proposeNotBeforeNs_ = 0;  // after a busy refusal: when that rank can be past it
  CallRate callRate_;                // leader only
  uint64_t maxReportedCalls_ = 0;

  DecisionTable committed_;
  uint32_t committedVersion_ = 0;
  Stats stats_;
};

}  // namespace autopilot::tuner

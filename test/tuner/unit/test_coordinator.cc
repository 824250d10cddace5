// The consensus protocol in one process: a leader and followers (each a TunerComm plus a
// Coordinator) over real Unix sockets in a temporary directory, pumped by hand, so that every
// step of the protocol and every refusal is observable and deterministic.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "model/cost_model.h"
#include "tuner_plugin/coordinator.h"
#include "tuner_plugin/tuner_comm.h"

using namespace autopilot;
using namespace autopilot::tuner;

namespace {

constexpr uint64_t kComm = 0xC0FFEE;
constexpr uint64_t kMiB = 1 << 20;

std::string socketPath() {
  char tmpl[] = "/tmp/ap-coord-XXXXXX";
  char* d = mkdtemp(tmpl);
  return std::string(d ? d : "/tmp") + "/t.sock";
}

struct Node {
  TunerComm comm;
  std::unique_ptr<Coordinator> coord;
  Node(const CoordinatorConfig& cfg, uint64_t syncTimeoutNs = 2'000'000'000)
      : comm(cfg.commId, 0, syncTimeoutNs, nullptr),
        coord(std::make_unique<Coordinator>(&comm, cfg)) {}
};

CoordinatorConfig config(const std::string& path, int rank, int nRanks,
                         const std::string& secret = "") {
  CoordinatorConfig c;
  c.commId = kComm;
  c.nRanks = nRanks;
  c.nNodes = 1;
  c.rank = rank;
  c.endpoint.kind = Endpoint::Kind::kUnix;
  c.endpoint.path = path;
  c.key = wire::jobKey(kComm, nRanks, 1, secret);
  c.joinTimeoutNs = 5'000'000'000;
  c.heartbeatNs = 20'000'000;
  return c;
}

// Runs every coordinator's poll/handle/tick for `ms`, or until `done` holds.
template <typename Done>
bool pumpUntil(std::vector<Node*> nodes, int ms, Done done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> fds;
    for (Node* n : nodes) {
      if (n->coord) n->coord->collectFds(&fds);
    }
    poll(fds.data(), fds.size(), 1);
    uint64_t now = monotonicNs();
    for (Node* n : nodes) {
      if (!n->coord) continue;
      n->coord->handleEvents(fds.data(), fds.size(), now);
      n->coord->tick(now);
    }
    if (done()) return true;
  }
  return done();
}

bool ready(Node& n) { return n.coord->phase() == Coordinator::Phase::kReady; }

// Pumps both until leader and follower hold committed version `v` (3 s at most).
bool committedOnBoth(Node& leader, Node& follower, uint32_t v) {
  return pumpUntil({&leader, &follower}, 3000, [&] {
    return leader.coord->committedVersion() == v && follower.coord->committedVersion() == v;
  });
}

// One call of the tuner on `n` for an AllReduce of 1 MiB; returns the cell NCCL would run.
int call(TunerComm& comm, float cost = 10.0f) {
  float table[abi::kNumAlgorithms][abi::kNumProtocols];
  for (auto& row : table) {
    for (float& v : row) v = -1.0f;
  }
  table[abi::kAlgoTree][abi::kProtoLL128] = cost;       // NCCL's choice
  table[abi::kAlgoRing][abi::kProtoSimple] = cost * 2;  // the one the policy will force
  int nChannels = 0;
  comm.getCollInfo(abi::kFuncAllReduce, kMiB, 1, reinterpret_cast<float**>(table),
                   abi::kNumAlgorithms, abi::kNumProtocols, &nChannels);
  return model::ncclChoice(&table[0][0]);
}
int call(Node& n) { return call(n.comm); }

DecisionTable forcingRingSimple() {
  DecisionTable t;
  t.entries[contextIndex(abi::kFuncAllReduce, kMiB, 1)].primary =
      int8_t(abi::kAlgoRing * abi::kNumProtocols + abi::kProtoSimple);
  return t;
}

// Both joined, and version 1 (forcingRingSimple) committed on both.
bool joinedWithRingSimple(Node& leader, Node& follower) {
  return pumpUntil({&leader, &follower}, 3000, [&] { return ready(leader) && ready(follower); }) &&
         leader.coord->propose(forcingRingSimple(), monotonicNs()) &&
         committedOnBoth(leader, follower, 1);
}

constexpr int kTreeLL128 = abi::kAlgoTree * abi::kNumProtocols + abi::kProtoLL128;
constexpr int kRingSimple = abi::kAlgoRing * abi::kNumProtocols + abi::kProtoSimple;

}  // namespace

TEST_CASE("leader and follower agree on a table and switch at the same call", "[coordinator]") {
  std::string path = socketPath();
  Node leader(config(path, 0, 2)), follower(config(path, 1, 2));
  REQUIRE(pumpUntil({&leader, &follower}, 3000, [&] { return ready(leader) && ready(follower); }));
  CHECK(leader.coord->role() == Coordinator::Role::kLeader);
  CHECK(follower.coord->role() == Coordinator::Role::kFollower);
  REQUIRE(leader.coord->canPropose());
  REQUIRE(leader.coord->propose(forcingRingSimple(), monotonicNs()));
  REQUIRE(committedOnBoth(leader, follower, 1));
  std::vector<int> a, b;
  for (int i = 1; i <= 80; ++i) {
    a.push_back(call(leader));
    b.push_back(call(follower));
  }
  CHECK(a == b);
  // NCCL's own choice up to the agreed index (64: the minimum lead), the agreed one from it on.
  CHECK(a[62] == kTreeLL128);
  CHECK(a[63] == kRingSimple);
  CHECK(leader.comm.appliedVersion() == 1);
  CHECK(follower.comm.appliedVersion() == 1);
}

TEST_CASE("a rank already past the switch point refuses; the leader aborts and tries later",
          "[coordinator]") {
  std::string path = socketPath();
  Node leader(config(path, 0, 2)), follower(config(path, 1, 2));
  REQUIRE(pumpUntil({&leader, &follower}, 3000, [&] { return ready(leader) && ready(follower); }));
  for (int i = 0; i < 1000; ++i) call(follower);  // the follower runs ahead
  REQUIRE(leader.coord->propose(forcingRingSimple(), monotonicNs()));
  pumpUntil({&leader, &follower}, 3000, [&] { return leader.coord->stats().aborts == 1; });
  CHECK(leader.coord->stats().aborts == 1);
  CHECK(leader.coord->stats().refusals == 1);
  CHECK(leader.coord->stats().busyRefusals == 0);
  CHECK(leader.coord->leadScale() == 4);
  CHECK(leader.coord->committedVersion() == 0);
  // The refusal told the leader how far the follower is: the next proposal lands beyond it.
  REQUIRE(pumpUntil({&leader, &follower}, 3000, [&] { return leader.coord->canPropose(); }));
  REQUIRE(leader.coord->propose(forcingRingSimple(), monotonicNs()));
  REQUIRE(committedOnBoth(leader, follower, 2));
  std::vector<int> a, b;
  for (int i = 1; i <= 2000; ++i) a.push_back(call(leader));
  for (int i = 1001; i <= 2000; ++i) b.push_back(call(follower));
  CHECK(std::vector<int>(a.begin() + 1000, a.end()) == b);
  CHECK(a.back() == kRingSimple);
  CHECK(a.front() == kTreeLL128);
}

TEST_CASE("a rank still short of the previous switch point refuses; the lead does not grow",
          "[coordinator]") {
  std::string path = socketPath();
  Node leader(config(path, 0, 2)), follower(config(path, 1, 2));
  REQUIRE(joinedWithRingSimple(leader, follower));
  // The leader passes the switch point; the follower, a call or more behind, still holds v1.
  std::vector<int> a, b;
  for (int i = 0; i < 100; ++i) a.push_back(call(leader));
  REQUIRE(leader.comm.appliedVersion() == 1);
  REQUIRE(follower.comm.appliedVersion() == 0);
  REQUIRE(leader.coord->propose(DecisionTable(), monotonicNs()));
  REQUIRE(pumpUntil({&leader, &follower}, 3000, [&] { return leader.coord->stats().aborts == 1; }));
  CHECK(leader.coord->stats().refusals == 1);
  CHECK(leader.coord->stats().busyRefusals == 1);
  CHECK(leader.coord->leadScale() == 1);  // a late refusal would have made it 4
  CHECK(leader.coord->committedVersion() == 1);
  // Once the follower is past v1's switch point, the proposal is taken up again.
  for (int i = 0; i < 100; ++i) b.push_back(call(follower));
  REQUIRE(follower.comm.appliedVersion() == 1);
  REQUIRE(pumpUntil({&leader, &follower}, 3000, [&] {
    return leader.coord->propose(DecisionTable(), monotonicNs()) ||
           leader.coord->committedVersion() == 3;
  }));
  REQUIRE(committedOnBoth(leader, follower, 3));
  for (int i = 0; i < 1000; ++i) {
    a.push_back(call(leader));
    b.push_back(call(follower));
  }
  CHECK(a == b);
  CHECK(a.back() == kTreeLL128);  // back to NCCL's choice, on both
  CHECK(leader.coord->stats().busyRefusals == 1);
}

TEST_CASE("the lead spans a fixed time at the measured call rate", "[coordinator]") {
  CoordinatorConfig c;  // 100 ms, at least 2 calls, 64 before the rate is known
  CallRate rate;
  CHECK(leadCalls(c, rate, 1) == 64);
  const uint64_t ms = 1'000'000;
  rate.update(0, 0);
  // The first window closes as soon as it spans 20 ms and 4 calls (the first proposal comes a
  // few calls into a job, and 64 calls of lead were 3.2 s in the mistuned demo); later ones
  // span 250 ms.
  rate.update(3, 10 * ms);
  CHECK_FALSE(rate.known());
  rate.update(3, 30 * ms);
  CHECK_FALSE(rate.known());
  rate.update(100, 100 * ms);  // 1,000 calls a second
  REQUIRE(rate.known());
  CHECK(rate.provisional());
  CHECK(rate.perSecond() == Approx(1000));
  // Measured by a window closed early, the rate only shortens the 64 calls.
  CHECK(leadCalls(c, rate, 1) == 64);
  CHECK(leadCalls(c, rate, 4) == 256);  // after a refusal
  rate.update(200, 200 * ms);           // within the next window: nothing new
  CHECK(rate.perSecond() == Approx(1000));
  // A job that speeds up: the faster window is averaged in.
  rate.update(600, 350 * ms);
  CHECK_FALSE(rate.provisional());
  CHECK(rate.perSecond() == Approx(1500));
  CHECK(leadCalls(c, rate, 1) == 150);
  CHECK(leadCalls(c, rate, 4) == 600);
  // A job that slows down (a size sweep reaching large messages): the slower window counts at
  // once. Smoothed, a lead sized at 1,500 calls a second would have lasted 750 ms at 250.
  rate.update(662, 600 * ms);
  CHECK(rate.perSecond() == Approx(248));
  CHECK(leadCalls(c, rate, 1) == 25);
  // A window without calls: the lead falls to its floor (a job making 8 calls a second waited
  // 64 calls, 8 s, for every change).
  rate.update(662, 850 * ms);
  CHECK(rate.perSecond() == 0);
  CHECK(leadCalls(c, rate, 1) == 2);
  // A job of 20 calls a second: its first 4 calls set a 2-call lead (64 calls were 3.2 s).
  CallRate slow;
  slow.update(0, 0);
  slow.update(4, 200 * ms);
  REQUIRE(slow.known());
  CHECK(leadCalls(c, slow, 1) == 2);
  // Fast jobs: 50,000 calls a second take 5,000 calls of lead (64 calls were 1.3 ms).
  CallRate fast;
  fast.update(0, 0);
  fast.update(12'500, 250 * ms);
  CHECK(leadCalls(c, fast, 1) == 5000);
  // Counted in calls only, as before the rate was measured.
  c.leadNs = 0;
  CHECK(leadCalls(c, fast, 1) == 2);
  CHECK(leadCalls(c, fast, 1ull << 40) == kMaxLeadCalls);  // capped, never wraps
}

TEST_CASE("a leader of a rarely calling job switches a few calls ahead", "[coordinator]") {
  std::string path = socketPath();
  Node leader(config(path, 0, 2)), follower(config(path, 1, 2));
  REQUIRE(pumpUntil({&leader, &follower}, 3000, [&] { return ready(leader) && ready(follower); }));
  std::vector<int> a, b;
  for (int i = 0; i < 3; ++i) {
    a.push_back(call(leader));
    b.push_back(call(follower));
  }
  // Then no call for over two rate windows (a job between two large collectives): the rate
  // measured is a few calls a second, so the lead is its 2-call floor, not 64 calls.
  pumpUntil({&leader, &follower}, 700, [] { return false; });
  REQUIRE(leader.coord->propose(forcingRingSimple(), monotonicNs()));
  REQUIRE(committedOnBoth(leader, follower, 1));
  for (int i = 0; i < 3; ++i) {
    a.push_back(call(leader));
    b.push_back(call(follower));
  }
  CHECK(a == b);
  // Calls 1-4 keep NCCL's choice, the switch point is call 5 (3 made + 2).
  CHECK(a[3] == kTreeLL128);
  CHECK(a[4] == kRingSimple);
  CHECK(a[5] == kRingSimple);
}

TEST_CASE("a connection without the job key is rejected; the real follower still joins",
          "[coordinator][security]") {
  std::string path = socketPath();
  Node leader(config(path, 0, 2));
  REQUIRE(pumpUntil({&leader}, 1000,
                    [&] { return leader.coord->role() == Coordinator::Role::kLeader; }));
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  // A hello whose MAC was made with another key.
  wire::Nonce leaderNonce, mine = {};
  char buf[64];
  pumpUntil({&leader}, 200, [] { return false; });
  REQUIRE(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) == 4 + 1 + 4 + 16);
  std::memcpy(leaderNonce, buf + 9, 16);
  Digest wrong = wire::helloMac(wire::jobKey(kComm, 2, 1, "guess"), leaderNonce, mine, 1, 0);
  wire::Writer w;
  w.u8(wire::kHello);
  w.bytes(mine, 16);
  w.i32(1);
  w.u32(0);
  w.bytes(wrong.data(), wrong.size());
  std::string f = wire::frame(w.str());
  REQUIRE(send(fd, f.data(), f.size(), 0) == ssize_t(f.size()));
  pumpUntil({&leader}, 300, [&] { return leader.coord->stats().strangersRejected == 1; });
  CHECK(leader.coord->stats().strangersRejected == 1);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  CHECK(recv(fd, buf, sizeof(buf), 0) == 0);  // closed by the leader
  close(fd);
  CHECK(leader.coord->phase() == Coordinator::Phase::kJoining);

  Node follower(config(path, 1, 2));
  REQUIRE(pumpUntil({&leader, &follower}, 3000, [&] { return ready(leader) && ready(follower); }));
}

TEST_CASE("a connection that evicts a silent handshake in the round that peer speaks",
          "[coordinator][security]") {
  // The listener and the peers are polled together; accepting evicts the oldest handshake once
  // 32 are open. Eviction in the middle of the round used to free a peer the round then read
  // (caught by AddressSanitizer); now the round reads its peers first.
  std::string path = socketPath();
  Node leader(config(path, 0, 2));
  REQUIRE(pumpUntil({&leader}, 1000,
                    [&] { return leader.coord->role() == Coordinator::Role::kLeader; }));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
  auto dial = [&] {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    return fd;
  };
  std::vector<int> silent;
  for (int i = 0; i < 32; ++i) silent.push_back(dial());
  pumpUntil({&leader}, 300, [] { return false; });  // all 32 accepted and challenged
  REQUIRE(leader.coord->stats().evicted == 0);
  // In one round: the oldest handshake sends part of a frame, and a 33rd connection arrives.
  REQUIRE(send(silent[0], "\x40\x00", 2, 0) == 2);
  silent.push_back(dial());
  pumpUntil({&leader}, 200, [&] { return leader.coord->stats().evicted >= 1; });
  CHECK(leader.coord->stats().evicted == 1);
  for (int fd : silent) close(fd);
  Node follower(config(path, 1, 2));
  REQUIRE(pumpUntil({&leader, &follower}, 3000, [&] { return ready(leader) && ready(follower); }));
}

TEST_CASE("ranks with different keys never agree on anything: learning stays off",
          "[coordinator][security]") {
  std::string path = socketPath();
  CoordinatorConfig lc = config(path, 0, 2), fc = config(path, 1, 2, "another job's secret");
  lc.joinTimeoutNs = fc.joinTimeoutNs = 400'000'000;
  Node leader(lc), follower(fc);
  pumpUntil({&leader, &follower}, 1500, [&] {
    return leader.coord->phase() == Coordinator::Phase::kOff &&
           follower.coord->phase() == Coordinator::Phase::kOff;
  });
  CHECK(leader.coord->stats().strangersRejected >= 1);
  CHECK(leader.coord->phase() == Coordinator::Phase::kOff);
  CHECK(follower.coord->phase() == Coordinator::Phase::kOff);
  CHECK_FALSE(leader.coord->propose(forcingRingSimple(), monotonicNs()));
  // Nothing was ever forced: NCCL's own choice on both.
  for (int i = 0; i < 200; ++i) {
    CHECK(call(leader) == kTreeLL128);
    CHECK(call(follower) == kTreeLL128);
  }
}

TEST_CASE("the leader going away freezes the follower at the last committed table",
          "[coordinator]") {
  std::string path = socketPath();
  Node leader(config(path, 0, 2)), follower(config(path, 1, 2));
  REQUIRE(joinedWithRingSimple(leader, follower));
  leader.coord.reset();  // finalize: goodbye
  REQUIRE(pumpUntil({&follower}, 2000,
                    [&] { return follower.coord->phase() == Coordinator::Phase::kFrozen; }));
  CHECK(follower.comm.frozen());
  uint64_t calls = 0;
  CHECK(follower.comm.stage(2, 100, 0, DecisionTable{}, &calls) == TunerComm::StageResult::kFrozen);
  // The committed table still takes effect at its index: it was agreed before the leader left.
  int last = -1;
  for (int i = 0; i < 100; ++i) last = call(follower);
  CHECK(last == kRingSimple);
}

namespace {
std::atomic<int> gLostPeerWarnings{0};
void countLostPeerWarnings(abi::LogLevel level, unsigned long, const char*, int, const char* fmt,
                           ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (level == abi::kLogWarn && std::strstr(text, "lost the") != nullptr) ++gLostPeerWarnings;
}
}  // namespace

// Seen with a real NCCL (2.28.9): a rank finalizes (goodbye, then close) while its peer's
// service is elsewhere; both reach the peer in one read. The goodbye must still count: a normal
// end is no lost rank, and it is logged as INFO, not as a warning.
TEST_CASE(
    "a follower that finalizes while the leader is busy: the leader freezes without a warning",
    "[coordinator]") {
  std::string path = socketPath();
  Node leader(config(path, 0, 2)), follower(config(path, 1, 2));
  REQUIRE(pumpUntil({&leader, &follower}, 3000, [&] { return ready(leader) && ready(follower); }));
  abi::Logger previous = log::logger();
  log::setLogger(&countLostPeerWarnings);
  gLostPeerWarnings = 0;
  follower.coord.reset();  // goodbye and close, before the leader reads anything
  bool frozen = pumpUntil({&leader}, 2000,
                          [&] { return leader.coord->phase() == Coordinator::Phase::kFrozen; });
  log::setLogger(previous);
  REQUIRE(frozen);
  CHECK(gLostPeerWarnings == 0);
}

TEST_CASE("a rank at the switch point waits for the verdict, bounded by the sync timeout",
          "[coordinator]") {
  SECTION("the verdict arrives while it waits: applied exactly there") {
    TunerComm comm(kComm, 0, 5'000'000'000, nullptr);
    uint64_t calls = 0;
    REQUIRE(comm.stage(1, 10, monotonicNs(), forcingRingSimple(), &calls) ==
            TunerComm::StageResult::kStaged);
    for (int i = 1; i < 10; ++i) CHECK(call(comm) == kTreeLL128);
    // The verdict is sent once the caller is seen waiting (the wait counter), not after a
    // sleep: on a loaded host the caller may reach the switch point after any fixed delay.
    std::atomic<bool> sawWaiting{false};
    std::thread verdict([&] {
      auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(4);
      while (comm.swapStats().waits == 0 && std::chrono::steady_clock::now() < giveUp) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      sawWaiting = comm.swapStats().waits == 1;
      comm.resolve(1, true);
    });
    CHECK(call(comm) == kRingSimple);  // call 10 waits, then takes the committed table
    verdict.join();
    CHECK(sawWaiting);
    CHECK(comm.swapStats().waits == 1);
    CHECK(comm.swapStats().timeouts == 0);
  }
  SECTION("no verdict: after the timeout it keeps its table and freezes") {
    TunerComm comm(kComm, 0, 200'000'000, nullptr);
    uint64_t calls = 0;
    REQUIRE(comm.stage(1, 5, monotonicNs(), forcingRingSimple(), &calls) ==
            TunerComm::StageResult::kStaged);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 1; i <= 20; ++i) CHECK(call(comm) == kTreeLL128);
    auto waited = std::chrono::steady_clock::now() - t0;
    CHECK(waited >= std::chrono::milliseconds(190));
    CHECK(waited < std::chrono::seconds(5));
    CHECK(comm.swapStats().timeouts == 1);
    CHECK(comm.frozen());
  }
  SECTION("a proposal for an index already passed is refused") {
    TunerComm comm(kComm, 0, 200'000'000, nullptr);
    for (int i = 0; i < 10; ++i) call(comm);
    uint64_t calls = 0;
    CHECK(comm.stage(1, 10, 0, forcingRingSimple(), &calls) == TunerComm::StageResult::kTooLate);
    CHECK(calls == 10);
    CHECK(comm.stage(1, 11, 0, forcingRingSimple(), &calls) == TunerComm::StageResult::kStaged);
    CHECK(comm.stage(2, 50, 0, forcingRingSimple(), &calls) == TunerComm::StageResult::kBusy);
  }
}

TEST_CASE("with ranks unknown the rendezvous elects exactly one leader", "[coordinator]") {
  std::string path = socketPath();
  Node a(config(path, -1, 3)), b(config(path, -1, 3)), c(config(path, -1, 3));
  REQUIRE(pumpUntil({&a, &b, &c}, 3000, [&] { return ready(a) && ready(b) && ready(c); }));
  int leaders = 0;
  for (Node* n : {&a, &b, &c}) leaders += n->coord->role() == Coordinator::Role::kLeader;
  CHECK(leaders == 1);
  Node* leader = a.coord->role() == Coordinator::Role::kLeader   ? &a
                 : b.coord->role() == Coordinator::Role::kLeader ? &b
                                                                 : &c;
  REQUIRE(leader->coord->propose(forcingRingSimple(), monotonicNs()));
  REQUIRE(pumpUntil({&a, &b, &c}, 3000, [&] {
    return a.coord->committedVersion() == 1 && b.coord->committedVersion() == 1 &&
           c.coord->committedVersion() == 1;
  }));
}

TEST_CASE("NCCL_ALGO/NCCL_PROTO on one follower vetoes learning for the communicator",
          "[coordinator]") {
  std::string path = socketPath();
  CoordinatorConfig fc = config(path, 1, 2);
  fc.userAlgoProto = true;
  Node leader(config(path, 0, 2)), follower(fc);
  REQUIRE(pumpUntil({&leader, &follower}, 3000, [&] { return ready(leader) && ready(follower); }));
  CHECK(leader.coord->vetoed());
  CHECK_FALSE(leader.coord->canPropose());
  CHECK_FALSE(leader.coord->propose(forcingRingSimple(), monotonicNs()));
}

TEST_CASE("ranks of one process whose rank is unknown still agree on one leader", "[coordinator]") {
  // Several GPUs per process: the registry keyed by communicator cannot tell their ranks apart
  // and reports -1 for them. A rank that finds a live leader follows it.
  std::string path = socketPath();
  Node a(config(path, 0, 3)), b(config(path, -1, 3)), c(config(path, -1, 3));
  REQUIRE(pumpUntil({&a, &b, &c}, 3000, [&] { return ready(a) && ready(b) && ready(c); }));
  int leaders = 0;
  for (Node* n : {&a, &b, &c}) leaders += n->coord->role() == Coordinator::Role::kLeader;
  CHECK(leaders == 1);
  Node* leader = a.coord->role() == Coordinator::Role::kLeader ? &a : &b;
  REQUIRE(leader->coord->propose(forcingRingSimple(), monotonicNs()));
  REQUIRE(pumpUntil({&a, &b, &c}, 3000, [&] {
    return a.coord->committedVersion() == 1 && b.coord->committedVersion() == 1 &&
           c.coord->committedVersion() == 1;
  }));
}

TEST_CASE("a rank claimed twice freezes every rank at NCCL's defaults, whoever came first",
          "[coordinator][security]") {
  // An intruder holding the key claims rank 1 before the real rank 1 arrives. Pushing the real
  // rank out would let the others switch tables without it; instead nothing is ever proposed.
  std::string path = socketPath();
  Node leader(config(path, 0, 3));
  Node intruder(config(path, 1, 3));
  REQUIRE(pumpUntil({&leader, &intruder}, 3000, [&] { return ready(intruder); }));
  Node real(config(path, 1, 3)), other(config(path, 2, 3));
  REQUIRE(pumpUntil({&leader, &intruder, &real, &other}, 3000,
                    [&] { return leader.coord->phase() == Coordinator::Phase::kFrozen; }));
  CHECK(leader.coord->stats().duplicateClaims == 1);
  CHECK(leader.coord->committedVersion() == 0);
  CHECK_FALSE(leader.coord->propose(forcingRingSimple(), monotonicNs()));
  // The ranks that had joined are told and freeze too; none of them ever holds a table.
  REQUIRE(pumpUntil({&leader, &intruder, &real, &other}, 3000,
                    [&] { return intruder.coord->phase() == Coordinator::Phase::kFrozen; }));
  for (Node* n : {&leader, &intruder, &real, &other}) CHECK(n->coord->committedVersion() == 0);
  CHECK_FALSE(ready(real));
}

TEST_CASE("a follower claiming the leader's rank or no rank of the communicator is refused",
          "[coordinator][security]") {
  std::string path = socketPath();
  Node leader(config(path, 0, 2));
  Node sameAsLeader(config(path, 0, 2));  // not a sibling: the registry would report -1 then
  Node outside(config(path, 7, 2));
  pumpUntil({&leader, &sameAsLeader, &outside}, 500, [] { return false; });
  CHECK_FALSE(ready(leader));
  CHECK(leader.coord->stats().strangersRejected >= 2);
  Node real(config(path, 1, 2));
  REQUIRE(pumpUntil({&leader, &real}, 3000, [&] { return ready(leader) && ready(real); }));
}

#include <cstdlib>

#include "common/params.h"
#include "tuner_plugin/control_channel.h"

TEST_CASE("rendezvous: Unix socket on one node, 'unix' across nodes sharing a filesystem",
          "[tuner][rendezvous]") {
  using autopilot::tuner::Endpoint;
  using autopilot::tuner::resolveEndpoint;
  auto* coordinator = autopilot::params::find("NCCL_AUTOPILOT_COORDINATOR");
  REQUIRE(coordinator != nullptr);
  auto with = [&](const char* value) {
    if (value) {
      setenv("NCCL_AUTOPILOT_COORDINATOR", value, 1);
    } else {
      unsetenv("NCCL_AUTOPILOT_COORDINATOR");
    }
    coordinator->resetForTesting();
  };
  unsetenv("MASTER_ADDR");
  std::string why;
  with(nullptr);
  CHECK(resolveEndpoint(0x1234, 1, &why).kind == Endpoint::Kind::kUnix);
  CHECK(resolveEndpoint(0x1234, 4, &why).kind == Endpoint::Kind::kNone);
  CHECK_FALSE(why.empty());
  with("unix");
  Endpoint ep = resolveEndpoint(0x1234, 4, &why);
  CHECK(ep.kind == Endpoint::Kind::kUnix);
  CHECK(ep.path.find("tuner-0000000000001234.sock") != std::string::npos);
  // The profiler's arrival exchange: its own file, and the 1024 ports above the tuner's.
  Endpoint arrivals = resolveEndpoint(0x1234, 4, &why, autopilot::tuner::Channel::kArrivals);
  CHECK(arrivals.path.find("arrivals-0000000000001234.sock") != std::string::npos);
  with("127.0.0.1:4000");
  ep = resolveEndpoint(0x1234, 4, &why);
  CHECK(ep.kind == Endpoint::Kind::kTcp);
  CHECK(ep.port == 4000 + int(0x1234 % 1024));
  arrivals = resolveEndpoint(0x1234, 4, &why, autopilot::tuner::Channel::kArrivals);
  CHECK(arrivals.port == ep.port + 1024);
  with(nullptr);
}

TEST_CASE("rendezvous: socket files of killed jobs are swept, live and fresh ones kept",
          "[tuner][rendezvous]") {
  char tmpl[] = "/tmp/ap-sweep-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  std::string dir = tmpl;
  auto bound = [&](const std::string& name, bool listening, time_t age) {
    std::string path = dir + "/" + name;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    if (listening) {
      REQUIRE(listen(fd, 4) == 0);
    } else {
      close(fd);  // what a killed leader leaves: the file, nobody behind it
      fd = -1;
    }
    timespec times[2] = {{time(nullptr) - age, 0}, {time(nullptr) - age, 0}};
    REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
    return fd;
  };
  bound("tuner-00000000000000aa.sock", false, 3600);            // stale: goes
  bound("arrivals-00000000000000aa.sock", false, 3600);         // stale: goes
  bound("arrivals-00000000000000bb.sock", false, 5);            // too recent to judge: stays
  int live = bound("tuner-00000000000000cc.sock", true, 3600);  // a live leader: stays
  bound("other.sock", false, 3600);                             // not ours: stays
  CHECK(autopilot::tuner::sweepStaleSockets(dir, 60, 100) == 2);
  struct stat st;
  CHECK(stat((dir + "/tuner-00000000000000aa.sock").c_str(), &st) != 0);
  CHECK(stat((dir + "/arrivals-00000000000000aa.sock").c_str(), &st) != 0);
  CHECK(stat((dir + "/arrivals-00000000000000bb.sock").c_str(), &st) == 0);
  CHECK(stat((dir + "/tuner-00000000000000cc.sock").c_str(), &st) == 0);
  CHECK(stat((dir + "/other.sock").c_str(), &st) == 0);
  close(live);
  for (const char* n :
       {"arrivals-00000000000000bb.sock", "tuner-00000000000000cc.sock", "other.sock"}) {
    unlink((dir + "/" + n).c_str());
  }
  rmdir(dir.c_str());
}

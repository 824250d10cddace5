// The transport-independent halves of the send and receive comms (core/send_engine,
// core/recv_engine), driven without any transport: what both transports rely on.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/clock.h"
#include "common/rail_telemetry.h"
#include "net_plugin/core/comm_config.h"
#include "net_plugin/core/recv_engine.h"
#include "net_plugin/core/send_engine.h"
#include "test/net/unit/striper_measure.h"

using namespace autopilot;
using namespace autopilot::net;

namespace {

// A send comm whose "transport" does nothing: the test plays the receiver's announcements and
// the rails' failures by hand.
class BareSend final : public core::SendEngine {
 public:
  // `firstRailId` >= 0: the rails' telemetry ids from there (the NICs other connections of the
  // process share, as RailNews knows them); -1: none. `copies`: the transport can send a chunk
  // twice (late copies and probe copies, as TCP's can).
  explicit BareSend(int rails, int firstRailId = -1, bool copies = false)
      : SendEngine(0x54455354, 0x77, "test send", core::commConfig(), infos(rails, firstRailId), 64,
                   32),
        copies_(copies) {
    for (int r = 0; r < rails; ++r) {
      health_.connected(r, monotonicNs());
      striper_.setMode(r, health_.mode(r));
    }
  }
  void progress(uint64_t) override {}
  bool lateCopiesAllowed() const override { return copies_; }
  // Measured rails hold up to the full window (an unmeasured one holds a single chunk).
  void measure() {
    uint64_t t = monotonicNs();
    for (int r = 0; r < nRails_; ++r) {
      for (int i = 0; i < 8; ++i) {
        striper_.onAssigned(r, 1 << 20, t + uint64_t(i) * 2'000'000);
        striper_.onCompleted(r, 1 << 20, t + uint64_t(i + 1) * 2'000'000);
      }
    }
  }

  static std::vector<RailInfo> infos(int rails, int firstRailId) {
    std::vector<RailInfo> out;
    for (int r = 0; r < rails; ++r) {
      out.push_back(
          {firstRailId >= 0 ? firstRailId + r : -1, "rail" + std::to_string(r), false, 1e9});
    }
    return out;
  }
  void pingRail(int r, uint64_t) override { pings[r]++; }
  bool failIfLocalLinkDown(int r, uint64_t nowNs) override {
    ++linkChecks[r];
    if (!localLinkDown[r]) return false;
    failRailFor(r, nowNs, "its interface is down");
    return true;
  }
  void failRailFor(int r, uint64_t, const std::string& reason) override {
    failedFor[r] = reason;
    failRail(r);
  }
  void announce(uint64_t seq, uint64_t size, int tag) {
    core::PostedReceive p;
    p.seq = seq;
    p.n = 1;
    p.sizes[0] = size;
    p.tags[0] = tag;
    REQUIRE(matcher_.offer(p) == core::ReceiveMatcher::Offer::kStored);
  }
  void place() { placeAt(monotonicNs()); }
  void placeAt(uint64_t nowNs) {
    matchRequests();
    placeChunks(nowNs);
  }
  // Fails rail r as a transport would (after stopping it); the chunks go to the others.
  uint32_t failRail(int r) {
    health_.fail(r, monotonicNs(), "test", false);
    uint64_t bytes = 0;
    bool proceed = false;
    uint32_t moved = moveChunksOff(r, false, &bytes, &proceed);
    REQUIRE(proceed);
    return moved;
  }
  void rejoin(int r) { rejoinRail(r, monotonicNs(), 1e9); }
  // An isend as the transports make it: post, one pass, withdraw when unmatched.
  core::SendRequest* isend(std::vector<uint8_t>& buffer, int tag) {
    core::SendRequest* q = nullptr;
    REQUIRE(postSend(buffer.data(), buffer.size(), tag, &q) == abi::kSuccess);
    if (q == nullptr) return nullptr;
    place();
    return withdrawIfUnmatched(q) ? nullptr : q;
  }
  // A multi-receive: one buffer per tag, `size` bytes each.
  void announceMulti(uint64_t seq, uint64_t size, std::initializer_list<int> tags) {
    core::PostedReceive p;
    p.seq = seq;
    for (int tag : tags) {
      p.sizes[p.n] = size;
      p.tags[p.n++] = tag;
    }
    REQUIRE(matcher_.offer(p) == core::ReceiveMatcher::Offer::kStored);
  }
  using SendEngine::failComm;
  using SendEngine::failed_;
  using SendEngine::followRailNews;
  using SendEngine::health_;
  using SendEngine::lateCopies_;
  using SendEngine::postSend;
  using SendEngine::probeCopies_;
  using SendEngine::striper_;
  using SendEngine::tracker_;
  using SendEngine::withdrawIfUnmatched;
  uint32_t queued(int r) const { return tracker_.queued(r); }

  int pings[4] = {};
  std::string failedFor[4];
  bool localLinkDown[4] = {};  // this host's own link of the rail (what the transport would ask)
  int linkChecks[4] = {};

 private:
  bool copies_;
};

class BareRecv final : public core::RecvEngine {
 public:
  BareRecv()
      : RecvEngine(0x54455352, 0x77, "test recv", core::commConfig(),
                   {{-1, "rail0", false}, {-1, "rail1", false}}, 4) {}
  void progress(uint64_t) override {}
  bool railCarries(int) const override { return true; }
  void fail(abi::Result e) { failComm(e, "test"); }
  using RecvEngine::landChunk;
  using RecvEngine::postReceive;
  using RecvEngine::slots_;
};

}  // namespace

TEST_CASE("send engine: a message counts one failover per failed rail, not one per chunk",
          "[net][engine]") {
  BareSend comm(2);
  comm.measure();
  std::vector<uint8_t> buffer(8 << 20);
  core::SendRequest* q = nullptr;
  REQUIRE(comm.postSend(buffer.data(), buffer.size(), 1, &q) == abi::kSuccess);
  REQUIRE(q != nullptr);
  comm.announce(0, buffer.size(), 1);
  comm.place();
  INFO("chunks on rail 0: " << comm.queued(0) << ", rail 1: " << comm.queued(1));
  REQUIRE((comm.queued(0) > 1 || comm.queued(1) > 1));  // several chunks on one rail
  // 15 rail failures with the message's chunks on the failing rail: the comm stays up (the
  // limit is 16 failing rails, however many chunks each held).
  for (int i = 0; i < 15; ++i) {
    int r = comm.queued(0) > 0 ? 0 : 1;
    REQUIRE(comm.failRail(r) > 0);
    comm.rejoin(r);
    comm.place();
    INFO("failure " << i << ": the message counted " << q->failovers << " failovers");
    CHECK(comm.failed_ == abi::kSuccess);
  }
  CHECK(q->failovers == 15);
  comm.failRail(comm.queued(0) > 0 ? 0 : 1);
  CHECK(comm.failed_ == abi::kInternalError);
  // A pending send of a failed comm fails (and is released) at its next test().
  int done = 1;
  CHECK(comm.test(q, &done, nullptr) == abi::kInternalError);
  CHECK(done == 0);
}

TEST_CASE("send engine: a send that the announced receive cannot hold fails the comm",
          "[net][engine]") {
  BareSend comm(2);
  std::vector<uint8_t> buffer(4096);
  core::SendRequest* q = nullptr;
  REQUIRE(comm.postSend(buffer.data(), buffer.size(), 7, &q) == abi::kSuccess);
  comm.announce(0, 100, 7);  // the receive is smaller than the send
  comm.place();
  CHECK(comm.failed_ == abi::kInvalidUsage);
  int done = 1;
  CHECK(comm.test(q, &done, nullptr) == abi::kInvalidUsage);
  CHECK(done == 0);
}

TEST_CASE(
    "send engine: a send the receive next in line cannot take by its tag gets a NULL request, "
    "and matches once NCCL posts it again in turn",
    "[net][engine][contract]") {
  BareSend comm(2);
  std::vector<uint8_t> a(4096), b(4096), c(4096), d(4096);
  // Nothing announced yet: NULL, nothing kept.
  CHECK(comm.isend(a, 0) == nullptr);
  // The first receive takes tags 8 and 9, the second tag 0.
  comm.announceMulti(0, 4096, {8, 9});
  comm.announceMulti(1, 4096, {0});
  for (int i = 0; i < 3; ++i) CHECK(comm.isend(a, 0) == nullptr);  // NCCL retries: still NULL
  CHECK(comm.failed_ == abi::kSuccess);                            // not an error
  core::SendRequest* q9 = comm.isend(b, 9);  // any order within the multi-receive
  REQUIRE(q9 != nullptr);
  CHECK(q9->recvSeq == 0);
  CHECK(q9->buffer == 1);
  CHECK(comm.isend(a, 0) == nullptr);  // tag 8 of the first receive is still free
  core::SendRequest* q8 = comm.isend(c, 8);
  REQUIRE(q8 != nullptr);
  CHECK(q8->recvSeq == 0);
  CHECK(q8->buffer == 0);
  core::SendRequest* q0 = comm.isend(a, 0);  // now next in line
  REQUIRE(q0 != nullptr);
  CHECK(q0->recvSeq == 1);
  CHECK(comm.isend(d, 0) == nullptr);  // nothing more announced
  CHECK(comm.failed_ == abi::kSuccess);
}

TEST_CASE("send engine: on a broken comm isend still succeeds; test() reports the error",
          "[net][engine][contract]") {
  BareSend comm(2);
  comm.failComm(abi::kRemoteError, "test");
  std::vector<uint8_t> buffer(4096);
  core::SendRequest* q = nullptr;
  CHECK(comm.postSend(buffer.data(), buffer.size(), 0, &q) == abi::kSuccess);
  REQUIRE(q != nullptr);
  CHECK_FALSE(comm.withdrawIfUnmatched(q));  // handed out, failed
  int done = 1;
  CHECK(comm.test(q, &done, nullptr) == abi::kRemoteError);
  CHECK(done == 0);
}

TEST_CASE("recv engine: on a broken comm irecv still succeeds; test() reports the error",
          "[net][engine][contract]") {
  BareRecv comm;
  comm.fail(abi::kRemoteError);
  std::vector<uint8_t> buffer(4096);
  void* data = buffer.data();
  size_t size = buffer.size();
  int tag = 0;
  core::RecvRequest* q = nullptr;
  CHECK(comm.postReceive(1, &data, &size, &tag, &q) == abi::kSuccess);
  REQUIRE(q != nullptr);
  int done = 1;
  CHECK(comm.test(q, &done, nullptr) == abi::kRemoteError);
  CHECK(done == 0);
}

// RailNews is process-wide: each case below uses telemetry ids no other case uses.
TEST_CASE(
    "send engine: a rail found dead by another connection is suspect here, and fails "
    "unless it answers",
    "[engine][news]") {
  BareSend a(2, 40), b(2, 40);  // two connections of the process over the same two NICs
  uint64_t t = monotonicNs();
  b.followRailNews(t);
  CHECK(b.pings[1] == 0);
  a.failRail(1);
  b.followRailNews(t + 1'000'000);
  // No new data on it here, a ping to find out; the other rail is untouched.
  CHECK(b.pings[1] == 1);
  CHECK(b.pings[0] == 0);
  CHECK(b.striper_.mode(1) == core::RailMode::kStandby);
  CHECK(b.striper_.mode(0) == core::RailMode::kActive);
  CHECK(b.health_.live(1));
  // The news is news once.
  b.followRailNews(t + 2'000'000);
  CHECK(b.pings[1] == 1);
  // While the peer answers nowhere (nothing posted), silence proves nothing: still suspect.
  b.followRailNews(t + 60'000'000'000);
  CHECK(b.health_.live(1));
  CHECK(b.striper_.mode(1) == core::RailMode::kStandby);
  // The peer answers on rail 0; rail 1 stays silent for the detector's allowance: failed.
  b.health_.failure(0).onProgress(t + 60'001'000'000);
  b.followRailNews(t + 60'002'000'000);
  CHECK(b.health_.live(1));
  b.followRailNews(t + 60'002'000'000 + b.health_.failure(1).timeoutNs(0, 1e9) - 1);
  CHECK(b.health_.live(1));
  b.followRailNews(t + 60'002'000'000 + b.health_.failure(1).timeoutNs(0, 1e9));
  CHECK(!b.health_.live(1));
  CHECK(b.failedFor[1].find("another connection") != std::string::npos);
  CHECK(b.health_.live(0));
}

TEST_CASE(
    "send engine: a rail found dead elsewhere whose local link is down fails here at once, "
    "idle or not",
    "[engine][news]") {
  BareSend a(2, 48), b(2, 48);
  uint64_t t = monotonicNs();
  // Only news makes the engine ask: an idle connection does not poll its links.
  b.localLinkDown[1] = true;
  b.followRailNews(t);
  CHECK(b.linkChecks[1] == 0);
  CHECK(b.health_.live(1));
  // Another connection fails rail 1; this one holds nothing and its peer answers nowhere, which
  // alone would leave the rail suspect through the whole outage. The link is down here too.
  a.failRail(1);
  b.followRailNews(t + 1'000'000);
  CHECK(b.linkChecks[1] == 1);
  CHECK(!b.health_.live(1));
  CHECK(b.failedFor[1] == "its interface is down");
  CHECK(b.pings[1] == 0);
  CHECK(b.health_.live(0));
  CHECK(b.linkChecks[0] == 0);
  // Where the local link is up, the news is a suspicion as before: a ping, no failure.
  BareSend c(2, 50), d(2, 50);
  c.failRail(0);
  d.followRailNews(t + 1'000'000);
  CHECK(d.linkChecks[0] == 1);
  CHECK(d.health_.live(0));
  CHECK(d.pings[0] == 1);
  CHECK(d.striper_.mode(0) == core::RailMode::kStandby);
}

TEST_CASE("send engine: a suspect rail that answers goes back to its share", "[engine][news]") {
  BareSend a(2, 42), b(2, 42);
  uint64_t t = monotonicNs();
  a.failRail(0);
  b.followRailNews(t + 1'000'000);
  REQUIRE(b.striper_.mode(0) == core::RailMode::kStandby);
  b.health_.failure(0).onProgress(t + 2'000'000);  // the ping's answer (or data) arrived
  b.followRailNews(t + 3'000'000);
  CHECK(b.striper_.mode(0) == core::RailMode::kActive);
  b.followRailNews(t + 60'000'000'000);
  CHECK(b.health_.live(0));
  CHECK(b.failedFor[0].empty());
}

TEST_CASE("send engine: evidence newer than the other connection's verdict keeps the rail",
          "[engine][news]") {
  BareSend a(2, 44), b(2, 44);
  uint64_t t = monotonicNs();
  a.failRail(1);                                    // published at about t
  b.health_.failure(1).onProgress(t + 50'000'000);  // this comm saw the rail work after that
  b.followRailNews(t + 60'000'000);
  CHECK(b.pings[1] == 0);
  CHECK(b.striper_.mode(1) == core::RailMode::kActive);
}

TEST_CASE("send engine: a rail that re-joined elsewhere is retried here at once",
          "[engine][news]") {
  BareSend a(2, 46), b(2, 46);
  uint64_t t = monotonicNs();
  b.failRail(1);
  a.failRail(1);
  b.followRailNews(t);  // both failures are old news for b's failed rail
  REQUIRE(!b.health_.failback(1).due(t + 1'000'000));  // its backoff has not run out
  a.rejoin(1);
  b.followRailNews(t + 1'000'000);
  CHECK(b.health_.failback(1).due(t + 1'000'000));
}

TEST_CASE("receive engine: a chunk lands once; duplicates and overfills are told apart",
          "[net][engine]") {
  BareRecv comm;
  std::vector<uint8_t> buffer(1000);
  void* data[1] = {buffer.data()};
  size_t sizes[1] = {buffer.size()};
  int tags[1] = {3};
  core::RecvRequest* q = nullptr;
  REQUIRE(comm.postReceive(1, data, sizes, tags, &q) == abi::kSuccess);
  REQUIRE(q != nullptr);
  using Mark = core::ChunkBitmap::Mark;
  CHECK(comm.landChunk(0, *q, 0, 0, 2, 500) == Mark::kNew);
  CHECK(comm.landChunk(1, *q, 0, 0, 2, 500) == Mark::kDuplicate);  // a replayed copy
  CHECK(q->state == core::RecvRequest::State::kPosted);
  CHECK(comm.landChunk(1, *q, 0, 5, 2, 500) == Mark::kInvalid);  // outside the plan
  CHECK(comm.landChunk(1, *q, 0, 1, 2, 500) == Mark::kNew);
  CHECK(q->state == core::RecvRequest::State::kDone);
  int done = 0, got = 0;
  CHECK(comm.test(q, &done, &got) == abi::kSuccess);
  CHECK(done == 1);
  CHECK(got == 1000);
  // More bytes than the buffer holds is a protocol error, not a completion.
  REQUIRE(comm.postReceive(1, data, sizes, tags, &q) == abi::kSuccess);
  CHECK(comm.landChunk(0, *q, 0, 0, 1, 2000) == Mark::kInvalid);
  // Bad input at post: too many buffers is refused with a clear error, nothing taken.
  core::RecvRequest* none = nullptr;
  CHECK(comm.postReceive(99, data, sizes, tags, &none) == abi::kInvalidArgument);
  CHECK(none == nullptr);
}

TEST_CASE("send engine: a chunk its rail holds past the allowance is copied; one within it is not",
          "[net][engine]") {
  // Two healthy rails at 31 MB/s: a 64 KiB chunk is due 2.1 ms after it is placed, and may take
  // lateCopyFactor times that, or lateCopyMinNs (30 ms) if longer, before a copy goes.
  BareSend comm(2, -1, true);
  core::RailStriper& s = comm.striper_;
  uint64_t t = monotonicNs();
  for (int r = 0; r < 2; ++r) core::testutil::measureAt(s, r, 31e6, &t);
  std::vector<uint8_t> buffer(64 << 10);  // one chunk, the whole message
  comm.announce(0, buffer.size(), 7);
  core::SendRequest* q = nullptr;
  REQUIRE(comm.postSend(buffer.data(), buffer.size(), 7, &q) == abi::kSuccess);
  comm.placeAt(t);
  const int held = comm.queued(0) == 1 ? 0 : 1;
  REQUIRE(comm.queued(held) == 1);
  REQUIRE(comm.queued(1 - held) == 0);
  // Unacknowledged 20 ms later: late by its plan, but within the floor.
  comm.placeAt(t + 20'000'000);
  CHECK(comm.lateCopies_ == 0);
  CHECK(comm.queued(1 - held) == 0);
  // 40 ms: past the floor; the other rail, idle, lands it far sooner than it has waited.
  comm.placeAt(t + 40'000'000);
  CHECK(comm.lateCopies_ == 1);
  CHECK(comm.queued(1 - held) == 1);
  CHECK(comm.queued(held) == 1);  // the original stays: the receiver keeps the first to land
}

TEST_CASE("send engine: a slow rail's probe copies count as that rail's probe-copy bytes",
          "[net][engine]") {
  auto& reg = telemetry::RailRegistry::instance();
  int first = -1;
  for (int r = 0; r < 3; ++r) {
    telemetry::RailIdentity id{};
    std::snprintf(id.name, sizeof(id.name), "probecopy%d", r);
    std::snprintf(id.transport, sizeof(id.transport), "tcp");
    const int got = reg.registerRail(id);
    if (r == 0) first = got;
    REQUIRE(got == first + r);
  }
  BareSend comm(3, first, true);
  // Rails 0 and 1 measured at 31 MB/s, rail 2 at a tenth of that, each by one pipelined sample;
  // past the band's hold and the settling time, rail 2 is a slow rail of its own.
  core::RailStriper& s = comm.striper_;
  uint64_t t = monotonicNs();
  const double rates[3] = {31e6, 31e6, 3.1e6};
  for (int r = 0; r < 3; ++r) core::testutil::measureAt(s, r, rates[r], &t);
  s.pick(64 << 10, t);
  t += 1'000'000'000;
  s.pick(64 << 10, t);
  // Its probe is due at the start of a probe period (RailStriper::Config::probeAlign): periods
  // are powers of two of ns, counted from probePhaseNs before the clock's zero, and 2^36 ns is
  // a multiple of the one a 64 KiB probe of rail 2 needs (10x its 21 ms, rounded up).
  const uint64_t period = uint64_t(1) << 36;
  const uint64_t phase = s.config().probePhaseNs;
  const uint64_t at = ((t + phase) / period + 1) * period - phase;
  std::vector<uint8_t> buffer(256 << 10);  // four chunks of 64 KiB
  comm.announce(0, buffer.size(), 7);
  core::SendRequest* q = nullptr;
  REQUIRE(comm.postSend(buffer.data(), buffer.size(), 7, &q) == abi::kSuccess);
  comm.placeAt(at);
  // Every chunk went to the full rails; rail 2 got a copy of one, counted on its telemetry.
  CHECK(comm.queued(0) + comm.queued(1) == 4);
  CHECK(comm.queued(2) == 1);
  CHECK(comm.probeCopies_ == 1);
  CHECK(reg.counters(first + 2)->probeCopyBytes.load() == 64u << 10);
  CHECK(reg.counters(first)->probeCopyBytes.load() == 0);
  CHECK(reg.counters(first + 1)->probeCopyBytes.load() == 0);
}

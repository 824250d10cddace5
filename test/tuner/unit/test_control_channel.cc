// The framed connection under the tuner's rendezvous: bounded work per read, frames left in the
// buffer handed out later without new data, oversized frames refused; and what travels in the
// frames: decision tables with their channel counts.
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tuner_plugin/control_channel.h"
#include "tuner_plugin/wire_format.h"

using namespace autopilot;
using namespace autopilot::tuner;

namespace {

struct Pair {
  FrameConnection conn;
  int peer = -1;
  Pair() {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    conn = FrameConnection(Fd(sv[0]));
    peer = sv[1];
  }
  ~Pair() { close(peer); }
  void write(const std::string& bytes) {
    REQUIRE(::send(peer, bytes.data(), bytes.size(), 0) == ssize_t(bytes.size()));
  }
};

// Encodes `t` and decodes it again into *back; false when the decoder refuses it.
bool roundTrip(const DecisionTable& t, DecisionTable* back) {
  wire::Writer w;
  wire::encodeTable(t, &w);
  wire::Reader r(w.str().data(), w.str().size());
  return wire::decodeTable(&r, back);
}

}  // namespace

TEST_CASE("frames beyond a read's allowance wait in the buffer and come without new data",
          "[control_channel]") {
  Pair p;
  p.write(wire::frame("one") + wire::frame("two") + wire::frame("three"));
  std::vector<std::string> out;
  REQUIRE(p.conn.readFrames(&out, 256, 1));
  CHECK(out == std::vector<std::string>{"one"});
  // Nothing new on the socket: the service must still be told (it polls with no wait) and get
  // the rest.
  CHECK(p.conn.hasBufferedFrame());
  out.clear();
  REQUIRE(p.conn.readFrames(&out, 256, 8));
  CHECK(out == (std::vector<std::string>{"two", "three"}));
  CHECK_FALSE(p.conn.hasBufferedFrame());
  // A partial frame is not a buffered frame.
  std::string f = wire::frame("four");
  p.write(f.substr(0, 5));
  out.clear();
  REQUIRE(p.conn.readFrames(&out, 256, 8));
  CHECK(out.empty());
  CHECK_FALSE(p.conn.hasBufferedFrame());
  p.write(f.substr(5));
  REQUIRE(p.conn.readFrames(&out, 256, 8));
  CHECK(out == std::vector<std::string>{"four"});
}

TEST_CASE(
    "a frame announcing more than allowed drops the connection; a flood is read in bounded "
    "steps",
    "[control_channel]") {
  Pair p;
  p.write(wire::frame(std::string(300, 'x')));
  std::vector<std::string> out;
  CHECK_FALSE(p.conn.readFrames(&out, 256, 1));
  // Zero-length frames as fast as the socket takes them: each read hands out at most the
  // frames asked for, whatever is queued.
  Pair q;
  std::string zeros(4 * 10000, '\0');
  ::send(q.peer, zeros.data(), zeros.size(), 0);
  out.clear();
  REQUIRE(q.conn.readFrames(&out, 256, 64));
  CHECK(out.size() == 64);
  CHECK(q.conn.hasBufferedFrame());
}

// Seen with a real NCCL: a follower's goodbye and its close reached the leader in one read, and
// the goodbye was dropped with the connection, so a normal end was logged as a lost rank (WARN).
TEST_CASE("frames that arrive with the peer's shutdown are handed out before it is reported",
          "[control_channel]") {
  Pair p;
  p.write(wire::frame("last words"));
  REQUIRE(::shutdown(p.peer, SHUT_WR) == 0);
  std::vector<std::string> out;
  CHECK_FALSE(p.conn.readFrames(&out, 256, 8));          // closed...
  CHECK(out == std::vector<std::string>{"last words"});  // ...after its last frame
  // More frames than one call hands out: the connection stays open until the last is out.
  Pair r;
  r.write(wire::frame("a") + wire::frame("b"));
  REQUIRE(::shutdown(r.peer, SHUT_WR) == 0);
  out.clear();
  CHECK(r.conn.readFrames(&out, 256, 1));
  CHECK_FALSE(r.conn.readFrames(&out, 256, 1));
  CHECK(out == (std::vector<std::string>{"a", "b"}));
  // A partial frame at the shutdown is not handed out.
  Pair q;
  q.write(wire::frame("cut").substr(0, 5));
  REQUIRE(::shutdown(q.peer, SHUT_WR) == 0);
  out.clear();
  CHECK_FALSE(q.conn.readFrames(&out, 256, 8));
  CHECK(out.empty());
}

TEST_CASE("a decision table travels with its channel counts; a count out of place is refused",
          "[wire]") {
  DecisionTable t;
  ContextDecision& a = t.entries[17];
  a.primary = int8_t(kNumCells + 4);  // Ring/LL128 at half the channels
  a.primaryChannels = 8;
  a.explore = 2;
  a.period = 2;
  a.budget = 1;
  a.generation = 9;
  ContextDecision& b = t.entries[600];
  b.primary = 5;
  b.explore = int8_t(kNumCells + 5);
  b.exploreChannels = 3;
  b.period = 2;
  b.budget = 2;
  DecisionTable back;
  REQUIRE(roundTrip(t, &back));
  CHECK(back == t);
  CHECK(back.entries[17].primaryChannels == 8);
  CHECK(back.entries[600].exploreChannels == 3);

  auto refused = [](const DecisionTable& bad) {
    DecisionTable out;
    return !roundTrip(bad, &out);
  };
  DecisionTable noCount = t;
  noCount.entries[17].primaryChannels = 0;  // a halved arm must say how many
  CHECK(refused(noCount));
  DecisionTable strayCount = t;
  strayCount.entries[600].primaryChannels = 4;  // a cell at NCCL's count carries none
  CHECK(refused(strayCount));
  DecisionTable beyond = t;
  beyond.entries[17].primary = int8_t(kNumArms);
  CHECK(refused(beyond));
}

TEST_CASE("the arm a call plays and its channel count", "[wire]") {
  ContextDecision d;
  d.primary = int8_t(kNumCells + 7);
  d.primaryChannels = 16;
  d.explore = 7;
  d.period = 2;
  d.budget = 1;
  ExplorationCounters c;
  c.reset();
  int first = armForCall(d, 3, &c), second = armForCall(d, 3, &c), third = armForCall(d, 3, &c);
  CHECK(first == kNumCells + 7);
  CHECK(channelsForArm(d, first) == 16);
  CHECK(second == 7);  // the probe: cell 7 at NCCL's count
  CHECK(channelsForArm(d, second) == 0);
  CHECK(third == kNumCells + 7);
  CHECK(armCell(first) == 7);
  CHECK(cellTakesChannelCount(abi::kAlgoRing * abi::kNumProtocols));
  CHECK_FALSE(cellTakesChannelCount(abi::kAlgoCollNetDirect * abi::kNumProtocols + 2));
  CHECK_FALSE(cellTakesChannelCount(abi::kAlgoCollNetChain * abi::kNumProtocols));
}

TEST_CASE("a halved-chunk arm travels without a count and halves NCCL's chunk down to a floor",
          "[wire][chunk]") {
  const int ringSimple = abi::kAlgoRing * abi::kNumProtocols + abi::kProtoSimple;
  const int treeLL128 = abi::kAlgoTree * abi::kNumProtocols + abi::kProtoLL128;
  const int ringLL = abi::kAlgoRing * abi::kNumProtocols + abi::kProtoLL;
  const int nvlsSimple = abi::kAlgoNvls * abi::kNumProtocols + abi::kProtoSimple;
  const int collnetSimple = abi::kAlgoCollNetDirect * abi::kNumProtocols + abi::kProtoSimple;
  // The three variants of a cell, and arms of the two older variants unchanged.
  CHECK(halvedChunkArm(ringSimple) == 2 * kNumCells + ringSimple);
  CHECK(armCell(halvedChunkArm(ringSimple)) == ringSimple);
  CHECK(armHalvesChunk(halvedChunkArm(ringSimple)));
  CHECK_FALSE(armHalvesChannels(halvedChunkArm(ringSimple)));
  CHECK(armHalvesChannels(halvedChannelArm(ringSimple)));
  CHECK_FALSE(armHalvesChunk(halvedChannelArm(ringSimple)));
  CHECK_FALSE(armHalvesChunk(ringSimple));
  CHECK(kNumArms == 63);
  // Ring and tree with LL128 or Simple only.
  CHECK(cellTakesChunkSize(ringSimple));
  CHECK(cellTakesChunkSize(treeLL128));
  CHECK_FALSE(cellTakesChunkSize(ringLL));
  CHECK_FALSE(cellTakesChunkSize(nvlsSimple));
  CHECK_FALSE(cellTakesChunkSize(collnetSimple));
  // Half, never below 64 KiB: NCCL's value stands where half would be smaller.
  CHECK(halvedChunk(2u << 20) == 1u << 20);
  CHECK(halvedChunk(576000) == 288000);  // LL128's default, a multiple of its 1,920-byte grain
  CHECK(halvedChunk(128u << 10) == 64u << 10);
  CHECK(halvedChunk(100u << 10) == 100u << 10);
  CHECK(halvedChunk(32u << 10) == 32u << 10);  // LL's default
  CHECK(halvedChunk(0) == 0);

  DecisionTable t;
  ContextDecision& a = t.entries[42];
  a.primary = int8_t(halvedChunkArm(ringSimple));
  a.explore = int8_t(halvedChunkArm(treeLL128));
  a.period = 2;
  a.budget = 1;
  CHECK(channelsForArm(a, a.primary) == 0);
  DecisionTable back;
  REQUIRE(roundTrip(t, &back));
  CHECK(back == t);
  DecisionTable stray = t;
  stray.entries[42].primaryChannels = 4;  // a chunk arm runs NCCL's channel count
  CHECK_FALSE(roundTrip(stray, &back));
}

// The framed connection under the tuner's rendezvous: bounded work per read, frames left in the
// buffer handed out later without new data, oversized frames refused.
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tuner_plugin/control_channel.h"
#include "tuner_plugin/wire_format.h"

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

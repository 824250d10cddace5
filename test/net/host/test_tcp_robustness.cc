// What a hostile or broken peer can do, through the real .so: wrong secret, garbage, a
// truncated hello, another protocol version, garbage frames after a valid handshake, corrupted
// and stale handles, a peer killed mid-transfer. Each is rejected or reported cleanly and in
// bounded time, never a crash or a hang, and the plugin keeps serving honest peers.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "bench/net/pair.h"
#include "common/host/log_capture.h"
#include "net_plugin/transport/tcp/handle.h"
#include "net_plugin/transport/tcp/socket.h"
#include "net_plugin/transport/tcp/wire.h"

using namespace autopilot;
using namespace autopilot::bench;
namespace tcp = autopilot::net::tcp;
namespace wire = autopilot::net::tcp::wire;

namespace {

// A raw TCP connection to rail `r` of a handle; returns -1 on failure.
int rogueConnect(const uint8_t* handle, int r) {
  tcp::Handle h;
  if (tcp::decodeHandle(handle, tcp::kHandleBytes, &h) != wire::DecodeError::kOk) return -1;
  int err = 0;
  tcp::Fd fd = tcp::makeStreamSocket(h.rails[r].family(), &err);
  tcp::IoResult res = tcp::startConnect(fd.get(), h.rails[r]);
  if (res.status == tcp::Io::kError) return -1;
  for (int i = 0; i < 1000 && tcp::connectStatus(fd.get()).status == tcp::Io::kWouldBlock; ++i) {
    usleep(1000);
  }
  return fd.release();
}

void writeAll(int fd, const void* p, size_t n) {
  for (int i = 0; i < 1000 && n > 0; ++i) {
    tcp::IoResult r = tcp::writeSome(fd, p, n);
    if (r.status == tcp::Io::kError) return;
    p = static_cast<const uint8_t*>(p) + r.bytes;
    n -= r.bytes;
    if (n) usleep(1000);
  }
}

// Reads the 64-byte answer (or EOF); returns the decoded status, or -1.
int readAnswer(int fd) {
  uint8_t buf[wire::kHelloBytes];
  size_t got = 0;
  double deadline = nowSeconds() + 5;
  while (got < sizeof(buf) && nowSeconds() < deadline) {
    tcp::IoResult r = tcp::readSome(fd, buf + got, sizeof(buf) - got);
    if (r.status == tcp::Io::kClosed || r.status == tcp::Io::kError) break;
    got += r.bytes;
    if (r.status == tcp::Io::kWouldBlock) usleep(1000);
  }
  wire::HelloAck ack;
  if (got < sizeof(buf) || wire::decodeHelloAck(buf, got, &ack) != wire::DecodeError::kOk)
    return -1;
  return int(ack.status);
}

wire::Hello validHello(const uint8_t* handle, int rail, int rails, uint64_t connId) {
  tcp::Handle h;
  tcp::decodeHandle(handle, tcp::kHandleBytes, &h);
  wire::Hello hello;
  std::memcpy(hello.secret, h.secret, sizeof(hello.secret));
  hello.railIndex = uint8_t(rail);
  hello.railCount = uint8_t(rails);
  hello.connectionId = connId;
  hello.generation = 1;
  return hello;
}

// Receiver side shared by the rogue tests: accept while the rogue works, then serve an honest
// 1 MiB transfer on whatever connection completes.
int acceptThroughRogues(NetEndpoint& ep, Channel& peer, const char* expectWarn) {
  uint8_t handle[abi::kNetHandleMaxSize];
  void* lc = nullptr;
  PEER_CHECK(ep.listen(0, handle, &lc) == abi::kSuccess, "listen");
  PEER_CHECK(peer.send(handle, sizeof(handle)), "handle");
  void* comm = nullptr;
  double deadline = nowSeconds() + 30;
  while (comm == nullptr && nowSeconds() < deadline) {
    PEER_CHECK(ep.net()->accept(lc, &comm) == abi::kSuccess, "accept returned an error");
  }
  ep.net()->closeListen(lc);
  PEER_CHECK(comm != nullptr, "accept never completed");
  PEER_CHECK(host::LogCapture::count(abi::kLogWarn, expectWarn) >= 1, "no warning '%s'",
             expectWarn);
  PEER_CHECK(host::LogCapture::count(abi::kLogWarn, "127.0.0.") >= 1,
             "the peer address is not logged");
  std::vector<uint8_t> buf(1 << 20);
  void* data = buf.data();
  size_t size = buf.size();
  int tag = 0;
  void* req = nullptr;
  PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &req) == abi::kSuccess, "irecv");
  PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "honest transfer after the rogue");
  PEER_CHECK(checkPattern(buf.data(), buf.size(), 5) < 0, "data");
  ep.net()->closeRecv(comm);
  return 0;
}

int honestSend(NetEndpoint& ep, uint8_t* handle) {
  void* comm = nullptr;
  PEER_CHECK(ep.connect(0, handle, &comm, 30) == abi::kSuccess && comm, "connect");
  std::vector<uint8_t> buf(1 << 20);
  fillPattern(buf.data(), buf.size(), 5);
  void* req = nullptr;
  PEER_CHECK(ep.isend(comm, buf.data(), buf.size(), 0, &req) == abi::kSuccess, "isend");
  PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "send");
  ep.net()->closeSend(comm);
  return 0;
}

struct RogueCase {
  const char* name;
  const char* warning;
  int expectStatus;  // the answer the rogue must get, -1: none (closed)
  std::function<void(int fd, const uint8_t* handle)> act;
};

}  // namespace

TEST_CASE("rogue connections are rejected and logged; honest peers still connect",
          "[net][tcp][robustness]") {
  std::vector<RogueCase> cases = {
      {"wrong secret", "wrong secret", int(wire::AckStatus::kBadSecret),
       [](int fd, const uint8_t* handle) {
         wire::Hello h = validHello(handle, 0, 1, 42);
         h.secret[3] ^= 0x40;
         uint8_t buf[wire::kHelloBytes];
         wire::encodeHello(h, buf);
         writeAll(fd, buf, sizeof(buf));
       }},
      {"garbage", "garbage instead of a hello", int(wire::AckStatus::kMalformed),
       [](int fd, const uint8_t*) {
         uint8_t buf[wire::kHelloBytes];
         for (size_t i = 0; i < sizeof(buf); ++i) buf[i] = uint8_t(i * 7 + 1);
         writeAll(fd, buf, sizeof(buf));
       }},
      {"truncated", "truncated hello", -1,
       [](int fd, const uint8_t* handle) {
         uint8_t buf[wire::kHelloBytes];
         wire::encodeHello(validHello(handle, 0, 1, 42), buf);
         writeAll(fd, buf, 20);
         ::shutdown(fd, SHUT_WR);
       }},
      {"other version", "protocol version", int(wire::AckStatus::kBadVersion),
       [](int fd, const uint8_t* handle) {
         wire::Hello h = validHello(handle, 0, 1, 42);
         h.version = wire::kProtocolVersion + 1;
         uint8_t buf[wire::kHelloBytes];
         wire::encodeHello(h, buf);
         writeAll(fd, buf, sizeof(buf));
       }},
      {"bad rail index", "rail index out of range", int(wire::AckStatus::kBadRail),
       [](int fd, const uint8_t* handle) {
         uint8_t buf[wire::kHelloBytes];
         wire::encodeHello(validHello(handle, 5, 8, 42), buf);  // the listener has 2 rails
         writeAll(fd, buf, sizeof(buf));
       }},
  };
  for (const RogueCase& rc : cases) {
    DYNAMIC_SECTION(rc.name) {
      PairOptions o;
      o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(2)}};
      PairOutcome out = runPair(
          o,
          [&](NetEndpoint& ep, Channel& peer, Channel&) {
            return acceptThroughRogues(ep, peer, rc.warning);
          },
          [&](NetEndpoint& ep, Channel& peer, Channel&) {
            uint8_t handle[abi::kNetHandleMaxSize];
            PEER_CHECK(peer.recv(handle, sizeof(handle), 30000), "handle");
            int fd = rogueConnect(handle, 0);
            PEER_CHECK(fd >= 0, "rogue connect");
            rc.act(fd, handle);
            int status = readAnswer(fd);
            ::close(fd);
            PEER_CHECK(status == rc.expectStatus, "answer %d, expected %d", status,
                       rc.expectStatus);
            return honestSend(ep, handle);
          });
      CHECK(out.receiver == 0);
      CHECK(out.sender == 0);
    }
  }
}

TEST_CASE("a second connection presenting a used handle is refused", "[net][tcp][robustness]") {
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(1)}};
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        // The receive stays pending (and the comm progressing) while the intruder tries its
        // luck; the sender sends only once it has the intruder's answer.
        std::vector<uint8_t> buf(64);
        void* data = buf.data();
        size_t size = buf.size();
        int tag = 0;
        void* req = nullptr;
        PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &req) == abi::kSuccess, "irecv");
        PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "wait");
        PEER_CHECK(host::LogCapture::count(abi::kLogWarn, "another connection") >= 1,
                   "the intruder was not reported");
        ep.net()->closeRecv(comm);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        uint8_t handle[abi::kNetHandleMaxSize];
        PEER_CHECK(peer.recv(handle, sizeof(handle), 30000), "handle");
        uint8_t copy[abi::kNetHandleMaxSize];
        std::memcpy(copy, handle, sizeof(copy));
        void* comm = nullptr;
        PEER_CHECK(ep.connect(0, handle, &comm, 30) == abi::kSuccess, "first connect");
        // The same handle again: the receive comm serves another connection now.
        int fd = rogueConnect(copy, 0);
        PEER_CHECK(fd >= 0, "rogue connect");
        uint8_t buf[wire::kHelloBytes];
        wire::encodeHello(validHello(copy, 0, 1, 0x1234567), buf);
        writeAll(fd, buf, sizeof(buf));
        int status = readAnswer(fd);
        ::close(fd);
        PEER_CHECK(status == int(wire::AckStatus::kWrongConnection), "answer %d", status);
        std::vector<uint8_t> data(64);
        void* req = nullptr;
        PEER_CHECK(ep.isend(comm, data.data(), data.size(), 0, &req) == abi::kSuccess, "isend");
        PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "send");
        ep.net()->closeSend(comm);
        return 0;
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE("corrupted, foreign and stale handles fail connect cleanly and quickly",
          "[net][tcp][robustness]") {
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(2)}};
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        uint8_t handle[abi::kNetHandleMaxSize];
        void* lc = nullptr;
        PEER_CHECK(ep.listen(0, handle, &lc) == abi::kSuccess, "listen");
        ep.net()->closeListen(lc);  // the handle is stale from now on
        PEER_CHECK(peer.send(handle, sizeof(handle)), "handle");
        PEER_CHECK(peer.expect("done", 30000), "peer");
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        uint8_t handle[abi::kNetHandleMaxSize];
        PEER_CHECK(peer.recv(handle, sizeof(handle), 30000), "handle");
        void* comm = nullptr;
        // Corrupted: one flipped bit is caught by the checksum.
        uint8_t bad[abi::kNetHandleMaxSize];
        std::memcpy(bad, handle, sizeof(bad));
        bad[30] ^= 1;
        PEER_CHECK(ep.connect(0, bad, &comm, 5) == abi::kInvalidUsage && !comm, "corrupted");
        // Foreign: zeros, and NCCL's socket magic.
        std::memset(bad, 0, sizeof(bad));
        PEER_CHECK(ep.connect(0, bad, &comm, 5) == abi::kInvalidUsage, "zeros");
        uint64_t ncclMagic = 0x564ab9f2fc4b9d6cull;
        std::memcpy(bad + 28, &ncclMagic, 8);
        PEER_CHECK(ep.connect(0, bad, &comm, 5) == abi::kInvalidUsage, "foreign");
        // Stale: the listener is closed; every rail is refused.
        double t0 = nowSeconds();
        abi::Result r = ep.connect(0, handle, &comm, 20);
        double dt = nowSeconds() - t0;
        PEER_CHECK(r == abi::kSystemError && !comm, "stale handle gave %d", int(r));
        PEER_CHECK(dt < 5, "stale handle took %.1f s", dt);
        PEER_CHECK(host::LogCapture::count(abi::kLogWarn, "no rail could connect") == 1, "reason");
        peer.sendLine("done");
        return 0;
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE(
    "garbage frames after a valid handshake fail the rail, then the request, in bounded "
    "time",
    "[net][tcp][robustness]") {
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(1)},
           {"NCCL_AUTOPILOT_NET_PEER_TIMEOUT_MS", "500"}};
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(4096);
        void* data = buf.data();
        size_t size = buf.size();
        int tag = 0;
        void* req = nullptr;
        PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &req) == abi::kSuccess, "irecv");
        PEER_CHECK(peer.sendLine("posted"), "peer");
        double t0 = nowSeconds();
        abi::Result r = ep.wait(req, nullptr, 20);
        double dt = nowSeconds() - t0;
        PEER_CHECK(r == abi::kRemoteError, "expected ncclRemoteError, got %d", int(r));
        PEER_CHECK(dt < 5, "took %.1f s", dt);
        PEER_CHECK(host::LogCapture::count(abi::kLogWarn, "protocol error") >= 1, "not logged");
        ep.net()->closeRecv(comm);
        peer.sendLine("done");
        return 0;
      },
      [&](NetEndpoint&, Channel& peer, Channel&) {
        uint8_t handle[abi::kNetHandleMaxSize];
        PEER_CHECK(peer.recv(handle, sizeof(handle), 30000), "handle");
        int fd = rogueConnect(handle, 0);
        uint8_t buf[wire::kHelloBytes];
        wire::encodeHello(validHello(handle, 0, 1, 77), buf);
        writeAll(fd, buf, sizeof(buf));
        PEER_CHECK(readAnswer(fd) == int(wire::AckStatus::kAccepted), "handshake");
        PEER_CHECK(peer.expect("posted", 30000), "peer");
        // A DATA header for a receive that was never posted, then noise.
        wire::FrameHeader h;
        h.type = wire::FrameType::kData;
        h.seq = 999;
        h.length = 16;
        h.chunks = 1;
        uint8_t frame[wire::kFrameHeaderBytes + 16] = {};
        wire::encodeFrameHeader(h, frame);
        writeAll(fd, frame, sizeof(frame));
        PEER_CHECK(peer.expect("done", 30000), "peer");
        ::close(fd);
        return 0;
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE("a killed sender gives the receiver an error in bounded time", "[net][tcp][robustness]") {
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(2)}};
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(64 << 20);
        void* data = buf.data();
        size_t size = buf.size();
        int tag = 0;
        void* req = nullptr;
        PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &req) == abi::kSuccess, "irecv");
        // irecv announces the receive, so the sender starts at once; this side does not read
        // until the sender is dead. Its sockets then hold what the kernel took (a few MiB per
        // rail: a window grows only while the application reads), far less than 64 MiB, so the
        // stream ends in the middle of the data. Driving the receive here instead made the test
        // depend on speed: a fast machine moved all 64 MiB before the kill.
        PEER_CHECK(peer.expect("dying", 30000), "peer");
        double t0 = nowSeconds();
        abi::Result r = ep.wait(req, nullptr, 30);
        double dt = nowSeconds() - t0;
        PEER_CHECK(r != abi::kSuccess, "the receive completed although the sender died");
        PEER_CHECK(dt < 4.0, "error after %.2f s", dt);
        ep.net()->closeRecv(comm);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(64 << 20, 3);
        void* req = nullptr;
        PEER_CHECK(ep.isend(comm, buf.data(), buf.size(), 0, &req) == abi::kSuccess, "isend");
        int done = 0;
        for (int i = 0; i < 200 && done == 0; ++i) ep.net()->test(req, &done, nullptr);
        // A send that completed would leave nothing to cut: the case would prove nothing.
        PEER_CHECK(done == 0, "the whole send went out before the kill; the case proves nothing");
        peer.sendLine("dying");
        ::raise(SIGKILL);
        return 0;
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 128 + SIGKILL);
}

TEST_CASE("a killed receiver gives the sender an error in bounded time", "[net][tcp][robustness]") {
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(2)}};
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(64 << 20);
        void* data = buf.data();
        size_t size = buf.size();
        int tag = 0;
        void* req = nullptr;
        PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &req) == abi::kSuccess, "irecv");
        int done = 0;
        for (int i = 0; i < 200 && done == 0; ++i) ep.net()->test(req, &done, nullptr);
        // A send that completed would leave nothing to cut: the case would prove nothing.
        PEER_CHECK(done == 0, "the whole send went out before the kill; the case proves nothing");
        peer.sendLine("dying");
        ::raise(SIGKILL);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(64 << 20, 3);
        void* req = nullptr;
        PEER_CHECK(ep.isend(comm, buf.data(), buf.size(), 0, &req) == abi::kSuccess, "isend");
        // Not driven until the receiver is dead, for the reason the killed-sender case gives:
        // only then can the receiver never hold the whole message, however fast the machine.
        PEER_CHECK(peer.expect("dying", 30000), "peer");
        double t0 = nowSeconds();
        abi::Result r = ep.wait(req, nullptr, 30);
        double dt = nowSeconds() - t0;
        PEER_CHECK(r == abi::kRemoteError, "expected ncclRemoteError, got %d", int(r));
        PEER_CHECK(dt < 4.0, "error after %.2f s", dt);
        ep.net()->closeSend(comm);
        return 0;
      });
  CHECK(out.receiver == 128 + SIGKILL);
  CHECK(out.sender == 0);
}

TEST_CASE("idle connections piled on a listener never keep an honest connect out",
          "[net][tcp][robustness][security]") {
  // 40 connections that never say hello (more than the 16 a listener keeps, all from one
  // source) before the honest sender dials: the oldest are evicted for newcomers, so the honest
  // connection gets its slot, and warnings stay rate-limited.
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(1)}};
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        if (int rc = acceptThroughRogues(ep, peer, "closed the oldest")) return rc;
        PEER_CHECK(host::LogCapture::count(abi::kLogWarn, "closed the oldest") <= 2,
                   "the eviction warning is not rate-limited");
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        uint8_t handle[abi::kNetHandleMaxSize];
        PEER_CHECK(peer.recv(handle, sizeof(handle), 30000), "handle");
        std::vector<int> idle;
        for (int i = 0; i < 40; ++i) {
          int fd = rogueConnect(handle, 0);
          PEER_CHECK(fd >= 0, "idle connect %d", i);
          idle.push_back(fd);
        }
        usleep(200000);  // the receiver's accept() loop takes them in
        int rc = honestSend(ep, handle);
        for (int fd : idle) ::close(fd);
        return rc;
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

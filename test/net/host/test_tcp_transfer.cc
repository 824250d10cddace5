// Data transfers through the real .so between two processes over loopback rails: sizes from
// 0 B up, data checked end to end, 1/2/4 rails, pipelined requests (more than NCCL's 8 steps),
// receive buffers larger than the send.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "bench/net/pair.h"

using namespace autopilot;
using namespace autopilot::bench;

namespace {

// Both sides agree on the message list; the receiver checks every byte and the size.
struct Message {
  size_t size;
  size_t capacity;  // receive buffer (>= size)
};

std::vector<Message> sizeSweep(size_t maxSize) {
  std::vector<Message> m;
  for (size_t s : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(4095), size_t(65536),
                   size_t(131071), size_t(131072), size_t(1 << 20) + 3, size_t(4 << 20),
                   size_t(16 << 20) - 1, size_t(64 << 20)}) {
    if (s <= maxSize) m.push_back({s, s + (s % 3 == 0 ? 0 : 4096)});
  }
  return m;
}

int receiveAll(NetEndpoint& ep, void* comm, const std::vector<Message>& msgs, int depth) {
  size_t n = msgs.size();
  std::vector<std::vector<uint8_t>> bufs(n);
  std::vector<void*> reqs(n, nullptr);
  size_t posted = 0, done = 0;
  while (done < n) {
    while (posted < n && posted - done < size_t(depth)) {
      bufs[posted].assign(msgs[posted].capacity, 0xee);
      void* data = bufs[posted].data();
      size_t size = msgs[posted].capacity;
      int tag = 1;
      PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &reqs[posted]) == abi::kSuccess, "irecv");
      ++posted;
    }
    int sizes[abi::kProxyMaxSubs] = {};
    abi::Result r = ep.wait(reqs[done], sizes, 60);
    PEER_CHECK(r == abi::kSuccess, "message %zu: %d %s", done, int(r), ep.error().c_str());
    PEER_CHECK(size_t(sizes[0]) == msgs[done].size, "message %zu: size %d, expected %zu", done,
               sizes[0], msgs[done].size);
    int64_t bad = checkPattern(bufs[done].data(), msgs[done].size, 1000 + done);
    PEER_CHECK(bad < 0, "message %zu (%zu bytes): wrong byte at %lld", done, msgs[done].size,
               (long long)bad);
    bufs[done].clear();
    bufs[done].shrink_to_fit();
    ++done;
  }
  return 0;
}

int sendAll(NetEndpoint& ep, void* comm, const std::vector<Message>& msgs, int depth) {
  size_t n = msgs.size();
  std::vector<std::vector<uint8_t>> bufs(n);
  std::vector<void*> reqs(n, nullptr);
  size_t posted = 0, done = 0;
  while (done < n) {
    while (posted < n && posted - done < size_t(depth)) {
      bufs[posted].resize(msgs[posted].size);
      fillPattern(bufs[posted].data(), msgs[posted].size, 1000 + posted);
      PEER_CHECK(ep.isend(comm, bufs[posted].data(), msgs[posted].size, 1, &reqs[posted]) ==
                     abi::kSuccess,
                 "isend");
      ++posted;
    }
    int size = -1;
    abi::Result r = ep.wait(reqs[done], &size, 60);
    PEER_CHECK(r == abi::kSuccess, "send %zu: %d %s", done, int(r), ep.error().c_str());
    bufs[done].clear();
    bufs[done].shrink_to_fit();
    ++done;
  }
  return 0;
}

PairOutcome transfer(int rails, const std::vector<Message>& msgs, int depth, int version = 11) {
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(rails)}};
  o.maxNetVersion = version;
  return runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        int rc = receiveAll(ep, comm, msgs, depth);
        PEER_CHECK(peer.expect("sender done", 30000), "sender did not finish");
        ep.net()->closeRecv(comm);
        return rc;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        int rc = sendAll(ep, comm, msgs, depth);
        peer.sendLine("sender done");
        ep.net()->closeSend(comm);
        return rc;
      });
}

}  // namespace

TEST_CASE("transfers of 0 B to 64 MiB arrive intact over 1, 2 and 4 loopback rails",
          "[net][tcp]") {
  for (int rails : {1, 2, 4}) {
    DYNAMIC_SECTION(rails << " rail(s)") {
      PairOutcome out = transfer(rails, sizeSweep(64 << 20), 1);
      CHECK(out.receiver == 0);
      CHECK(out.sender == 0);
    }
  }
}

TEST_CASE("more than NCCL's 8 steps in flight, many small and mid-size messages", "[net][tcp]") {
  std::vector<Message> msgs;
  for (int i = 0; i < 400; ++i) {
    size_t s = (i % 5 == 0) ? size_t(300 << 10) + size_t(i) : size_t(i * 37 % 9000);
    msgs.push_back({s, s + size_t(i % 4) * 512});
  }
  PairOutcome out = transfer(2, msgs, 24);
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE("every exported net version (v8..v11) carries data", "[net][tcp]") {
  for (int v = 8; v <= 11; ++v) {
    DYNAMIC_SECTION("v" << v) {
      PairOutcome out = transfer(2, sizeSweep(4 << 20), 4, v);
      CHECK(out.receiver == 0);
      CHECK(out.sender == 0);
    }
  }
}

// One 1 GiB message (the largest NCCL hands a v8 plugin), over 4 rails, every byte checked.
// Hidden from the default run; CTest runs it as net_large_transfer (label slow).
TEST_CASE("a 1 GiB message arrives intact over 4 loopback rails", "[.large][net][tcp]") {
  PairOutcome out = transfer(4, {{size_t(1) << 30, size_t(1) << 30}}, 1);
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

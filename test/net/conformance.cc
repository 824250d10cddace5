#include "test/net/conformance.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

using namespace autopilot::bench;

namespace autopilot::test {

namespace {

// Registered buffers of one comm, deregistered when the scope ends.
struct Buffers {
  NetEndpoint& ep;
  void* comm;
  std::vector<std::vector<uint8_t>> data;
  std::vector<void*> mhs;
  Buffers(NetEndpoint& e, void* c, size_t count, size_t bytes) : ep(e), comm(c) {
    data.assign(count, std::vector<uint8_t>(bytes, 0));
    for (auto& d : data) mhs.push_back(ep.registerMemory(comm, d.data(), d.size()));
  }
  ~Buffers() {
    for (void* mh : mhs) ep.deregisterMemory(comm, mh);
  }
};

// One connection and one message each way of the stream, to show that the process still works
// after a scenario closed comms with requests in flight.
int receiveOnce(NetEndpoint& ep, Channel& peer) {
  void* comm = nullptr;
  if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
  Buffers b(ep, comm, 1, 1 << 20);
  void* data = b.data[0].data();
  size_t size = b.data[0].size();
  int tag = 0;
  void* req = nullptr;
  PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &req, 10, false, &b.mhs[0]) == abi::kSuccess,
             "irecv");
  int got[abi::kProxyMaxSubs] = {};
  PEER_CHECK(ep.wait(req, got, 30) == abi::kSuccess, "the last receive");
  PEER_CHECK(got[0] == 1 << 20 && checkPattern(b.data[0].data(), size, 77) < 0, "data");
  PEER_CHECK(ep.net()->closeRecv(comm) == abi::kSuccess, "closeRecv");
  return 0;
}

int sendOnce(NetEndpoint& ep, Channel& peer) {
  void* comm = nullptr;
  if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
  Buffers b(ep, comm, 1, 1 << 20);
  fillPattern(b.data[0].data(), b.data[0].size(), 77);
  void* req = nullptr;
  PEER_CHECK(
      ep.isend(comm, b.data[0].data(), b.data[0].size(), 0, &req, 10, b.mhs[0]) == abi::kSuccess,
      "isend");
  PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "the last send");
  PEER_CHECK(ep.net()->closeSend(comm) == abi::kSuccess, "closeSend");
  return 0;
}

// Runs `pass` over and over, as NCCL's proxy would, until 1 s after the peer (`who`) says
// "closed" (30 s at most), or until `pass` sets *stop. Returns the first non-zero code.
int passUntilPeerClosed(Channel& peer, const char* who, const std::function<int(bool*)>& pass) {
  bool closed = false, stop = false;
  double until = 1e300;
  const double deadline = nowSeconds() + 30;
  while (!stop && nowSeconds() < until) {
    PEER_CHECK(nowSeconds() < deadline, "the %s did not close in 30 s", who);
    if (!closed && peer.readable()) {
      PEER_CHECK(peer.expect("closed", 1000), "%s", who);
      closed = true;
      until = nowSeconds() + 1.0;
    }
    if (int rc = pass(&stop)) return rc;
  }
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------- tag order

PairOutcome tagOrder(const PairOptions& options) {
  // Receive k takes the tags of kTags[k] (one buffer each); the sender posts in kSendOrder.
  static const std::vector<std::vector<int>> kTags = {{8, 9}, {0}, {3, 1}};
  static const std::vector<int> kSendOrder = {0, 1, 3, 9, 8};
  constexpr size_t kBytes = 70000;
  auto bytesOf = [](int tag) { return kBytes - size_t(tag) * 100; };
  return runPair(
      options,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        Buffers b(ep, comm, 5, kBytes);
        std::vector<void*> reqs;
        std::vector<int> tagOfBuffer;
        size_t next = 0;
        for (const auto& tags : kTags) {
          void* data[8];
          size_t sizes[8];
          int t[8];
          void* mhs[8];
          for (size_t i = 0; i < tags.size(); ++i, ++next) {
            data[i] = b.data[next].data();
            sizes[i] = kBytes;
            t[i] = tags[i];
            mhs[i] = b.mhs[next];
            tagOfBuffer.push_back(tags[i]);
          }
          void* req = nullptr;
          PEER_CHECK(ep.irecv(comm, int(tags.size()), data, sizes, t, &req, 10, false, mhs) ==
                         abi::kSuccess,
                     "irecv");
          reqs.push_back(req);
        }
        PEER_CHECK(peer.sendLine("posted"), "peer");
        next = 0;
        for (size_t k = 0; k < reqs.size(); ++k) {
          int got[abi::kProxyMaxSubs] = {};
          PEER_CHECK(ep.wait(reqs[k], got, 30) == abi::kSuccess, "receive %zu", k);
          for (size_t i = 0; i < kTags[k].size(); ++i, ++next) {
            int tag = tagOfBuffer[next];
            PEER_CHECK(size_t(got[i]) == bytesOf(tag), "receive %zu buffer %zu: %d bytes", k, i,
                       got[i]);
            PEER_CHECK(checkPattern(b.data[next].data(), bytesOf(tag), uint64_t(tag)) < 0,
                       "receive %zu buffer %zu (tag %d): wrong bytes", k, i, tag);
          }
        }
        PEER_CHECK(peer.expect("done", 30000), "sender");
        PEER_CHECK(ep.net()->closeRecv(comm) == abi::kSuccess, "closeRecv");
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        Buffers b(ep, comm, kSendOrder.size(), kBytes);
        for (size_t i = 0; i < kSendOrder.size(); ++i) {
          fillPattern(b.data[i].data(), bytesOf(kSendOrder[i]), uint64_t(kSendOrder[i]));
        }
        PEER_CHECK(peer.expect("posted", 30000), "receiver");
        // Tag 0 belongs to the second receive: while the first one waits for 8 and 9, it gets
        // NULL however often it is posted, and never an error.
        for (int i = 0; i < 200; ++i) {
          void* req = reinterpret_cast<void*>(0xbad);
          abi::Result r =
              ep.net()->isend(comm, b.data[0].data(), bytesOf(0), 0, b.mhs[0], nullptr, &req);
          PEER_CHECK(r == abi::kSuccess, "isend of tag 0 ahead of its turn: error %d", int(r));
          PEER_CHECK(req == nullptr, "isend of tag 0 ahead of its turn got a request");
          usleep(500);
        }
        // As NCCL's proxy: every pass posts each send not yet taken, in order, once.
        std::vector<void*> reqs(kSendOrder.size(), nullptr);
        std::vector<int> takenAt(kSendOrder.size(), -1);
        int pass = 0;
        double deadline = nowSeconds() + 30;
        while (std::count(reqs.begin(), reqs.end(), nullptr) > 0) {
          PEER_CHECK(nowSeconds() < deadline, "sends still not taken after 30 s");
          ++pass;
          for (size_t i = 0; i < kSendOrder.size(); ++i) {
            if (reqs[i] != nullptr) continue;
            abi::Result r = ep.net()->isend(comm, b.data[i].data(), bytesOf(kSendOrder[i]),
                                            kSendOrder[i], b.mhs[i], nullptr, &reqs[i]);
            PEER_CHECK(r == abi::kSuccess, "isend of tag %d: error %d", kSendOrder[i], int(r));
            if (reqs[i] != nullptr) takenAt[i] = pass;
          }
        }
        // Tag 0 waited for both tags of the first receive; 1 and 3 for tag 0 (their receive
        // comes after).
        int first = std::max(takenAt[3], takenAt[4]);
        PEER_CHECK(takenAt[0] >= first,
                   "tag 0 taken in pass %d, before the first receive's "
                   "tags (pass %d)",
                   takenAt[0], first);
        PEER_CHECK(takenAt[1] >= takenAt[0] && takenAt[2] >= takenAt[0],
                   "tags 1 and 3 taken before tag 0");
        PEER_CHECK(waitAll(ep, reqs, nullptr, 30) == abi::kSuccess, "sends");
        peer.sendLine("done");
        PEER_CHECK(ep.net()->closeSend(comm) == abi::kSuccess, "closeSend");
        return 0;
      });
}

// ---------------------------------------------------------------------------- many connections

PairOutcome manyConnectionsPerListen(const PairOptions& options, int connections) {
  constexpr size_t kBase = 300000;
  return runPair(
      options,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        uint8_t handle[abi::kNetHandleMaxSize];
        void* listenComm = nullptr;
        PEER_CHECK(ep.listen(0, handle, &listenComm) == abi::kSuccess && listenComm, "listen");
        PEER_CHECK(peer.send(handle, sizeof(handle)), "handle not sent");
        std::vector<void*> comms;
        double deadline = nowSeconds() + 30;
        while (int(comms.size()) < connections) {
          PEER_CHECK(nowSeconds() < deadline, "%zu of %d connections accepted in 30 s",
                     comms.size(), connections);
          void* comm = nullptr;
          abi::Result r = ep.net()->accept(listenComm, &comm);
          PEER_CHECK(r == abi::kSuccess, "accept %zu: error %d", comms.size(), int(r));
          if (comm != nullptr) comms.push_back(comm);
        }
        PEER_CHECK(ep.net()->closeListen(listenComm) == abi::kSuccess, "closeListen");
        PEER_CHECK(peer.sendLine("accepted"), "peer");
        // Two rounds, both after the listen comm closed. Which sender comm a receive comm
        // belongs to shows in the data: connection k sends kBase + k bytes of pattern k.
        for (int round = 0; round < 2; ++round) {
          std::vector<std::unique_ptr<Buffers>> bufs;
          std::vector<void*> reqs;
          for (void* comm : comms) {
            bufs.push_back(std::make_unique<Buffers>(ep, comm, 1, kBase + 64));
            void* data = bufs.back()->data[0].data();
            size_t size = bufs.back()->data[0].size();
            int tag = round;
            void* req = nullptr;
            PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &req, 10, false,
                                &bufs.back()->mhs[0]) == abi::kSuccess,
                       "irecv");
            reqs.push_back(req);
          }
          std::vector<int> sizes;
          PEER_CHECK(waitAll(ep, reqs, &sizes, 30) == abi::kSuccess, "round %d", round);
          std::set<int> seen;
          for (size_t c = 0; c < comms.size(); ++c) {
            int k = sizes[c] - int(kBase);
            PEER_CHECK(k >= 0 && k < connections, "connection %zu: %d bytes", c, sizes[c]);
            PEER_CHECK(checkPattern(bufs[c]->data[0].data(), size_t(sizes[c]),
                                    uint64_t(round * 100 + k)) < 0,
                       "connection %zu: wrong bytes", c);
            seen.insert(k);
          }
          PEER_CHECK(int(seen.size()) == connections, "two receive comms got the same sender");
        }
        PEER_CHECK(peer.expect("done", 30000), "sender");
        for (void* comm : comms) {
          PEER_CHECK(ep.net()->closeRecv(comm) == abi::kSuccess, "closeRecv");
        }
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        uint8_t original[abi::kNetHandleMaxSize];
        PEER_CHECK(peer.recv(original, sizeof(original), 30000), "no handle from the receiver");
        // Every connection at once, each with its own copy of the handle, as NCCL's proxies
        // of several channels would.
        std::vector<std::vector<uint8_t>> handles(
            size_t(connections), std::vector<uint8_t>(original, original + sizeof(original)));
        std::vector<void*> comms(size_t(connections), nullptr);
        double deadline = nowSeconds() + 30;
        while (std::count(comms.begin(), comms.end(), nullptr) > 0) {
          PEER_CHECK(nowSeconds() < deadline, "connections not up in 30 s");
          for (int k = 0; k < connections; ++k) {
            if (comms[size_t(k)] != nullptr) continue;
            abi::Result r =
                ep.net()->connect(ep.context(), 0, handles[size_t(k)].data(), &comms[size_t(k)]);
            PEER_CHECK(r == abi::kSuccess, "connect %d: error %d", k, int(r));
          }
        }
        PEER_CHECK(peer.expect("accepted", 30000), "receiver");
        for (int round = 0; round < 2; ++round) {
          std::vector<std::unique_ptr<Buffers>> bufs;
          std::vector<void*> reqs;
          for (int k = 0; k < connections; ++k) {
            void* comm = comms[size_t(k)];
            bufs.push_back(std::make_unique<Buffers>(ep, comm, 1, kBase + size_t(k)));
            fillPattern(bufs.back()->data[0].data(), kBase + size_t(k), uint64_t(round * 100 + k));
            void* req = nullptr;
            PEER_CHECK(ep.isend(comm, bufs.back()->data[0].data(), kBase + size_t(k), round, &req,
                                10, bufs.back()->mhs[0]) == abi::kSuccess,
                       "isend");
            reqs.push_back(req);
          }
          PEER_CHECK(waitAll(ep, reqs, nullptr, 30) == abi::kSuccess, "round %d", round);
        }
        peer.sendLine("done");
        for (void* comm : comms) {
          PEER_CHECK(ep.net()->closeSend(comm) == abi::kSuccess, "closeSend");
        }
        return 0;
      });
}

// ---------------------------------------------------------------------------- orderly close

PairOutcome receiverClosesWhileSending(const PairOptions& options) {
  constexpr int kPosted = 8;
  constexpr int kSends = 16;
  constexpr size_t kBytes = 1 << 20;
  return runPair(
      options,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        {
          Buffers b(ep, comm, kPosted, kBytes);
          for (int i = 0; i < kPosted; ++i) {
            void* data = b.data[size_t(i)].data();
            size_t size = kBytes;
            int tag = 0;
            void* req = nullptr;
            PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &req, 10, false, &b.mhs[size_t(i)]) ==
                           abi::kSuccess,
                       "irecv");
          }
          PEER_CHECK(peer.sendLine("posted"), "peer");
          PEER_CHECK(ep.net()->closeRecv(comm) == abi::kSuccess, "closeRecv with receives posted");
        }
        PEER_CHECK(peer.sendLine("closed"), "peer");
        PEER_CHECK(peer.expect("again", 60000), "sender");
        return receiveOnce(ep, peer);
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        {
          Buffers b(ep, comm, kSends, kBytes);
          PEER_CHECK(peer.expect("posted", 30000), "receiver");
          // Keep posting and testing for a while after the receiver closed, as a proxy that has
          // not noticed yet would: every call succeeds or reports through test().
          std::vector<void*> reqs(kSends, nullptr);
          int rc = passUntilPeerClosed(peer, "receiver", [&](bool*) {
            for (int i = 0; i < kSends; ++i) {
              if (reqs[size_t(i)] == nullptr) {
                abi::Result r = ep.net()->isend(comm, b.data[size_t(i)].data(), kBytes, 0,
                                                b.mhs[size_t(i)], nullptr, &reqs[size_t(i)]);
                PEER_CHECK(r == abi::kSuccess, "isend %d with the receiver gone: error %d", i,
                           int(r));
                continue;
              }
              int done = 0;
              abi::Result r = ep.net()->test(reqs[size_t(i)], &done, nullptr);
              // Done or failed, the request is NCCL's to forget; the slot posts again.
              if (done || r != abi::kSuccess) reqs[size_t(i)] = nullptr;
            }
            return 0;
          });
          if (rc != 0) return rc;
          PEER_CHECK(ep.net()->closeSend(comm) == abi::kSuccess, "closeSend with sends in flight");
        }
        PEER_CHECK(peer.sendLine("again"), "peer");
        return sendOnce(ep, peer);
      });
}

PairOutcome senderClosesWhileReceiving(const PairOptions& options) {
  constexpr int kRecvs = 8;
  constexpr size_t kBytes = 1 << 20;
  return runPair(
      options,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        {
          Buffers b(ep, comm, kRecvs, kBytes);
          std::vector<void*> reqs(kRecvs, nullptr);
          int rc = passUntilPeerClosed(peer, "sender", [&](bool* stop) {
            for (int i = 0; i < kRecvs; ++i) {
              if (reqs[size_t(i)] == nullptr) {
                void* data = b.data[size_t(i)].data();
                size_t size = kBytes;
                int tag = 0;
                void* mh = b.mhs[size_t(i)];
                abi::Result r =
                    ep.net()->irecv(comm, 1, &data, &size, &tag, &mh, nullptr, &reqs[size_t(i)]);
                PEER_CHECK(r == abi::kSuccess, "irecv %d with the sender gone: error %d", i,
                           int(r));
                continue;
              }
              int done = 0;
              int sizes[abi::kProxyMaxSubs] = {};
              abi::Result r = ep.net()->test(reqs[size_t(i)], &done, sizes);
              if (done) {
                PEER_CHECK(sizes[0] == int(kBytes) &&
                               checkPattern(b.data[size_t(i)].data(), kBytes, 5) < 0,
                           "a receive completed with wrong data");
              }
              // A failed receive is the end of this comm for NCCL: stop posting on it.
              if (r != abi::kSuccess) *stop = true;
              if (done) reqs[size_t(i)] = nullptr;
            }
            return 0;
          });
          if (rc != 0) return rc;
          PEER_CHECK(ep.net()->closeRecv(comm) == abi::kSuccess,
                     "closeRecv with receives in flight");
        }
        PEER_CHECK(peer.sendLine("again"), "peer");
        return receiveOnce(ep, peer);
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        {
          Buffers b(ep, comm, 3, kBytes);
          for (int i = 0; i < 3; ++i) {
            fillPattern(b.data[size_t(i)].data(), kBytes, 5);
            void* req = nullptr;
            PEER_CHECK(ep.isend(comm, b.data[size_t(i)].data(), kBytes, 0, &req, 10,
                                b.mhs[size_t(i)]) == abi::kSuccess,
                       "isend");
          }
          // Closed at once, the sends possibly still in flight.
          PEER_CHECK(ep.net()->closeSend(comm) == abi::kSuccess, "closeSend with sends in flight");
        }
        PEER_CHECK(peer.sendLine("closed"), "peer");
        PEER_CHECK(peer.expect("again", 60000), "receiver");
        return sendOnce(ep, peer);
      });
}

}  // namespace autopilot::test

// NCCL's net semantics through the real .so: several concurrent comms and tags, multi-receive
// (n > 1) with tag-selected buffers, the optional-completion preset, a send larger than the
// posted buffer, closing with requests in flight, device properties and virtual devices.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "bench/net/pair.h"
#include "common/host/log_capture.h"

using namespace autopilot;
using namespace autopilot::bench;

TEST_CASE("concurrent comms with distinct tags, interleaved", "[net][tcp]") {
  constexpr int kComms = 4;
  constexpr int kRounds = 5;
  constexpr int kPerRound = 8;  // per comm, within NCCL's 32 outstanding requests
  auto sizeOf = [](int round, int m, int c) {
    return size_t(1000 + (round * kPerRound + m) * 3000 + c);
  };
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(2)}};
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comms[kComms];
        for (auto& c : comms) {
          if (int rc = listenAndAccept(ep, peer, &c)) return rc;
        }
        for (int round = 0; round < kRounds; ++round) {
          std::vector<std::vector<uint8_t>> bufs;
          std::vector<void*> reqs;
          // Receives posted interleaved over the comms, completed all together.
          for (int m = 0; m < kPerRound; ++m) {
            for (int c = kComms - 1; c >= 0; --c) {
              bufs.emplace_back(sizeOf(round, m, c), 0);
              void* data = bufs.back().data();
              size_t size = bufs.back().size();
              int tag = 100 + c;
              void* req = nullptr;
              PEER_CHECK(ep.irecv(comms[c], 1, &data, &size, &tag, &req) == abi::kSuccess, "irecv");
              reqs.push_back(req);
            }
          }
          std::vector<int> sizes;
          PEER_CHECK(waitAll(ep, reqs, &sizes, 60) == abi::kSuccess, "round %d", round);
          for (size_t i = 0; i < reqs.size(); ++i) {
            PEER_CHECK(size_t(sizes[i]) == bufs[i].size(), "size of %zu", i);
            PEER_CHECK(checkPattern(bufs[i].data(), bufs[i].size(), bufs[i].size()) < 0, "data %zu",
                       i);
          }
        }
        PEER_CHECK(peer.expect("done", 30000), "sender");
        for (auto* c : comms) ep.net()->closeRecv(c);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comms[kComms];
        for (auto& c : comms) {
          if (int rc = receiveHandleAndConnect(ep, peer, &c)) return rc;
        }
        for (int round = 0; round < kRounds; ++round) {
          std::vector<std::vector<uint8_t>> bufs;
          std::vector<void*> reqs;
          for (int m = 0; m < kPerRound; ++m) {
            for (int c = 0; c < kComms; ++c) {
              size_t n = sizeOf(round, m, c);
              bufs.emplace_back(n);
              fillPattern(bufs.back().data(), n, n);
              void* req = nullptr;
              PEER_CHECK(ep.isend(comms[c], bufs.back().data(), n, 100 + c, &req) == abi::kSuccess,
                         "isend");
              reqs.push_back(req);
            }
          }
          PEER_CHECK(waitAll(ep, reqs, nullptr, 60) == abi::kSuccess, "round %d", round);
        }
        peer.sendLine("done");
        for (auto* c : comms) ep.net()->closeSend(c);
        return 0;
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE("multi-receive: one request, n buffers picked by the sends' tags", "[net][tcp]") {
  PairOutcome out = multiReceive(tcpPair(2), 5);
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE("the optional-completion preset is overwritten and the data still arrives",
          "[net][tcp]") {
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(1)}};
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        for (int i = 0; i < 20; ++i) {
          std::vector<uint8_t> buf(4096, 0);
          void* data = buf.data();
          size_t size = buf.size();
          int tag = 0;
          void* req = nullptr;
          PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &req, 10, true) == abi::kSuccess,
                     "irecv");
          PEER_CHECK(req != reinterpret_cast<void*>(abi::kNetOptionalRecvCompletion),
                     "the 0x1 preset was left in *request");
          int sizes[abi::kProxyMaxSubs] = {};
          PEER_CHECK(ep.wait(req, sizes, 30) == abi::kSuccess, "wait");
          PEER_CHECK(sizes[0] == 1000 + i, "size %d", sizes[0]);
          PEER_CHECK(checkPattern(buf.data(), size_t(sizes[0]), uint64_t(i)) < 0, "data");
        }
        ep.net()->closeRecv(comm);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        for (int i = 0; i < 20; ++i) {
          std::vector<uint8_t> buf(size_t(1000 + i));
          fillPattern(buf.data(), buf.size(), uint64_t(i));
          void* req = nullptr;
          PEER_CHECK(ep.isend(comm, buf.data(), buf.size(), 0, &req) == abi::kSuccess, "isend");
          PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "send");
        }
        ep.net()->closeSend(comm);
        return 0;
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE("a send larger than the posted buffer is an error, not a crash", "[net][tcp]") {
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(1)}};
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(100);
        void* data = buf.data();
        size_t size = buf.size();
        int tag = 0;
        void* req = nullptr;
        PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &req) == abi::kSuccess, "irecv");
        PEER_CHECK(peer.expect("done", 30000), "sender");
        ep.net()->closeRecv(comm);  // with the receive still in flight
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(200);
        void* req = nullptr;
        PEER_CHECK(ep.isend(comm, buf.data(), buf.size(), 0, &req) == abi::kSuccess, "isend");
        abi::Result r = ep.wait(req, nullptr, 10);
        PEER_CHECK(r == abi::kInvalidUsage, "expected ncclInvalidUsage, got %d", int(r));
        peer.sendLine("done");
        ep.net()->closeSend(comm);
        return 0;
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE("closing with requests in flight is clean, and the process keeps working", "[net][tcp]") {
  PairOutcome out = closeWithRequestsInFlight(tcpPair(2));
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE("device properties, rail grouping and virtual devices", "[net][tcp]") {
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(4)},
           {"NCCL_AUTOPILOT_NET_GROUPS", "per-rail"}};
  // One process is enough; runPair's sender side only exits.
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel&, Channel&) {
        host::HostNet* net = ep.net();
        PEER_CHECK(ep.devices() == 4, "%d devices", ep.devices());
        std::set<std::string> names;
        for (int d = 0; d < 4; ++d) {
          abi::NetPropertiesV11 p{};
          PEER_CHECK(net->getProperties(d, &p) == abi::kSuccess, "getProperties %d", d);
          PEER_CHECK(p.name && names.insert(p.name).second, "unique name");
          PEER_CHECK(p.ptrSupport == abi::kPtrHost, "ptrSupport");
          PEER_CHECK(p.maxRecvs == 8 && p.maxComms > 0 && p.speed > 0, "limits");
          PEER_CHECK(p.vProps.ndevs == 1 && p.vProps.devs[0] == d, "vProps");
          PEER_CHECK(p.netDeviceType == abi::kNetDeviceHost, "host device");
          PEER_CHECK(p.maxP2pBytes > 0 && p.maxP2pBytes <= abi::kMaxNetSizeBytes, "maxP2pBytes");
        }
        abi::NetVDevicePropsV11 v{2, {1, 3, 0, 0}};
        int vd = -1;
        PEER_CHECK(net->makeVDevice(&vd, &v) == abi::kSuccess && vd == 4, "makeVDevice -> %d", vd);
        int ndev = 0;
        PEER_CHECK(net->devices(&ndev) == abi::kSuccess && ndev == 5, "devices after merge: %d",
                   ndev);
        abi::NetPropertiesV11 p{};
        PEER_CHECK(net->getProperties(4, &p) == abi::kSuccess, "virtual properties");
        PEER_CHECK(p.vProps.ndevs == 2 && p.vProps.devs[0] == 1 && p.vProps.devs[1] == 3,
                   "children");
        PEER_CHECK(names.count(p.name) == 0, "virtual name is new: %s", p.name);
        abi::NetPropertiesV11 c{};
        net->getProperties(1, &c);
        PEER_CHECK(p.speed == 2 * c.speed, "aggregate speed %d vs %d", p.speed, c.speed);
        abi::NetVDevicePropsV11 bad{2, {1, 9, 0, 0}};
        PEER_CHECK(net->makeVDevice(&vd, &bad) != abi::kSuccess, "bad merge accepted");
        // Memory registration: host yes, GPU no.
        uint8_t handle[abi::kNetHandleMaxSize];
        void* lc = nullptr;
        PEER_CHECK(ep.listen(4, handle, &lc) == abi::kSuccess, "listen on the virtual device");
        net->closeListen(lc);
        return 0;
      },
      [&](NetEndpoint&, Channel&, Channel&) { return 0; });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

#include "bench/net/pair.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/host/log_capture.h"

namespace autopilot::bench {

namespace {
void applyEnv(const std::vector<std::pair<std::string, std::string>>& env) {
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
}
}  // namespace

std::string loopbackRails(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i)
    s += (i > 1 ? "," : "") + std::string("127.0.0.") + std::to_string(i);
  return s;
}

PairOptions tcpPair(int rails) {
  PairOptions o;
  o.env = {{"NCCL_AUTOPILOT_TRANSPORT", "tcp"}, {"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(rails)}};
  return o;
}

std::string verbsRail(bool receiver, int rail) {
  return "rxe" + std::to_string(2 * rail + (receiver ? 1 : 0)) + ":1";
}

PairOptions verbsPair(int rails) {
  PairOptions o;
  // Soft-RoCE under emulation acknowledges packets tens of milliseconds late when busy: the
  // NICs' retransmission timeout is raised from 67 ms (14) to 268 ms (16) so that they do not
  // resend (go-back-N) data that did arrive, which collapses throughput.
  o.env = {{"NCCL_AUTOPILOT_TRANSPORT", "ib"},
           {"NCCL_AUTOPILOT_NET_ADDRS", "127.0.0.1"},
           {"NCCL_AUTOPILOT_IB_TIMEOUT", "16"},
           {"AUTOPILOT_HARNESS_YIELD", "1"}};
  std::string receiver, sender;
  for (int r = 0; r < rails; ++r) {
    receiver += (r ? "," : "=") + verbsRail(true, r);
    sender += (r ? "," : "=") + verbsRail(false, r);
  }
  o.receiverEnv = {{"NCCL_AUTOPILOT_IB_HCA", receiver}};
  o.senderEnv = {{"NCCL_AUTOPILOT_IB_HCA", sender}};
  return o;
}

PairOutcome runPair(const PairOptions& options, const Side& receiver, const Side& sender,
                    const Conductor& conductor) {
  Channel peerR, peerS, parentR, childR, parentS, childS;
  channelPair(&peerR, &peerS);
  channelPair(&parentR, &childR);
  channelPair(&parentS, &childS);
  auto child = [&](bool isReceiver) {
    return [&, isReceiver]() -> int {
      // Keep only this child's ends.
      (isReceiver ? peerS : peerR).close();
      parentR.close();
      parentS.close();
      (isReceiver ? childS : childR).close();
      applyEnv(options.env);
      applyEnv(isReceiver ? options.receiverEnv : options.senderEnv);
      const auto& setup = isReceiver ? options.receiverSetup : options.senderSetup;
      if (setup) setup();
      host::LogCapture::configureEchoFromEnv();
      NetEndpoint ep(options.maxNetVersion);
      if (!ep.ok()) {
        std::fprintf(stderr, "[%d] %s: %s\n", int(getpid()), isReceiver ? "receiver" : "sender",
                     ep.error().c_str());
        return 2;
      }
      return isReceiver ? receiver(ep, peerR, childR) : sender(ep, peerS, childS);
    };
  };
  pid_t r = spawn(child(true));
  pid_t s = spawn(child(false));
  peerR.close();
  peerS.close();
  childR.close();
  childS.close();
  if (conductor) conductor(parentR, parentS);
  PairOutcome out;
  out.receiver = waitChild(r, options.timeoutMs);
  out.sender = waitChild(s, options.timeoutMs);
  return out;
}

int listenAndAccept(NetEndpoint& ep, Channel& peer, void** recvComm, int dev) {
  uint8_t handle[abi::kNetHandleMaxSize];
  void* listenComm = nullptr;
  PEER_CHECK(ep.listen(dev, handle, &listenComm) == abi::kSuccess && listenComm, "listen");
  PEER_CHECK(peer.send(handle, sizeof(handle)), "handle not sent");
  abi::Result r = ep.accept(listenComm, recvComm, 30);
  ep.net()->closeListen(listenComm);
  PEER_CHECK(r == abi::kSuccess && *recvComm, "accept: %d %s", int(r), ep.error().c_str());
  return 0;
}

int receiveHandleAndConnect(NetEndpoint& ep, Channel& peer, void** sendComm, int dev) {
  uint8_t handle[abi::kNetHandleMaxSize];
  PEER_CHECK(peer.recv(handle, sizeof(handle), 30000), "no handle from the receiver");
  abi::Result r = ep.connect(dev, handle, sendComm, 30);
  PEER_CHECK(r == abi::kSuccess && *sendComm, "connect: %d %s", int(r), ep.error().c_str());
  return 0;
}

}  // namespace autopilot::bench

namespace autopilot::bench {

int streamReceive(NetEndpoint& ep, void* comm, Channel& peer, size_t messageBytes, int depth,
                  StreamResult* out, Verify verify, Channel* marks) {
  constexpr uint8_t kPoison = 0xa5;
  const uint64_t ring = uint64_t(depth) * (verify == Verify::kIdle ? 4 : 1);
  std::vector<std::vector<uint8_t>> bufs(ring);
  std::vector<void*> mhs(ring, nullptr);
  for (size_t i = 0; i < bufs.size(); ++i) {
    bufs[i].assign(messageBytes, kPoison);
    mhs[i] = ep.registerMemory(comm, bufs[i].data(), messageBytes);
    PEER_CHECK(messageBytes == 0 || mhs[i], "regMr of %zu bytes", messageBytes);
  }
  std::vector<void*> reqs(ring, nullptr);
  uint64_t posted = 0, done = 0, expected = UINT64_MAX;
  double start = nowSeconds(), last = start, mark = -1;
  while (done < expected) {
    while (posted < done + uint64_t(depth)) {
      size_t slot = size_t(posted % ring);
      if (verify == Verify::kIdle) {
        const uint8_t* b = bufs[slot].data();
        bool untouched =
            messageBytes == 0 || (b[0] == kPoison && std::memcmp(b, b + 1, messageBytes - 1) == 0);
        if (!untouched) {
          out->overwritten++;
          std::memset(bufs[slot].data(), kPoison, messageBytes);
        }
      }
      void* data = bufs[slot].data();
      size_t size = messageBytes;
      int tag = 0;
      PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &reqs[slot], 10, false, &mhs[slot]) ==
                     abi::kSuccess,
                 "irecv");
      ++posted;
    }
    if (marks != nullptr && marks->readable()) {
      std::string line;
      if (marks->recvLine(&line, 1000) && line == "mark") {
        mark = nowSeconds();
        out->markToFirstCompletionSec = -1;
        out->maxGapAfterMarkSec = 0;
      }
    }
    if (expected == UINT64_MAX && peer.readable()) {
      std::string line;
      PEER_CHECK(peer.recvLine(&line, 1000), "count");
      expected = std::stoull(line);
      if (done >= expected) break;
    }
    size_t slot = size_t(done % ring);
    int doneFlag = 0;
    int sizes[abi::kProxyMaxSubs] = {};
    abi::Result r = ep.test(reqs[slot], &doneFlag, sizes);
    PEER_CHECK(r == abi::kSuccess, "message %llu: error %d", (unsigned long long)done, int(r));
    PEER_CHECK(nowSeconds() - last < 30, "no completion for 30 s");
    if (!doneFlag) continue;
    double now = nowSeconds();
    out->maxGapSec = std::max(out->maxGapSec, now - last);
    if (mark >= 0) {
      if (out->markToFirstCompletionSec < 0) out->markToFirstCompletionSec = now - mark;
      out->maxGapAfterMarkSec = std::max(out->maxGapAfterMarkSec, now - std::max(last, mark));
    }
    last = now;
    bool intact = verify != Verify::kSampled
                      ? checkPattern(bufs[slot].data(), messageBytes, done) < 0
                      : checkStamps(bufs[slot].data(), messageBytes, done);
    if (size_t(sizes[0]) != messageBytes || !intact) out->corrupt++;
    // Poison before reuse: a chunk that does not land next time (or a stale one) would show.
    if (verify == Verify::kIdle) {
      std::memset(bufs[slot].data(), kPoison, messageBytes);
    } else if (verify == Verify::kFull) {
      std::memset(bufs[slot].data(), kPoison, std::min<size_t>(messageBytes, 64));
    } else {
      poisonStamps(bufs[slot].data(), messageBytes);
    }
    ++done;
  }
  out->messages = done;
  out->bytes = done * messageBytes;
  out->seconds = last - start;
  for (size_t i = 0; i < mhs.size(); ++i) ep.deregisterMemory(comm, mhs[i]);
  return 0;
}

int streamSend(NetEndpoint& ep, void* comm, Channel& peer, Channel& parent, size_t messageBytes,
               int depth, Verify verify) {
  std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(depth));
  std::vector<void*> mhs(static_cast<size_t>(depth), nullptr);
  for (size_t i = 0; i < bufs.size(); ++i) {
    bufs[i].resize(messageBytes);
    mhs[i] = ep.registerMemory(comm, bufs[i].data(), messageBytes);
    PEER_CHECK(messageBytes == 0 || mhs[i], "regMr of %zu bytes", messageBytes);
  }
  std::vector<void*> reqs(static_cast<size_t>(depth), nullptr);
  uint64_t posted = 0, done = 0;
  bool stopping = false;
  double lastDone = nowSeconds();
  while (!stopping || done < posted) {
    if (!stopping && parent.readable()) {
      std::string line;
      stopping = !parent.recvLine(&line, 1000) || line == "stop";
    }
    while (!stopping && posted < done + uint64_t(depth)) {
      size_t slot = size_t(posted % uint64_t(depth));
      if (verify != Verify::kSampled) {
        fillPattern(bufs[slot].data(), messageBytes, posted);
      } else {
        stampWords(bufs[slot].data(), messageBytes, posted);
      }
      PEER_CHECK(ep.isend(comm, bufs[slot].data(), messageBytes, 0, &reqs[slot], 10, mhs[slot]) ==
                     abi::kSuccess,
                 "isend");
      ++posted;
    }
    if (done == posted) continue;
    int doneFlag = 0;
    abi::Result r = ep.test(reqs[size_t(done % uint64_t(depth))], &doneFlag, nullptr);
    PEER_CHECK(r == abi::kSuccess, "send %llu: error %d", (unsigned long long)done, int(r));
    PEER_CHECK(nowSeconds() - lastDone < 30, "no send completion for 30 s");
    if (doneFlag) {
      ++done;
      lastDone = nowSeconds();
    }
  }
  PEER_CHECK(peer.sendLine(std::to_string(posted)), "count");
  for (size_t i = 0; i < mhs.size(); ++i) ep.deregisterMemory(comm, mhs[i]);
  return 0;
}

StreamRun runStream(const PairOptions& options, size_t messageBytes, int depth, Verify verify,
                    const std::function<void(const std::function<void()>& mark)>& script,
                    bool collectLogs) {
  StreamRun run;
  Channel results[2], sendLogs[2], recvLogs[2];
  channelPair(&results[0], &results[1]);
  channelPair(&sendLogs[0], &sendLogs[1]);
  channelPair(&recvLogs[0], &recvLogs[1]);
  auto logLines = [](const char* role) {
    std::string lines;
    for (const auto& rec : host::LogCapture::records()) {
      if (rec.message.find(role) != std::string::npos) lines += rec.message + "\n";
    }
    // The parent reads it only after this process exits: it must fit the socket's buffer
    // (about 200 KiB), so a long log keeps its beginning and its end.
    constexpr size_t kKeep = 64 << 10;
    if (lines.size() > 2 * kKeep) {
      lines = lines.substr(0, kKeep) + "[... log cut ...]\n" + lines.substr(lines.size() - kKeep);
    }
    return lines;
  };
  run.outcome = runPair(
      options,
      [&](NetEndpoint& ep, Channel& peer, Channel& parent) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        PEER_CHECK(parent.sendLine("connected"), "parent");
        StreamResult r;
        int rc = streamReceive(ep, comm, peer, messageBytes, depth, &r, verify, &parent);
        if (rc == 0) {
          results[1].send(&r, sizeof(r));
          ep.net()->closeRecv(comm);
        }
        // The log comes back from a failed run too: that is when it is needed.
        if (collectLogs) recvLogs[1].sendLine(logLines("recv"));
        return rc;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel& parent) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        int rc = streamSend(ep, comm, peer, parent, messageBytes, depth, verify);
        if (rc == 0) ep.net()->closeSend(comm);
        if (collectLogs) sendLogs[1].sendLine(logLines("send"));
        return rc;
      },
      [&](Channel& toReceiver, Channel& toSender) {
        if (!toReceiver.expect("connected", 30000)) return;
        script([&] { toReceiver.sendLine("mark"); });
        toSender.sendLine("stop");
      });
  run.ok = run.outcome.receiver == 0 && run.outcome.sender == 0 &&
           results[0].recv(&run.result, sizeof(run.result), 10000);
  if (collectLogs) {
    sendLogs[0].recvLine(&run.senderLog, 10000);
    recvLogs[0].recvLine(&run.receiverLog, 10000);
  }
  return run;
}

abi::Result waitAll(NetEndpoint& ep, const std::vector<void*>& reqs, std::vector<int>* sizes,
                    double timeoutSec) {
  std::vector<bool> done(reqs.size(), false);
  if (sizes) sizes->assign(reqs.size(), -1);
  size_t left = reqs.size();
  double deadline = nowSeconds() + timeoutSec;
  while (left > 0) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (done[i]) continue;
      int flag = 0;
      int got[abi::kProxyMaxSubs] = {};
      abi::Result r = ep.test(reqs[i], &flag, got);
      if (r != abi::kSuccess) return r;
      if (flag) {
        done[i] = true;
        --left;
        if (sizes) (*sizes)[i] = got[0];
      }
    }
    if (nowSeconds() > deadline) return abi::kInternalError;
  }
  return abi::kSuccess;
}

std::vector<Message> sizeSweep(size_t maxSize) {
  std::vector<Message> m;
  for (size_t s : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(4095), size_t(32767),
                   size_t(32768), size_t(65536), size_t(131071), size_t(131072),
                   size_t(1 << 20) + 3, size_t(4 << 20), size_t(16 << 20) - 1, size_t(64 << 20)}) {
    if (s <= maxSize) m.push_back({s, s + (s % 3 == 0 ? 0 : 4096)});
  }
  return m;
}

int receiveMessages(NetEndpoint& ep, void* comm, const std::vector<Message>& msgs, int depth,
                    bool flush) {
  size_t n = msgs.size();
  std::vector<std::vector<uint8_t>> bufs(n);
  std::vector<void*> reqs(n, nullptr), mhs(n, nullptr);
  size_t posted = 0, done = 0;
  while (done < n) {
    while (posted < n && posted - done < size_t(depth)) {
      bufs[posted].assign(msgs[posted].capacity, 0xee);
      void* data = bufs[posted].data();
      size_t size = msgs[posted].capacity;
      int tag = 1;
      mhs[posted] = ep.registerMemory(comm, data, size);
      PEER_CHECK(size == 0 || mhs[posted], "regMr of %zu bytes", size);
      PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &reqs[posted], 10, false, &mhs[posted]) ==
                     abi::kSuccess,
                 "irecv");
      ++posted;
    }
    int sizes[abi::kProxyMaxSubs] = {};
    abi::Result r = ep.wait(reqs[done], sizes, 60);
    PEER_CHECK(r == abi::kSuccess, "message %zu: %d %s", done, int(r), ep.error().c_str());
    PEER_CHECK(size_t(sizes[0]) == msgs[done].size, "message %zu: size %d, expected %zu", done,
               sizes[0], msgs[done].size);
    if (flush && sizes[0] > 0) {
      void* data = bufs[done].data();
      void* req = nullptr;
      PEER_CHECK(ep.net()->iflush(comm, 1, &data, &sizes[0], &mhs[done], &req) == abi::kSuccess &&
                     req != nullptr,
                 "iflush of message %zu", done);
      PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "flush of message %zu", done);
    }
    int64_t bad = checkPattern(bufs[done].data(), msgs[done].size, 1000 + done);
    PEER_CHECK(bad < 0, "message %zu (%zu bytes): wrong byte at %lld", done, msgs[done].size,
               (long long)bad);
    ep.deregisterMemory(comm, mhs[done]);
    bufs[done].clear();
    bufs[done].shrink_to_fit();
    ++done;
  }
  return 0;
}

int sendMessages(NetEndpoint& ep, void* comm, const std::vector<Message>& msgs, int depth) {
  size_t n = msgs.size();
  std::vector<std::vector<uint8_t>> bufs(n);
  std::vector<void*> reqs(n, nullptr), mhs(n, nullptr);
  size_t posted = 0, done = 0;
  while (done < n) {
    while (posted < n && posted - done < size_t(depth)) {
      bufs[posted].resize(msgs[posted].size);
      fillPattern(bufs[posted].data(), msgs[posted].size, 1000 + posted);
      mhs[posted] = ep.registerMemory(comm, bufs[posted].data(), msgs[posted].size);
      PEER_CHECK(msgs[posted].size == 0 || mhs[posted], "regMr of %zu bytes", msgs[posted].size);
      PEER_CHECK(ep.isend(comm, bufs[posted].data(), msgs[posted].size, 1, &reqs[posted], 10,
                          mhs[posted]) == abi::kSuccess,
                 "isend");
      ++posted;
    }
    int size = -1;
    abi::Result r = ep.wait(reqs[done], &size, 60);
    PEER_CHECK(r == abi::kSuccess, "send %zu: %d %s", done, int(r), ep.error().c_str());
    ep.deregisterMemory(comm, mhs[done]);
    bufs[done].clear();
    bufs[done].shrink_to_fit();
    ++done;
  }
  return 0;
}

PairOutcome transferMessages(const PairOptions& options, const std::vector<Message>& msgs,
                             int depth) {
  return runPair(
      options,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        int rc = receiveMessages(ep, comm, msgs, depth);
        PEER_CHECK(peer.expect("sender done", 30000), "sender did not finish");
        ep.net()->closeRecv(comm);
        return rc;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        int rc = sendMessages(ep, comm, msgs, depth);
        peer.sendLine("sender done");
        ep.net()->closeSend(comm);
        return rc;
      });
}

PairOutcome multiReceive(const PairOptions& options, int rounds) {
  constexpr int kN = 8;
  static const size_t sizes[kN] = {0, 1, 4096, 100000, 300000, 1 << 20, 7, 3 << 20};
  return runPair(
      options,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        for (int round = 0; round < rounds; ++round) {
          std::vector<std::vector<uint8_t>> bufs(kN);
          void* data[kN];
          void* mhs[kN];
          size_t caps[kN];
          int tags[kN];
          for (int i = 0; i < kN; ++i) {
            bufs[size_t(i)].assign(sizes[i] + 64, 0);
            data[i] = bufs[size_t(i)].data();
            caps[i] = bufs[size_t(i)].size();
            tags[i] = 10 + i;
            mhs[i] = ep.registerMemory(comm, data[i], caps[i]);
          }
          void* req = nullptr;
          PEER_CHECK(ep.irecv(comm, kN, data, caps, tags, &req, 10, false, mhs) == abi::kSuccess,
                     "irecv n=8");
          int got[abi::kProxyMaxSubs] = {};
          PEER_CHECK(ep.wait(req, got, 30) == abi::kSuccess, "wait");
          for (int i = 0; i < kN; ++i) {
            PEER_CHECK(size_t(got[i]) == sizes[i], "round %d buffer %d: %d bytes", round, i,
                       got[i]);
            PEER_CHECK(
                checkPattern(bufs[size_t(i)].data(), sizes[i], uint64_t(round * 100 + i)) < 0,
                "round %d buffer %d data", round, i);
            ep.deregisterMemory(comm, mhs[i]);
          }
        }
        PEER_CHECK(peer.expect("done", 30000), "sender");
        ep.net()->closeRecv(comm);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        for (int round = 0; round < rounds; ++round) {
          std::vector<std::vector<uint8_t>> bufs(kN);
          std::vector<void*> reqs(kN), mhs(kN);
          // Sends in an order different from the buffer order: the tag picks the buffer.
          for (int k = 0; k < kN; ++k) {
            int i = (k * 3 + round) % kN;
            bufs[size_t(i)].resize(sizes[i]);
            fillPattern(bufs[size_t(i)].data(), sizes[i], uint64_t(round * 100 + i));
            mhs[size_t(i)] = ep.registerMemory(comm, bufs[size_t(i)].data(), sizes[i]);
            PEER_CHECK(ep.isend(comm, bufs[size_t(i)].data(), sizes[i], 10 + i, &reqs[size_t(i)],
                                10, mhs[size_t(i)]) == abi::kSuccess,
                       "isend");
          }
          for (int i = 0; i < kN; ++i) {
            PEER_CHECK(ep.wait(reqs[size_t(i)], nullptr, 30) == abi::kSuccess, "send %d", i);
            ep.deregisterMemory(comm, mhs[size_t(i)]);
          }
        }
        peer.sendLine("done");
        ep.net()->closeSend(comm);
        return 0;
      });
}

PairOutcome closeWithRequestsInFlight(const PairOptions& options) {
  constexpr int kInFlight = 16;
  constexpr size_t kBytes = 4 << 20;
  return runPair(
      options,
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        for (int round = 0; round < 3; ++round) {
          void* comm = nullptr;
          if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
          std::vector<std::vector<uint8_t>> bufs(kInFlight, std::vector<uint8_t>(kBytes));
          std::vector<void*> reqs(kInFlight), mhs(kInFlight);
          for (int i = 0; i < kInFlight; ++i) {
            void* data = bufs[size_t(i)].data();
            size_t size = kBytes;
            int tag = 0;
            mhs[size_t(i)] = ep.registerMemory(comm, data, size);
            PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &reqs[size_t(i)], 10, false,
                                &mhs[size_t(i)]) == abi::kSuccess,
                       "irecv");
          }
          // Complete one, then close with 15 in flight.
          PEER_CHECK(ep.wait(reqs[0], nullptr, 30) == abi::kSuccess, "first receive");
          PEER_CHECK(peer.sendLine("closing"), "peer");
          PEER_CHECK(ep.net()->closeRecv(comm) == abi::kSuccess, "closeRecv");
          for (void* mh : mhs) ep.deregisterMemory(comm, mh);
          PEER_CHECK(peer.expect("closed", 30000), "peer");
        }
        // Afterwards a fresh connection works normally.
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(1 << 20);
        void* data = buf.data();
        size_t size = buf.size();
        int tag = 0;
        void* req = nullptr;
        void* mh = ep.registerMemory(comm, data, size);
        PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &req, 10, false, &mh) == abi::kSuccess,
                   "irecv");
        PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "last receive");
        PEER_CHECK(checkPattern(buf.data(), buf.size(), 77) < 0, "data");
        ep.deregisterMemory(comm, mh);
        ep.net()->closeRecv(comm);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        for (int round = 0; round < 3; ++round) {
          void* comm = nullptr;
          if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
          std::vector<std::vector<uint8_t>> bufs(kInFlight, std::vector<uint8_t>(kBytes, 1));
          std::vector<void*> reqs(kInFlight), mhs(kInFlight);
          for (int i = 0; i < kInFlight; ++i) {
            mhs[size_t(i)] = ep.registerMemory(comm, bufs[size_t(i)].data(), kBytes);
            PEER_CHECK(ep.isend(comm, bufs[size_t(i)].data(), kBytes, 0, &reqs[size_t(i)], 10,
                                mhs[size_t(i)]) == abi::kSuccess,
                       "isend");
          }
          // Keep driving progress (as NCCL's proxy does) until the receiver closes; then close
          // with sends still unacknowledged.
          double deadline = nowSeconds() + 30;
          while (!peer.readable() && nowSeconds() < deadline) {
            int done = 0;
            ep.test(reqs[kInFlight - 1], &done, nullptr);
          }
          PEER_CHECK(peer.expect("closing", 1000), "peer");
          PEER_CHECK(ep.net()->closeSend(comm) == abi::kSuccess, "closeSend");
          for (void* mh : mhs) ep.deregisterMemory(comm, mh);
          peer.sendLine("closed");
        }
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(1 << 20);
        fillPattern(buf.data(), buf.size(), 77);
        void* req = nullptr;
        void* mh = ep.registerMemory(comm, buf.data(), buf.size());
        PEER_CHECK(ep.isend(comm, buf.data(), buf.size(), 0, &req, 10, mh) == abi::kSuccess,
                   "isend");
        PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "last send");
        ep.deregisterMemory(comm, mh);
        ep.net()->closeSend(comm);
        return 0;
      });
}

bool railLine(const std::string& log, const std::string& role, int index, const std::string& name,
              const std::string& transition) {
  std::string prefix = role + " rail " + std::to_string(index) + " (" + name + "): ";
  size_t at = 0;
  while ((at = log.find(prefix, at)) != std::string::npos) {
    size_t end = log.find('\n', at);
    if (log.substr(at, end - at).find(transition) != std::string::npos) return true;
    at = end;
  }
  return false;
}

namespace {
// The text of rail `rail`'s part of the last close summary in `log` ("" when absent).
std::string summaryPart(const std::string& log, int rail) {
  // The per-rail summary ("send closed: rail 0 ..."), not the ib transport's other lines at
  // close (fences, rejected writes).
  size_t at = log.rfind("send closed: rail ");
  if (at == std::string::npos) return "";
  size_t end = log.find('\n', at);
  std::string line = log.substr(at, end == std::string::npos ? std::string::npos : end - at);
  std::string key = " rail " + std::to_string(rail) + " ";
  size_t from = line.find(key);
  if (from == std::string::npos) return "";
  size_t to = line.find(';', from);
  return line.substr(from + key.size(),
                     to == std::string::npos ? std::string::npos : to - from - key.size());
}

double summaryBytes(const std::string& part) {
  // "<state> <number> <unit>, ..."
  size_t sp = part.find(' ');
  if (sp == std::string::npos) return -1;
  char* end = nullptr;
  double v = std::strtod(part.c_str() + sp + 1, &end);
  std::string unit(static_cast<const char*>(end));
  if (unit.rfind(" GiB", 0) == 0) return v * 1073741824.0;
  if (unit.rfind(" MiB", 0) == 0) return v * 1048576.0;
  if (unit.rfind(" KiB", 0) == 0) return v * 1024.0;
  return v;
}
}  // namespace

long summaryFailures(const std::string& log, int rail) {
  std::string part = summaryPart(log, rail);
  size_t f = part.find(" failure");
  if (f == std::string::npos) return -1;
  size_t num = part.rfind(' ', f - 1);
  return num == std::string::npos ? -1 : std::atol(part.c_str() + num + 1);
}

double summaryShare(const std::string& log, int rail, int rails) {
  double total = 0, mine = -1;
  for (int r = 0; r < rails; ++r) {
    double b = summaryBytes(summaryPart(log, r));
    if (b < 0) return -1;
    total += b;
    if (r == rail) mine = b;
  }
  return total > 0 ? mine / total : -1;
}

void writeFaultPlan(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  std::fputs(text.c_str(), f);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

// ---------------------------------------------------------------------------- watched stream

namespace {

// This process's established IPv4 TCP sockets and the kernel's byte counts (TCP_INFO).
uint32_t scanTcpSockets(SocketBytes* out, uint32_t max) {
  uint32_t n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  while (dirent* e = readdir(dir)) {
    if (n == max) break;
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
        local.sin_family != AF_INET) {
      continue;
    }
    int type = 0;
    socklen_t tlen = sizeof(type);
    if (getsockopt(int(fd), SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM)
      continue;
    tcp_info info{};
    socklen_t ilen = sizeof(info);
    if (getsockopt(int(fd), IPPROTO_TCP, TCP_INFO, &info, &ilen) != 0 ||
        info.tcpi_state != 1 /* TCP_ESTABLISHED */) {
      continue;
    }
    struct stat st {};
    if (fstat(int(fd), &st) != 0) continue;
    out[n].inode = uint64_t(st.st_ino);
    out[n].localAddr = local.sin_addr.s_addr;
    out[n].bytesAcked = info.tcpi_bytes_acked;
    out[n].bytesReceived = info.tcpi_bytes_received;
    ++n;
  }
  closedir(dir);
  return n;
}

long countInLog(const std::string& needle) {
  long seen = 0;
  size_t start = 0;
  while (start <= needle.size()) {
    size_t bar = needle.find('|', start);
    if (bar == std::string::npos) bar = needle.size();
    seen += long(host::LogCapture::count(-1, needle.substr(start, bar - start)));
    start = bar + 1;
  }
  return seen;
}

bool hasInOrder(const std::string& text, const std::vector<std::string>& parts) {
  size_t at = 0;
  for (const std::string& p : parts) {
    at = text.find(p, at);
    if (at == std::string::npos) return false;
    at += p.size();
  }
  return true;
}

std::string allLogLines() {
  std::string lines;
  for (const auto& rec : host::LogCapture::records()) lines += rec.message + "\n";
  return lines;
}

// Answers one request of the parent. Returns false on "end" (or a parent that is gone).
bool serveParent(Channel& parent, EndState& st) {
  std::string req;
  if (!parent.recvLine(&req, 1000)) return false;
  if (req == "state") {
    st.sockets = scanTcpSockets(st.socket, 16);
    parent.send(&st, sizeof(st));
    return true;
  }
  if (req.rfind("count ", 0) == 0) {
    int64_t n = countInLog(req.substr(6));
    parent.send(&n, sizeof(n));
    return true;
  }
  if (req.rfind("has\n", 0) == 0) {
    std::vector<std::string> parts;
    size_t at = 4;
    while (at <= req.size()) {
      size_t nl = req.find('\n', at);
      if (nl == std::string::npos) nl = req.size();
      parts.push_back(req.substr(at, nl - at));
      at = nl + 1;
    }
    int64_t found = 0;
    for (const auto& rec : host::LogCapture::records()) {
      if (hasInOrder(rec.message, parts)) {
        found = 1;
        break;
      }
    }
    parent.send(&found, sizeof(found));
    return true;
  }
  return false;  // "end"
}

// One end's loop: keep `depth` requests posted, test the oldest, answer the parent between calls.
// `idle` (optional): a second comm with the same peer, the other way round, that carries nothing;
// the sender keeps one receive posted on it and tests it on every pass.
int watchedEnd(NetEndpoint& ep, void* comm, Channel& parent, bool receiver, size_t messageBytes,
               int depth, void* idle) {
  std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(depth));
  std::vector<void*> mhs(static_cast<size_t>(depth), nullptr), reqs(static_cast<size_t>(depth));
  for (size_t i = 0; i < bufs.size(); ++i) {
    bufs[i].resize(messageBytes);
    mhs[i] = ep.registerMemory(comm, bufs[i].data(), messageBytes);
    PEER_CHECK(messageBytes == 0 || mhs[i], "regMr of %zu bytes", messageBytes);
  }
  EndState st;
  auto fail = [&](abi::Result r) {
    st.error = int32_t(r);
    st.errorAt = nowSeconds();
  };
  std::vector<uint8_t> idleBuf(4096);
  void* idleMh = nullptr;
  void* idleReq = nullptr;
  if (idle != nullptr && !receiver) {
    idleMh = ep.registerMemory(idle, idleBuf.data(), idleBuf.size());
    PEER_CHECK(idleMh, "regMr on the idle comm");
  }
  bool serving = true;
  while (serving) {
    if (parent.readable()) {
      serving = serveParent(parent, st);
      continue;
    }
    if (st.error != 0) {  // the comm is unusable: only the parent is served
      usleep(2000);
      continue;
    }
    if (idleMh != nullptr) {
      abi::Result r = abi::kSuccess;
      if (idleReq == nullptr) {
        void* data = idleBuf.data();
        size_t size = idleBuf.size();
        int tag = 0;
        r = ep.net()->irecv(idle, 1, &data, &size, &tag, &idleMh, nullptr, &idleReq);
      } else {
        int done = 0;
        int sizes[abi::kProxyMaxSubs] = {};
        r = ep.test(idleReq, &done, sizes);
        if (r == abi::kSuccess && done) {  // nothing was sent on it
          st.corrupt++;
          idleReq = nullptr;
        }
      }
      if (r != abi::kSuccess) {
        fail(r);
        continue;
      }
    }
    while (st.posted < st.completed + uint64_t(depth)) {
      size_t slot = size_t(st.posted % uint64_t(depth));
      void* req = nullptr;
      abi::Result r;
      if (receiver) {
        void* data = bufs[slot].data();
        size_t size = messageBytes;
        int tag = 0;
        r = ep.net()->irecv(comm, 1, &data, &size, &tag, &mhs[slot], nullptr, &req);
      } else {
        fillPattern(bufs[slot].data(), messageBytes, st.posted);
        r = ep.net()->isend(comm, bufs[slot].data(), messageBytes, 0, mhs[slot], nullptr, &req);
      }
      if (r != abi::kSuccess) {
        fail(r);
        break;
      }
      if (req == nullptr) break;  // not now: retried after the next test()
      reqs[slot] = req;
      ++st.posted;
    }
    if (st.error != 0 || st.posted == st.completed) continue;
    size_t slot = size_t(st.completed % uint64_t(depth));
    int done = 0;
    int sizes[abi::kProxyMaxSubs] = {};
    abi::Result r = ep.test(reqs[slot], &done, sizes);
    if (r != abi::kSuccess) {
      fail(r);
      continue;
    }
    if (!done) continue;
    if (receiver) {
      if (size_t(sizes[0]) != messageBytes ||
          checkPattern(bufs[slot].data(), messageBytes, st.completed) >= 0) {
        st.corrupt++;
      }
      std::memset(bufs[slot].data(), 0xa5, std::min<size_t>(messageBytes, 64));
    }
    st.lastCompletionAt = nowSeconds();
    ++st.completed;
  }
  // The end of the script: final counters, then the comm closes with whatever is in flight.
  st.sockets = scanTcpSockets(st.socket, 16);
  if (receiver) {
    ep.net()->closeRecv(comm);
    if (idle != nullptr) ep.net()->closeSend(idle);
  } else {
    ep.net()->closeSend(comm);
    if (idle != nullptr) ep.net()->closeRecv(idle);
  }
  PEER_CHECK(parent.send(&st, sizeof(st)), "parent");
  PEER_CHECK(parent.sendLine(allLogLines()), "parent");
  return 0;
}

}  // namespace

uint64_t EndState::bytesSince(const EndState& earlier, const std::string& localAddr,
                              bool sent) const {
  in_addr want{};
  if (inet_pton(AF_INET, localAddr.c_str(), &want) != 1) return 0;
  uint64_t total = 0;
  for (uint32_t i = 0; i < sockets && i < 16; ++i) {
    const SocketBytes& now = socket[i];
    if (now.localAddr != want.s_addr) continue;
    uint64_t base = 0;
    for (uint32_t j = 0; j < earlier.sockets && j < 16; ++j) {
      if (earlier.socket[j].inode == now.inode) {
        base = sent ? earlier.socket[j].bytesAcked : earlier.socket[j].bytesReceived;
      }
    }
    uint64_t v = sent ? now.bytesAcked : now.bytesReceived;
    total += v > base ? v - base : 0;
  }
  return total;
}

bool StreamWatch::state(bool receiver, EndState* out) {
  return ch(receiver).sendLine("state") && ch(receiver).recv(out, sizeof(*out), 5000);
}

long StreamWatch::logCount(bool receiver, const std::string& needle) {
  int64_t n = -1;
  if (!ch(receiver).sendLine("count " + needle) || !ch(receiver).recv(&n, sizeof(n), 5000)) {
    return -1;
  }
  return long(n);
}

bool StreamWatch::logHas(bool receiver, const std::vector<std::string>& parts) {
  std::string req = "has";
  for (const std::string& p : parts) req += "\n" + p;
  int64_t found = 0;
  return ch(receiver).sendLine(req) && ch(receiver).recv(&found, sizeof(found), 5000) && found;
}

bool StreamWatch::waitState(bool receiver, const std::function<bool(const EndState&)>& done,
                            double timeoutSec, EndState* last) {
  double deadline = nowSeconds() + timeoutSec;
  EndState st;
  while (state(receiver, &st)) {
    if (last != nullptr) *last = st;
    if (done(st)) return true;
    if (nowSeconds() > deadline) return false;
    usleep(20000);
  }
  return false;
}

bool StreamWatch::waitLog(bool receiver, const std::vector<std::string>& parts, double timeoutSec) {
  double deadline = nowSeconds() + timeoutSec;
  while (!logHas(receiver, parts)) {
    if (nowSeconds() > deadline) return false;
    usleep(20000);
  }
  return true;
}

bool StreamWatch::waitLogCount(bool receiver, const std::string& needle, long atLeast,
                               double timeoutSec) {
  double deadline = nowSeconds() + timeoutSec;
  while (true) {
    long n = logCount(receiver, needle);
    if (n < 0) return false;
    if (n >= atLeast) return true;
    if (nowSeconds() > deadline) return false;
    usleep(20000);
  }
}

WatchedRun runWatchedStream(const PairOptions& options, size_t messageBytes, int depth,
                            const std::function<void(StreamWatch&)>& script, bool idleCompanion) {
  WatchedRun run;
  run.outcome = runPair(
      options,
      [&](NetEndpoint& ep, Channel& peer, Channel& parent) {
        void* comm = nullptr;
        void* idle = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        if (idleCompanion) {
          if (int rc = receiveHandleAndConnect(ep, peer, &idle)) return rc;
        }
        PEER_CHECK(parent.sendLine("connected"), "parent");
        return watchedEnd(ep, comm, parent, true, messageBytes, depth, idle);
      },
      [&](NetEndpoint& ep, Channel& peer, Channel& parent) {
        void* comm = nullptr;
        void* idle = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        if (idleCompanion) {
          if (int rc = listenAndAccept(ep, peer, &idle)) return rc;
        }
        PEER_CHECK(parent.sendLine("connected"), "parent");
        return watchedEnd(ep, comm, parent, false, messageBytes, depth, idle);
      },
      [&](Channel& toReceiver, Channel& toSender) {
        if (!toReceiver.expect("connected", 30000) || !toSender.expect("connected", 30000)) {
          return;
        }
        run.started = true;
        run.receiverStartedAt = nowSeconds();
        StreamWatch watch(toReceiver, toSender);
        script(watch);
        // Both ends' counters before either closes (a close shows on the other end as errors).
        watch.state(true, &run.receiver);
        watch.state(false, &run.sender);
        // The sender closes first, as a finished stream does; what the receiver logs about
        // rails lost after that is the closing, not a fault.
        EndState closing;
        toSender.sendLine("end");
        toSender.recv(&closing, sizeof(closing), 10000);
        toSender.recvLine(&run.senderLog, 10000);
        toReceiver.sendLine("end");
        toReceiver.recv(&closing, sizeof(closing), 10000);
        toReceiver.recvLine(&run.receiverLog, 10000);
      });
  return run;
}

}  // namespace autopilot::bench

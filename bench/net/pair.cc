#include "bench/net/pair.h"

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
  for (int i = 1; i <= n; ++i) s += (i > 1 ? "," : "") + std::string("127.0.0.") + std::to_string(i);
  return s;
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
                  StreamResult* out, Verify verify) {
  std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(depth));
  for (auto& b : bufs) b.resize(messageBytes);
  std::vector<void*> reqs(static_cast<size_t>(depth), nullptr);
  uint64_t posted = 0, done = 0, expected = UINT64_MAX;
  double start = nowSeconds(), last = start;
  while (done < expected) {
    while (posted < done + uint64_t(depth)) {
      size_t slot = size_t(posted % uint64_t(depth));
      void* data = bufs[slot].data();
      size_t size = messageBytes;
      int tag = 0;
      PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &reqs[slot]) == abi::kSuccess, "irecv");
      ++posted;
    }
    if (expected == UINT64_MAX && peer.readable()) {
      std::string line;
      PEER_CHECK(peer.recvLine(&line, 1000), "count");
      expected = std::stoull(line);
      if (done >= expected) break;
    }
    size_t slot = size_t(done % uint64_t(depth));
    int doneFlag = 0;
    int sizes[abi::kProxyMaxSubs] = {};
    abi::Result r = ep.net()->test(reqs[slot], &doneFlag, sizes);
    PEER_CHECK(r == abi::kSuccess, "message %llu: error %d", (unsigned long long)done, int(r));
    PEER_CHECK(nowSeconds() - last < 30, "no completion for 30 s");
    if (!doneFlag) continue;
    double now = nowSeconds();
    out->maxGapSec = std::max(out->maxGapSec, now - last);
    last = now;
    bool intact = verify == Verify::kFull
                      ? checkPattern(bufs[slot].data(), messageBytes, done) < 0
                      : checkStamps(bufs[slot].data(), messageBytes, done);
    if (size_t(sizes[0]) != messageBytes || !intact) out->corrupt++;
    // Poison before reuse: a chunk that does not land next time (or a stale one) would show.
    if (verify == Verify::kFull) {
      std::memset(bufs[slot].data(), 0xa5, std::min<size_t>(messageBytes, 64));
    } else {
      poisonStamps(bufs[slot].data(), messageBytes);
    }
    ++done;
  }
  out->messages = done;
  out->bytes = done * messageBytes;
  out->seconds = last - start;
  return 0;
}

int streamSend(NetEndpoint& ep, void* comm, Channel& peer, Channel& parent, size_t messageBytes,
               int depth, Verify verify) {
  std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(depth));
  for (auto& b : bufs) b.resize(messageBytes);
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
      if (verify == Verify::kFull) {
        fillPattern(bufs[slot].data(), messageBytes, posted);
      } else {
        stampWords(bufs[slot].data(), messageBytes, posted);
      }
      PEER_CHECK(ep.isend(comm, bufs[slot].data(), messageBytes, 0, &reqs[slot]) == abi::kSuccess,
                 "isend");
      ++posted;
    }
    if (done == posted) continue;
    int doneFlag = 0;
    abi::Result r = ep.net()->test(reqs[size_t(done % uint64_t(depth))], &doneFlag, nullptr);
    PEER_CHECK(r == abi::kSuccess, "send %llu: error %d", (unsigned long long)done, int(r));
    PEER_CHECK(nowSeconds() - lastDone < 30, "no send completion for 30 s");
    if (doneFlag) {
      ++done;
      lastDone = nowSeconds();
    }
  }
  PEER_CHECK(peer.sendLine(std::to_string(posted)), "count");
  return 0;
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
      abi::Result r = ep.net()->test(reqs[i], &flag, got);
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

void writeFaultPlan(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  std::fputs(text.c_str(), f);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace autopilot::bench

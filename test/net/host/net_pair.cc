#include "test/net/host/net_pair.h"

#include <unistd.h>

#include <cstring>

#include "common/host/log_capture.h"

namespace autopilot::test {

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
  bench::channelPair(&peerR, &peerS);
  bench::channelPair(&parentR, &childR);
  bench::channelPair(&parentS, &childS);
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
  pid_t r = bench::spawn(child(true));
  pid_t s = bench::spawn(child(false));
  peerR.close();
  peerS.close();
  childR.close();
  childS.close();
  if (conductor) conductor(parentR, parentS);
  PairOutcome out;
  out.receiver = bench::waitChild(r, options.timeoutMs);
  out.sender = bench::waitChild(s, options.timeoutMs);
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

}  // namespace autopilot::test

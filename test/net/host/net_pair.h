// Two processes driving the real plugin .so, one receiving and one sending, as NCCL's proxies
// on two nodes would; the parent only orchestrates (and, in fault tests, breaks things).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench/net/endpoint.h"
#include "bench/net/peer.h"

namespace autopilot::test {

using bench::Channel;
using bench::NetEndpoint;

// A failed check inside a child: report where and return a non-zero exit code.
#define PEER_CHECK(cond, ...)                                                            \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "[%d] %s:%d: check failed: %s: ", int(getpid()), __FILE__,     \
                   __LINE__, #cond);                                                     \
      std::fprintf(stderr, __VA_ARGS__);                                                 \
      std::fprintf(stderr, "\n");                                                        \
      return 3;                                                                          \
    }                                                                                    \
  } while (0)

struct PairOptions {
  std::vector<std::pair<std::string, std::string>> env;  // set in both children
  std::vector<std::pair<std::string, std::string>> receiverEnv, senderEnv;
  int maxNetVersion = 11;
  int timeoutMs = 60000;
  std::function<void()> receiverSetup, senderSetup;  // e.g. enter a network namespace
};

using Side = std::function<int(NetEndpoint& ep, Channel& peer, Channel& parent)>;
using Conductor = std::function<void(Channel& toReceiver, Channel& toSender)>;

struct PairOutcome {
  int receiver = -1;
  int sender = -1;
};

PairOutcome runPair(const PairOptions& options, const Side& receiver, const Side& sender,
                    const Conductor& conductor = {});

// Loopback rails: n addresses 127.0.0.1 .. 127.0.0.n (no privileges needed).
std::string loopbackRails(int n);

// Connection setup helpers (the handle travels over `peer`).
int listenAndAccept(NetEndpoint& ep, Channel& peer, void** recvComm, int dev = 0);
int receiveHandleAndConnect(NetEndpoint& ep, Channel& peer, void** sendComm, int dev = 0);

}  // namespace autopilot::test

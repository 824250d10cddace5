// Two processes driving the real plugin .so, one receiving and one sending, as NCCL's proxies
// on two nodes would; the parent only orchestrates (and, in fault tests and benchmarks, breaks
// things). Shared by the net tests and `autopilot netbench`.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench/net/endpoint.h"
#include "bench/net/peer.h"

namespace autopilot::bench {

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

}  // namespace autopilot::bench

namespace autopilot::bench {

// A stream of equal messages from the sender to the receiver, with `depth` requests in flight
// on each side (like NCCL's pipelined steps), until the conductor tells the sender "stop" on
// its parent channel. The receiver checks every byte and reports the longest gap between two
// consecutive completions (the stall a fault causes).
struct StreamResult {
  uint64_t messages = 0;
  uint64_t bytes = 0;
  uint64_t corrupt = 0;  // messages with a wrong size or wrong bytes
  double seconds = 0;
  double maxGapSec = 0;
};

// kFull checks every byte (tests); kSampled checks stamped words only (benchmarks, see
// stampWords). Both sides must use the same mode.
enum class Verify { kFull, kSampled };

int streamReceive(NetEndpoint& ep, void* comm, Channel& peer, size_t messageBytes, int depth,
                  StreamResult* out, Verify verify = Verify::kFull);
int streamSend(NetEndpoint& ep, void* comm, Channel& peer, Channel& parent, size_t messageBytes,
               int depth, Verify verify = Verify::kFull);

// Tests every request in `reqs` over and over until all are done, as NCCL's proxy tests every
// outstanding request on each pass (waiting on one request while ignoring the others can
// deadlock two processes that wait in different orders). sizes (optional) gets each request's
// first size. Returns the first error, or kInternalError on timeout.
abi::Result waitAll(NetEndpoint& ep, const std::vector<void*>& reqs, std::vector<int>* sizes,
                    double timeoutSec);

// Writes a simulated-fault plan (atomically: write + rename).
void writeFaultPlan(const std::string& path, const std::string& text);

}  // namespace autopilot::bench

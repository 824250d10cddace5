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
#define PEER_CHECK(cond, ...)                                                                   \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "[%d] %s:%d: check failed: %s: ", int(getpid()), __FILE__, __LINE__, \
                   #cond);                                                                      \
      std::fprintf(stderr, __VA_ARGS__);                                                        \
      std::fprintf(stderr, "\n");                                                               \
      return 3;                                                                                 \
    }                                                                                           \
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

// The environment of a two-process test on each transport, so that one test source runs over
// both. TCP: `rails` loopback rails. Verbs: the RDMA ports of the qemu test bed
// (test/verbs/rxe-vm.sh), the receiver on rxe1 and rxe3, the sender on rxe0 and rxe2 (`rails`
// of them, one wire each), the out-of-band control connection on 127.0.0.1.
PairOptions tcpPair(int rails);
PairOptions verbsPair(int rails = 2);
// The rail names of the verbs test bed: receiver (true) or sender side, rail index.
std::string verbsRail(bool receiver, int rail);

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
  // When the conductor sent "mark" on the receiver's parent channel (the moment it injected a
  // fault): the time from the mark to the first completion after it, and the longest gap
  // between completions from the mark on (-1 without a mark).
  double markToFirstCompletionSec = -1;
  double maxGapAfterMarkSec = -1;
  // kIdle only: buffers found changed while no receive was posted in them (a write that landed
  // after its receive completed: what NCCL would see as corruption of a reused buffer).
  uint64_t overwritten = 0;
};

// kFull checks every byte (tests); kSampled checks stamped words only (benchmarks, see
// stampWords). Both sides must use the same mode.
// kIdle is kFull, and moreover the receiver rotates through 4x `depth` buffers, poisons
// each one whole when its receive completed and checks, before posting the next receive in
// it, that nothing wrote it meanwhile (StreamResult::overwritten).
enum class Verify { kFull, kSampled, kIdle };

// `marks` (optional): the receiver's parent channel, read for "mark" lines.
int streamReceive(NetEndpoint& ep, void* comm, Channel& peer, size_t messageBytes, int depth,
                  StreamResult* out, Verify verify = Verify::kFull, Channel* marks = nullptr);
int streamSend(NetEndpoint& ep, void* comm, Channel& peer, Channel& parent, size_t messageBytes,
               int depth, Verify verify = Verify::kFull);

// A whole stream between two processes: connection setup, streamReceive / streamSend until
// `script` (run in the parent once both are connected) returns. `script` gets `mark`, which
// tells the receiver "now" (StreamResult's mark figures). With `collectLogs`, each side's plugin
// log lines that mention its role ("send" / "recv") come back too.
struct StreamRun {
  StreamResult result;
  PairOutcome outcome;
  bool ok = false;  // both sides succeeded and the result arrived
  std::string senderLog, receiverLog;
};
StreamRun runStream(const PairOptions& options, size_t messageBytes, int depth, Verify verify,
                    const std::function<void(const std::function<void()>& mark)>& script,
                    bool collectLogs = false);

// Tests every request in `reqs` over and over until all are done, as NCCL's proxy tests every
// outstanding request on each pass (waiting on one request while ignoring the others can
// deadlock two processes that wait in different orders). sizes (optional) gets each request's
// first size. Returns the first error, or kInternalError on timeout.
abi::Result waitAll(NetEndpoint& ep, const std::vector<void*>& reqs, std::vector<int>* sizes,
                    double timeoutSec);

// A list of messages both sides agree on; the receiver checks every byte and the size.
struct Message {
  size_t size;
  size_t capacity;  // receive buffer (>= size)
};
// 0 B, 1 B, odd sizes around the chunking thresholds, ..., up to maxSize; receive buffers are
// sometimes larger than the message.
std::vector<Message> sizeSweep(size_t maxSize);
// Posts up to `depth` requests ahead (buffers registered with regMr as NCCL does). `flush`: each
// completed receive is flushed (iflush, tested to completion) before its data is checked, as
// NCCL does for GPU memory.
int receiveMessages(NetEndpoint& ep, void* comm, const std::vector<Message>& msgs, int depth,
                    bool flush = false);
int sendMessages(NetEndpoint& ep, void* comm, const std::vector<Message>& msgs, int depth);
// Connection setup, then the messages from a sender to a receiver process.
PairOutcome transferMessages(const PairOptions& options, const std::vector<Message>& msgs,
                             int depth);

// Multi-receive: `rounds` requests of 8 buffers (0 B .. 3 MiB) each, filled by 8 sends posted in
// an order different from the buffers': the tags pick the buffers.
PairOutcome multiReceive(const PairOptions& options, int rounds);
// Three connections closed on both sides with 15 requests of 4 MiB still in flight, then a
// fresh connection that must carry data normally.
PairOutcome closeWithRequestsInFlight(const PairOptions& options);

// Reading the plugin's log (the messages each end captured, one per line).
// Whether a line about `role` rail `index` (named `name`) contains `transition` ("-> failed"
// matches a failure from any state).
bool railLine(const std::string& log, const std::string& role, int index, const std::string& name,
              const std::string& transition);
// From the sender's close summary ("rail N <state> <bytes>, <Gbit/s>, K failures"): rail N's
// failure count and its fraction of the bytes assigned to all rails (-1 when absent).
long summaryFailures(const std::string& log, int rail);
double summaryShare(const std::string& log, int rail, int rails);

// Writes a simulated-fault plan (atomically: write + rename).
void writeFaultPlan(const std::string& path, const std::string& text);

// A stream the parent watches while it runs: both ends answer queries between their test()
// calls, so a test can see a connection make progress, stall or fail, and read the plugin's log
// as it goes (runStream reports only once both ends finished, which a stall prevents). An end
// that gets an error from a post or test() stops using the comm and records it; an end never
// exits on its own, only when the script is over.

// One of this process's established TCP sockets and what the kernel says it carried (a rail's
// traffic measured independently of the plugin; a re-connected rail is a new socket).
struct SocketBytes {
  uint64_t inode = 0;
  uint32_t localAddr = 0;   // IPv4, network byte order
  uint64_t bytesAcked = 0;  // sent and acknowledged by the peer's kernel
  uint64_t bytesReceived = 0;
};

struct EndState {
  uint64_t posted = 0, completed = 0, corrupt = 0;
  int32_t error = 0;            // first error a post or test() returned (abi::Result), 0 = none
  double errorAt = 0;           // nowSeconds() when it was seen
  double lastCompletionAt = 0;  // nowSeconds() of the latest completion (0 = none yet)
  uint32_t sockets = 0;
  SocketBytes socket[16];
  // Bytes on sockets bound to `localAddr` ("127.0.0.2") that this snapshot has and `earlier`
  // had too or did not have yet (sockets that closed in between are not counted).
  uint64_t bytesSince(const EndState& earlier, const std::string& localAddr, bool sent) const;
};

class StreamWatch {
 public:
  StreamWatch(Channel& toReceiver, Channel& toSender) : r_(toReceiver), s_(toSender) {}
  // The end's counters now; false when it does not answer (it died or never started).
  bool state(bool receiver, EndState* out);
  // How many of the end's captured log messages contain `needle` ("a|b": either); -1 when it
  // does not answer.
  long logCount(bool receiver, const std::string& needle);
  // Whether some captured message of the end contains every one of `parts`, in that order.
  bool logHas(bool receiver, const std::vector<std::string>& parts);
  // Polls (every 20 ms) until `done` holds for the end's state, or `timeoutSec`; `last` (if
  // given) gets the last state read.
  bool waitState(bool receiver, const std::function<bool(const EndState&)>& done, double timeoutSec,
                 EndState* last = nullptr);
  // Polls until logHas(receiver, parts), or `timeoutSec`.
  bool waitLog(bool receiver, const std::vector<std::string>& parts, double timeoutSec);
  // Polls until logCount(receiver, needle) >= atLeast, or `timeoutSec`.
  bool waitLogCount(bool receiver, const std::string& needle, long atLeast, double timeoutSec);

 private:
  Channel& ch(bool receiver) { return receiver ? r_ : s_; }
  Channel& r_;
  Channel& s_;
};

struct WatchedRun {
  PairOutcome outcome;
  bool started = false;                // both ends connected and the script ran
  double receiverStartedAt = 0;        // nowSeconds() when the receiver reported its comm connected
  EndState receiver, sender;           // at the end of the script, before the comms close
  std::string receiverLog, senderLog;  // every message each end logged, closing included
};
// Streams `messageBytes` messages, `depth` in flight per side, checking every byte, while
// `script` runs in the parent; then both ends close their comms (requests still in flight
// included) and report. With `idleCompanion`, a second connection over the same rails runs the
// other way, from the receiver to the sender, and carries nothing (as in a ring of two, where
// each rank also receives from the other, idle in this phase): the sender keeps one receive
// posted on it and tests it on every pass, as NCCL's proxy does; the receiver never calls its
// end. An error there is the sender's error; a completion there is counted in its `corrupt`.
WatchedRun runWatchedStream(const PairOptions& options, size_t messageBytes, int depth,
                            const std::function<void(StreamWatch&)>& script,
                            bool idleCompanion = false);

}  // namespace autopilot::bench

// `autopilot netbench`: the net plugin's TCP transport over veth rails between two network
// namespaces (root), against these baselines, measured in the same run:
//   rail_vs_iperf3             one unshaped rail: our stream vs iperf3 over that rail
//   four_rails                 four rails shaped to 1 Gbit/s each: vs their 4 Gbit/s sum
//   degraded_rail              the same with one rail at 250 Mbit/s: vs the 3.25 Gbit/s left
//   degraded_rail_equal_split  the same rails with our equal-split mode (what NCCL and
//                              aws-ofi-nccl do); ratio = degraded_rail / this
//   rail_down                  four 1 Gbit/s rails, one taken down mid-transfer and back up:
//                              bytes lost and the longest stall between two completions
//   transitions                four rails; rail 1 degraded, failed, healed, flapping in turn:
//                              per phase the demo's figures for one connection (efficiency
//                              against the live rails, recovery, gaps, false failovers)
//   pingpong                   8-byte ping-pong latency vs a plain TCP ping-pong over the same
//                              rail that polls non-blocking sockets as NCCL's socket transport
//                              does; ratio = ours / plain (lower is better); blocking TCP shown
//   small_messages             a stream of 2 KiB messages (8 in flight) on two unshaped rails
//                              vs one: time per message, ratio = two / one (lower is better)
// Prints a table and, with --json FILE, writes {"scenarios": [...]}. Both processes of a pair
// drive the plugin .so through the plugin-host harness exactly as NCCL's proxy threads would.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "bench/cli_args.h"
#include "bench/commands.h"
#include "bench/net/netns.h"
#include "bench/net/pair.h"
#include "common/host/log_capture.h"

namespace autopilot::bench {
namespace {

struct Options {
  bool quick = false;
  bool verify = false;
  std::string json;
  double seconds = 4.0;  // per throughput scenario
  size_t messageBytes = 4 << 20;
  int depth = 8;  // requests in flight per side, like NCCL's steps
  int pingIterations = 20000;
  std::string only;        // run just this scenario (and what it is compared with)
  double railMbit = 1000;  // rate of a shaped rail (the degraded one gets a quarter)
  double warmSec = 0.5;    // left out of the throughput figures (see runStream)
};

struct Scenario {
  std::string name;
  int rails = 0;
  std::vector<double> limitsMbit;  // 0: unshaped
  uint64_t bytes = 0;
  double seconds = 0;
  double gbps = 0;          // steady state (see runStream)
  double wholeRunGbps = 0;  // every byte over the whole run, warm-up and drain included
  size_t steadyMessages = 0;
  double baselineGbps = 0;
  std::string baseline;  // what the baseline is
  double ratio = 0;
  uint64_t bytesLost = 0;
  double maxStallMs = 0;
  // Rails either side declared failed (warnings; an orderly close is not one). Every scenario
  // but rail_down and transitions injects no fault, so there each one is a false failover
  // (transitions counts them per phase).
  uint64_t failovers = 0;
  double latencyUs = 0, baselineLatencyUs = 0;  // pingpong and small_messages only
  bool timed = false;                           // figures are latencies (us), not Gbit/s
  std::string target;  // README's target (the figure on a machine with free CPUs)
  bool targetMet = false;
  std::string bound;  // what --verify enforces: the target with slack for a loaded host
  bool boundMet = false;
  bool ran = false;
  std::string error;
  struct PhaseFigures {
    std::string name;
    double seconds = 0;
    double capacityGbps = 0;  // the live rails' rates (a flapping rail for the time it was up)
    double gbps = 0;
    double efficiency = 0;
    double recoveryMs = -1;  // from the phase's start to 90% of its steady rate; -1: never
    double maxGapMs = 0;
    uint64_t failovers = 0;
    bool railDown = false;     // a rail was down in this phase: its failovers are expected
    bool afterChange = false;  // the phase began with a change (all but the first)
  };
  std::vector<PhaseFigures> phases;  // transitions only
};

std::string exactList(const NetnsTestbed& bed, char side, int rails) {
  std::string s = "=";
  for (int r = 0; r < rails; ++r) s += (r ? "," : "") + bed.ifname(side, r);
  return s;
}

PairOptions pairOptions(const NetnsTestbed& bed, int rails,
                        const std::vector<std::pair<std::string, std::string>>& env) {
  PairOptions o;
  o.env = env;
  o.receiverEnv = {{"NCCL_AUTOPILOT_IFNAME", exactList(bed, 'B', rails)}};
  o.senderEnv = {{"NCCL_AUTOPILOT_IFNAME", exactList(bed, 'A', rails)}};
  o.receiverSetup = [&bed] { bed.enter('B'); };
  o.senderSetup = [&bed] { bed.enter('A'); };
  o.timeoutMs = 120000;
  return o;
}

// The receiving side of a stream, like bench::streamReceive but keeping every completion's time,
// so that throughput is taken over the steady state: the first `warmSec` (connection, the
// pipeline filling, the striper learning the rails' rates) and the last `depth` messages (the
// pipeline draining after "stop") are left out. Whole-run figures mix those in, and on short
// runs they dominate.
struct Timeline {
  std::vector<double> completions;  // seconds since the receiver started waiting
  double startSteady = 0;           // that start, on the steady clock (nowSeconds())
  uint64_t corrupt = 0;
};

// The steady-clock times of the rail failures this process logged (bounded: a run that fails
// rails more often than this reports the first ones).
constexpr size_t kMaxFailureTimes = 4096;
std::vector<double> railFailureTimes() {
  std::vector<double> at;
  for (const host::LogRecord& r : host::LogCapture::records()) {
    if (r.level == abi::kLogWarn && r.message.find("-> failed") != std::string::npos &&
        at.size() < kMaxFailureTimes) {
      at.push_back(r.steadySeconds);
    }
  }
  return at;
}

bool sendTimes(Channel& c, const std::vector<double>& times) {
  uint64_t n = times.size();
  return c.send(&n, sizeof(n)) && (n == 0 || c.send(times.data(), n * sizeof(double)));
}

bool recvTimes(Channel& c, std::vector<double>* times) {
  uint64_t n = 0;
  if (!c.recv(&n, sizeof(n), 10000) || n > kMaxFailureTimes) return false;
  times->resize(n);
  return n == 0 || c.recv(times->data(), n * sizeof(double), 10000);
}

// What runStream hands back beyond the scenario's figures, for per-phase figures: every
// completion and every rail failure, on the steady clock.
struct StreamTrace {
  std::vector<double> completions;
  std::vector<double> failures;  // either side's "-> failed" warnings
};

int timedReceive(NetEndpoint& ep, void* comm, Channel& peer, size_t messageBytes, int depth,
                 Timeline* out) {
  std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(depth));
  std::vector<void*> mhs(static_cast<size_t>(depth), nullptr);
  for (size_t i = 0; i < bufs.size(); ++i) {
    bufs[i].resize(messageBytes);
    mhs[i] = ep.registerMemory(comm, bufs[i].data(), messageBytes);
    PEER_CHECK(mhs[i] != nullptr, "regMr of %zu bytes", messageBytes);
  }
  out->completions.reserve(1 << 16);
  std::vector<void*> reqs(static_cast<size_t>(depth), nullptr);
  uint64_t posted = 0, done = 0, expected = UINT64_MAX;
  const double start = nowSeconds();
  out->startSteady = start;
  double last = start;
  while (done < expected) {
    while (posted < done + uint64_t(depth)) {
      size_t slot = size_t(posted % uint64_t(depth));
      void* data = bufs[slot].data();
      size_t size = messageBytes;
      int tag = 0;
      PEER_CHECK(ep.irecv(comm, 1, &data, &size, &tag, &reqs[slot], 10, false, &mhs[slot]) ==
                     abi::kSuccess,
                 "irecv");
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
    PEER_CHECK(ep.test(reqs[slot], &doneFlag, sizes) == abi::kSuccess, "message %llu: error",
               (unsigned long long)done);
    PEER_CHECK(nowSeconds() - last < 30, "no completion for 30 s");
    if (!doneFlag) continue;
    last = nowSeconds();
    if (out->completions.size() < out->completions.capacity()) {
      out->completions.push_back(last - start);
    }
    if (size_t(sizes[0]) != messageBytes || !checkStamps(bufs[slot].data(), messageBytes, done)) {
      out->corrupt++;
    }
    poisonStamps(bufs[slot].data(), messageBytes);
    ++done;
  }
  for (void* mh : mhs) ep.deregisterMemory(comm, mh);
  return 0;
}

// Streams while `script` runs (in the parent once both sides are connected), then fills the
// scenario's figures: steady-state throughput, whole-run throughput, bytes lost, longest stall.
void runStream(const NetnsTestbed& bed, const Options& opt, Scenario* sc,
               const std::vector<std::pair<std::string, std::string>>& env,
               const std::function<void()>& script, StreamTrace* trace = nullptr) {
  double stopAt = 0;  // when the sender was told to stop, on the receiver's clock (about)
  Channel results[2], senderResults[2];
  channelPair(&results[0], &results[1]);
  channelPair(&senderResults[0], &senderResults[1]);
  // Counted before the comm closes: the peer's close of an idle connection is logged, but not
  // as a warning.
  auto railFailures = [] { return uint64_t(host::LogCapture::count(abi::kLogWarn, "-> failed")); };
  const size_t bytes = opt.messageBytes;
  const int depth = opt.depth;
  PairOutcome outcome = runPair(
      pairOptions(bed, sc->rails, env),
      [&](NetEndpoint& ep, Channel& peer, Channel& parent) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        PEER_CHECK(parent.sendLine("connected"), "parent");
        Timeline t;
        if (int rc = timedReceive(ep, comm, peer, bytes, depth, &t)) return rc;
        uint64_t n = t.completions.size();
        uint64_t failures = railFailures();
        PEER_CHECK(results[1].send(&failures, sizeof(failures)) &&
                       results[1].send(&t.corrupt, sizeof(t.corrupt)) &&
                       results[1].send(&n, sizeof(n)) &&
                       results[1].send(t.completions.data(), n * sizeof(double)) &&
                       results[1].send(&t.startSteady, sizeof(t.startSteady)) &&
                       sendTimes(results[1], railFailureTimes()),
                   "results");
        ep.net()->closeRecv(comm);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel& parent) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        if (int rc = streamSend(ep, comm, peer, parent, bytes, depth, Verify::kSampled)) return rc;
        uint64_t failures = railFailures();
        PEER_CHECK(senderResults[1].send(&failures, sizeof(failures)) &&
                       sendTimes(senderResults[1], railFailureTimes()),
                   "results");
        ep.net()->closeSend(comm);
        return 0;
      },
      [&](Channel& toReceiver, Channel& toSender) {
        if (!toReceiver.expect("connected", 30000)) return;
        double start = nowSeconds();
        script();
        stopAt = nowSeconds() - start;
        toSender.sendLine("stop");
      });
  Timeline t;
  uint64_t n = 0, receiverFailures = 0, senderFailures = 0;
  std::vector<double> receiverFailed, senderFailed;
  bool got = outcome.receiver == 0 && outcome.sender == 0 &&
             results[0].recv(&receiverFailures, sizeof(receiverFailures), 10000) &&
             senderResults[0].recv(&senderFailures, sizeof(senderFailures), 10000) &&
             recvTimes(senderResults[0], &senderFailed) &&
             results[0].recv(&t.corrupt, sizeof(t.corrupt), 10000) &&
             results[0].recv(&n, sizeof(n), 10000) && n <= (1u << 16);
  if (got) {
    t.completions.resize(n);
    got = results[0].recv(t.completions.data(), n * sizeof(double), 10000) &&
          results[0].recv(&t.startSteady, sizeof(t.startSteady), 10000) &&
          recvTimes(results[0], &receiverFailed);
  }
  if (!got) {
    sc->error = "transfer failed (receiver " + std::to_string(outcome.receiver) + ", sender " +
                std::to_string(outcome.sender) + ")";
    return;
  }
  const std::vector<double>& c = t.completions;
  if (trace != nullptr) {
    trace->completions.clear();
    for (double x : c) trace->completions.push_back(t.startSteady + x);
    trace->failures = receiverFailed;
    trace->failures.insert(trace->failures.end(), senderFailed.begin(), senderFailed.end());
    std::sort(trace->failures.begin(), trace->failures.end());
  }
  sc->ran = true;
  sc->bytes = c.size() * bytes;
  sc->seconds = c.empty() ? 0 : c.back();
  sc->bytesLost = t.corrupt * bytes;
  sc->failovers += receiverFailures + senderFailures;
  // Between two completions: the wait for the first one is connection set-up on a loaded host.
  for (size_t i = 1; i < c.size(); ++i) {
    sc->maxStallMs = std::max(sc->maxStallMs, (c[i] - c[i - 1]) * 1000);
  }
  sc->wholeRunGbps = sc->seconds > 0 ? double(sc->bytes) * 8 / sc->seconds / 1e9 : 0;
  // Steady state: the messages completed between the end of the warm-up and the moment the
  // sender was told to stop (what follows is the pipeline draining), over that fixed span.
  // Completion times are when the receiver saw them: on a loaded host it may be descheduled
  // and see several at once, so spans between completions are not used (a cluster just after
  // the warm-up inflated such figures beyond the rails' physical rate); a fixed span errs by
  // at most the messages in flight at its ends.
  size_t first = size_t(std::upper_bound(c.begin(), c.end(), opt.warmSec) - c.begin());
  size_t end = size_t(std::upper_bound(c.begin(), c.end(), stopAt) - c.begin());
  if (end >= first + 4 && stopAt > opt.warmSec) {
    sc->steadyMessages = end - first;
    sc->gbps = double(end - first) * double(bytes) * 8 / (stopAt - opt.warmSec) / 1e9;
  } else {
    sc->error = "too few messages in the steady state (" + std::to_string(c.size()) +
                " in all): run longer (--seconds)";
  }
}

void sleepSec(double s) { usleep(useconds_t(s * 1e6)); }

// ---- baselines

double iperf3Gbps(const NetnsTestbed& bed, double seconds, std::string* error) {
  if (std::system("command -v iperf3 >/dev/null 2>&1") != 0) {
    *error = "iperf3 is not installed";
    return 0;
  }
  int port = 20000 + getpid() % 20000;
  std::string server = "iperf3 -s -1 -B " + bed.address('B', 0) + " -p " + std::to_string(port);
  pid_t s = spawn([&] {
    bed.enter('B');
    return std::system((server + " >/dev/null 2>&1").c_str()) == 0 ? 0 : 1;
  });
  usleep(400000);
  char secs[16];
  std::snprintf(secs, sizeof(secs), "%.1f", std::max(seconds, 1.0));
  std::string client = "ip netns exec " + bed.ns('A') + " iperf3 -J -c " + bed.address('B', 0) +
                       " -p " + std::to_string(port) + " -t " + secs + " 2>/dev/null";
  std::string json;
  int clientStatus = -1;
  if (FILE* p = popen(client.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) json.append(buf, n);
    clientStatus = pclose(p);
  }
  int serverStatus = waitChild(s, 10000);
  // A baseline that failed makes the comparison meaningless: every failure is an error.
  if (clientStatus != 0) {
    *error = "iperf3 client failed (status " + std::to_string(clientStatus) + ")";
    return 0;
  }
  if (serverStatus != 0) {
    *error = "iperf3 server failed (exit " + std::to_string(serverStatus) + ")";
    return 0;
  }
  size_t at = json.find("\"sum_received\"");
  if (at != std::string::npos) at = json.find("\"bits_per_second\"", at);
  double gbps =
      at == std::string::npos ? 0 : std::atof(json.c_str() + json.find(':', at) + 1) / 1e9;
  if (!(gbps > 0)) {
    *error = "no result from iperf3";
    return 0;
  }
  return gbps;
}

// Plain TCP ping-pong of 8 bytes over rail 0: mean round trip in microseconds. `polling`: both
// sides read non-blocking sockets and yield when nothing came, as NCCL's socket transport and our
// own side of the comparison do; else blocking reads, whose latency depends on how deeply idle
// CPUs sleep.
double plainPingPongUs(const NetnsTestbed& bed, int iterations, bool polling, std::string* error) {
  // Reads exactly 8 bytes; false when the connection closed or failed.
  auto read8 = [polling](int fd, char* buf) {
    if (!polling) return ::recv(fd, buf, 8, MSG_WAITALL) == 8;
    size_t got = 0;
    while (got < 8) {
      ssize_t k = ::recv(fd, buf + got, 8 - got, MSG_DONTWAIT);
      if (k > 0) {
        got += size_t(k);
      } else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        return false;
      } else {
        sched_yield();
      }
    }
    return true;
  };
  Channel ready[2], result[2];
  channelPair(&ready[0], &ready[1]);
  channelPair(&result[0], &result[1]);
  int port = 40000 + getpid() % 20000;
  std::string serverAddr = bed.address('B', 0);
  pid_t server = spawn([&] {
    bed.enter('B');
    int l = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    inet_pton(AF_INET, serverAddr.c_str(), &a.sin_addr);
    if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(l, 1) != 0) return 1;
    ready[1].sendLine("listening");
    int c = ::accept(l, nullptr, nullptr);
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char buf[8];
    while (read8(c, buf)) {
      if (::send(c, buf, 8, 0) != 8) break;
    }
    return 0;
  });
  pid_t client = spawn([&] {
    bed.enter('A');
    if (!ready[0].expect("listening", 10000)) return 1;
    int c = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    inet_pton(AF_INET, serverAddr.c_str(), &a.sin_addr);
    if (::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return 1;
    char buf[8] = {};
    double t0 = 0;
    for (int i = -1000; i < iterations; ++i) {  // 1000 warm-up round trips
      if (i == 0) t0 = nowSeconds();
      if (::send(c, buf, 8, 0) != 8 || !read8(c, buf)) return 1;
    }
    double us = (nowSeconds() - t0) * 1e6 / iterations;
    result[1].send(&us, sizeof(us));
    ::close(c);
    return 0;
  });
  double us = 0;
  bool ok = result[0].recv(&us, sizeof(us), 120000);
  waitChild(client, 5000);
  waitChild(server, 5000);
  if (!ok) *error = "plain TCP ping-pong failed";
  return us;
}

// Our 8-byte ping-pong over rail 0: each side has a send and a receive comm and keeps
// receives posted ahead (as NCCL does), so the clear-to-send is usually there before the send.
double pluginPingPongUs(const NetnsTestbed& bed, int iterations, std::string* error) {
  constexpr int kDepth = 4;
  Channel result[2];
  channelPair(&result[0], &result[1]);
  auto side = [&](bool initiator) {
    return [&, initiator](NetEndpoint& ep, Channel& peer, Channel&) -> int {
      void *sendComm = nullptr, *recvComm = nullptr;
      // Initiator (A) connects first, then accepts; the other side the reverse.
      if (initiator) {
        if (int rc = receiveHandleAndConnect(ep, peer, &sendComm)) return rc;
        if (int rc = listenAndAccept(ep, peer, &recvComm)) return rc;
      } else {
        if (int rc = listenAndAccept(ep, peer, &recvComm)) return rc;
        if (int rc = receiveHandleAndConnect(ep, peer, &sendComm)) return rc;
      }
      uint64_t out[kDepth] = {}, in[kDepth] = {};
      void* recvReq[kDepth] = {};
      void* sendReq[kDepth] = {};
      int total = iterations + 1000;
      for (int k = 0; k < kDepth; ++k) {
        void* data = &in[k];
        size_t size = 8;
        int tag = 0;
        PEER_CHECK(ep.irecv(recvComm, 1, &data, &size, &tag, &recvReq[k]) == abi::kSuccess,
                   "irecv");
      }
      // Like NCCL's proxy, every outstanding request is tested on each pass, sends included:
      // a send whose clear-to-send had not arrived when it was posted goes out from test().
      auto pollSends = [&]() -> int {
        for (void*& q : sendReq) {
          if (q == nullptr) continue;
          int done = 0;
          PEER_CHECK(ep.net()->test(q, &done, nullptr) == abi::kSuccess, "send");
          if (done) q = nullptr;
        }
        return 0;
      };
      auto send = [&](int i) -> int {
        int k = i % kDepth;
        double deadline = nowSeconds() + 30;
        while (sendReq[k] != nullptr) {
          if (int rc = pollSends()) return rc;
          PEER_CHECK(nowSeconds() < deadline, "send stalled");
        }
        out[k] = uint64_t(i);
        PEER_CHECK(ep.isend(sendComm, &out[k], 8, 0, &sendReq[k]) == abi::kSuccess, "isend");
        return 0;
      };
      auto receive = [&](int i) -> int {
        int k = i % kDepth;
        int done = 0;
        double deadline = nowSeconds() + 30;
        while (!done) {
          PEER_CHECK(ep.net()->test(recvReq[k], &done, nullptr) == abi::kSuccess, "recv");
          if (int rc = pollSends()) return rc;
          PEER_CHECK(nowSeconds() < deadline, "ping-pong stalled");
          if (!done) sched_yield();  // what NCCL's proxy thread does when a pass made no progress
        }
        PEER_CHECK(in[k] == uint64_t(i), "got %llu, expected %d", (unsigned long long)in[k], i);
        return 0;
      };
      // A buffer is posted again once free, off the round trip's critical path (after the
      // next send), as NCCL's proxy re-posts a step once the GPU has consumed it.
      auto repost = [&](int i) -> int {
        int k = i % kDepth;
        if (i < 0 || i + kDepth >= total) return 0;
        void* data = &in[k];
        size_t size = 8;
        int tag = 0;
        PEER_CHECK(ep.irecv(recvComm, 1, &data, &size, &tag, &recvReq[k]) == abi::kSuccess,
                   "irecv");
        return 0;
      };
      double t0 = 0;
      for (int i = 0; i < total; ++i) {
        if (initiator && i == 1000) t0 = nowSeconds();
        if (initiator) {
          if (int rc = send(i)) return rc;
          if (int rc = repost(i - 1)) return rc;
          if (int rc = receive(i)) return rc;
        } else {
          if (int rc = receive(i)) return rc;
          if (int rc = send(i)) return rc;
          if (int rc = repost(i)) return rc;
        }
      }
      if (initiator) {
        double us = (nowSeconds() - t0) * 1e6 / iterations;
        result[1].send(&us, sizeof(us));
      }
      double deadline = nowSeconds() + 30;
      while (std::any_of(sendReq, sendReq + kDepth, [](void* q) { return q != nullptr; }) &&
             nowSeconds() < deadline) {
        if (int rc = pollSends()) return rc;
      }
      peer.sendLine("bye");
      peer.expect("bye", 5000);
      ep.net()->closeSend(sendComm);
      ep.net()->closeRecv(recvComm);
      return 0;
    };
  };
  PairOutcome out = runPair(pairOptions(bed, 1, {}), side(false), side(true));
  double us = 0;
  if (out.receiver != 0 || out.sender != 0 || !result[0].recv(&us, sizeof(us), 1000)) {
    *error = "plugin ping-pong failed";
  }
  return us;
}

// ---- scenarios

void shapeAll(const NetnsTestbed& bed, const std::vector<double>& limits) {
  for (int r = 0; r < bed.rails(); ++r) {
    double m = r < int(limits.size()) ? limits[size_t(r)] : 0;
    if (m > 0) {
      bed.shape(r, m);
    } else {
      bed.unshape(r);
    }
  }
}

std::string limitsText(const std::vector<double>& limits) {
  std::string s;
  for (double m : limits)
    s += (s.empty() ? "" : ",") + (m > 0 ? std::to_string(int(m)) : std::string("-"));
  return s;
}

// What --verify enforces. README's targets hold on a machine whose CPUs are free; CI runs on a
// shared 2-core host, beside builds or a CPU hog, so each bound keeps the target's direction
// with slack (figures behind each: README's netbench section).
// One unshaped rail is CPU-bound on both sides: iperf3 blocks in the kernel while our two
// processes poll, which costs most when the cores are shared (0.31-0.58 at a load of 7-10,
// 0.23 beside stress-ng --cpu 2).
constexpr double kIperfBound = 0.15;      // ours / iperf3 on one unshaped rail (target 0.9)
constexpr double kFourRailsBound = 0.6;   // ours / sum of four shaped rails (target 0.9)
constexpr double kDegradedBound = 0.6;    // ours / the 3.25 rails left (target 0.85)
constexpr double kEqualSplitBound = 1.5;  // ours / equal split (target 2.5, physics 3.25)
constexpr double kStallBoundMs = 1000;    // a rail down: longest gap (target 250 ms)
// transitions: every phase moves data at a tenth of what its live rails carry at least, with no
// gap over 6.5 s (the targets: 0.85 degraded and failed, 0.7 flapping, gaps <= 0.5 s). Quick
// runs, idle and beside stress-ng --cpu 2, measured 0.30-0.97 per phase and gaps up to 2.05 s
// (a rail slowed tenfold holding its window: the 2 s allowance for bytes still on this host);
// both bounds keep a 3x margin.
constexpr double kPhaseEfficiencyBound = 0.1;
constexpr double kPhaseGapBoundMs = 6500;
// A polling transport against blocking sockets: with free CPUs ours is faster (0.17-0.9), with
// every core busy each round trip waits for both pollers to be scheduled (ratios 6-60 seen
// beside stress-ng). The ratio is reported; what is enforced is that it completes, in order,
// with a median round trip bounded in absolute terms.
constexpr double kPingPongBoundUs = 20000;

// One connection through the demo's transitions (rail 1 of 4 changes; each phase opt.seconds):
// healthy, degraded (rail 1 at a tenth of its rate), failed (rail 1 down), healed (rail 1 back
// at full rate), flapping (rail 1 down and up every 1.5 s, down first). Per phase the figures
// the demo reports for collectives, here for a plain stream, so that transport effects can be
// told apart from collective ones: throughput against the live rails' capacity ("efficiency"),
// time from the change to 90% of the phase's steady rate (0.25 s windows), the longest gap
// between completions, and rails declared failed (false failovers where no rail was down).
constexpr double kFlapSeconds = 1.5;
constexpr double kSettleWindowS = 0.25;
std::string fmt(const char* f, double v);

void runTransitions(const NetnsTestbed& bed, const Options& opt, Scenario* s) {
  const double t = opt.seconds, R = opt.railMbit;
  s->name = "transitions";
  s->rails = 4;
  s->limitsMbit = {R, R, R, R};
  shapeAll(bed, s->limitsMbit);
  struct Mark {
    const char* name;
    double start = 0;
    double capacityMbit = 0;
    bool railDown = false;
    double targetEfficiency = 0;  // the demo's target for this phase (0: none)
  };
  std::vector<Mark> marks;
  double end = 0, flapDownS = 0;
  auto begin = [&](const char* name, double capacityMbit, bool railDown, double target) {
    marks.push_back({name, nowSeconds(), capacityMbit, railDown, target});
  };
  StreamTrace trace;
  runStream(
      bed, opt, s, {},
      [&] {
        sleepSec(opt.warmSec);
        begin("healthy", 4 * R, false, 0);
        sleepSec(t);
        // Each phase starts as its change is made: what the plugin does about the change (a
        // failover seen within the `ip` command's run) belongs to the new phase.
        begin("degraded", 3 * R + R / 10, false, 0.85);
        bed.shape(1, R / 10);
        sleepSec(t);
        begin("failed", 3 * R, true, 0.85);
        bed.linkDown(1);
        sleepSec(t);
        begin("healed", 4 * R, false, 0);
        bed.linkUp(1);
        bed.shape(1, R);
        sleepSec(t);
        begin("flapping", 0, true, 0.7);  // capacity: the time rail 1 was really up
        const double p0 = marks.back().start;
        bool down = false;
        double downSince = 0;
        for (int k = 0; nowSeconds() < p0 + t; ++k) {
          if (k % 2 == 0) {
            bed.linkDown(1);
            down = true;
            downSince = nowSeconds();
          } else {
            bed.linkUp(1);
            down = false;
            flapDownS += nowSeconds() - downSince;
          }
          double next = std::min(p0 + t, p0 + (k + 1) * kFlapSeconds);
          if (next > nowSeconds()) sleepSec(next - nowSeconds());
        }
        end = nowSeconds();
        if (down) {
          flapDownS += end - downSince;
          bed.linkUp(1);
        }
      },
      &trace);
  if (!s->ran || marks.size() != 5 || end <= marks.back().start) {
    if (s->error.empty()) s->error = "the transitions did not complete";
    s->ran = false;
    return;
  }
  marks.back().capacityMbit = 3 * R + R * std::max(0.0, 1 - flapDownS / (end - marks.back().start));
  const std::vector<double>& c = trace.completions;
  const double bytes = double(opt.messageBytes);
  auto bytesIn = [&](double a, double b) {
    return bytes * double(std::lower_bound(c.begin(), c.end(), b) -
                          std::lower_bound(c.begin(), c.end(), a));
  };
  double capacityBitS = 0, span = 0;
  // The demo's targets for the closed loop, per phase, applied to one connection.
  bool met = s->bytesLost == 0, bounded = s->bytesLost == 0;
  for (size_t i = 0; i < marks.size(); ++i) {
    const double a = marks[i].start, b = i + 1 < marks.size() ? marks[i + 1].start : end;
    Scenario::PhaseFigures f;
    f.name = marks[i].name;
    f.seconds = b - a;
    f.railDown = marks[i].railDown;
    f.afterChange = i > 0;  // the first phase follows no change: no recovery time
    f.capacityGbps = marks[i].capacityMbit / 1000;
    f.gbps = b > a ? bytesIn(a, b) * 8 / (b - a) / 1e9 : 0;
    f.efficiency = f.capacityGbps > 0 ? f.gbps / f.capacityGbps : 0;
    const double mid = (a + b) / 2, steady = b > mid ? bytesIn(mid, b) / (b - mid) : 0;
    if (f.afterChange && steady > 0) {
      for (double x = a + kSettleWindowS; x <= b + 1e-9; x += kSettleWindowS / 10) {
        if (bytesIn(x - kSettleWindowS, x) / kSettleWindowS >= 0.9 * steady) {
          f.recoveryMs = (x - a) * 1e3;
          break;
        }
      }
    }
    // Gaps ending in the phase (the one before may have begun earlier), and a wait still open
    // at the phase's end.
    double prev = a;
    auto first = std::lower_bound(c.begin(), c.end(), a);
    if (first != c.begin()) prev = *(first - 1);
    for (auto it = first; it != c.end() && *it < b; ++it) {
      f.maxGapMs = std::max(f.maxGapMs, (*it - prev) * 1e3);
      prev = *it;
    }
    f.maxGapMs = std::max(f.maxGapMs, (b - prev) * 1e3);
    f.failovers = uint64_t(std::lower_bound(trace.failures.begin(), trace.failures.end(), b) -
                           std::lower_bound(trace.failures.begin(), trace.failures.end(), a));
    met = met && f.efficiency >= marks[i].targetEfficiency && (f.railDown || f.failovers == 0) &&
          f.maxGapMs <= 500 && (!f.afterChange || (f.recoveryMs >= 0 && f.recoveryMs <= 1000));
    bounded = bounded && f.efficiency >= kPhaseEfficiencyBound && f.maxGapMs <= kPhaseGapBoundMs;
    capacityBitS += marks[i].capacityMbit * 1e6 * f.seconds;
    span += f.seconds;
    s->phases.push_back(f);
  }
  s->baselineGbps = span > 0 ? capacityBitS / span / 1e9 : 0;
  s->baseline = "live rails' rates";
  s->ratio = s->baselineGbps > 0 ? s->gbps / s->baselineGbps : 0;
  s->target = "the demo's per-phase targets";
  s->targetMet = s->ran && met;
  s->bound = "each phase >= " + fmt("%.2f", kPhaseEfficiencyBound) +
             ", gaps <= " + fmt("%.0f ms", kPhaseGapBoundMs);
  s->boundMet = s->ran && bounded;
}

void printPhases(const Scenario& s) {
  std::printf(
      "\n%s, per phase (one connection; 4 rails at %s Mbit/s, rail 1 changes; efficiency = "
      "throughput / the live rails' rates; recovery = from the change to 90%% of the phase's "
      "steady rate):\n",
      s.name.c_str(), limitsText({s.limitsMbit.empty() ? 0 : s.limitsMbit[0]}).c_str());
  std::printf("%-10s %9s %8s %10s %11s %10s %9s %6s\n", "phase", "capacity", "Gbit/s", "efficiency",
              "recovery ms", "max gap ms", "failovers", "false");
  for (const Scenario::PhaseFigures& f : s.phases) {
    std::string rec = !f.afterChange ? "-" : f.recoveryMs < 0 ? "never" : fmt("%.0f", f.recoveryMs);
    std::printf("%-10s %9.3f %8.3f %10.2f %11s %10.0f %9llu %6llu\n", f.name.c_str(),
                f.capacityGbps, f.gbps, f.efficiency, rec.c_str(), f.maxGapMs,
                (unsigned long long)f.failovers,
                (unsigned long long)(f.railDown ? 0 : f.failovers));
  }
  std::printf(
      "targets (the demo's): efficiency >= 0.85 degraded and failed, >= 0.7 flapping; recovery "
      "<= 1000 ms; gaps <= 500 ms; 0 false failovers\n");
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// The median of a scenario's rounds (the upper one of an even count; 0 when there are none).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void printTable(const std::vector<Scenario>& all) {
  std::printf("\n%-26s %-16s %8s %9s %-22s %7s %5s %8s %5s  %-34s %-28s\n", "scenario",
              "limits (Mbit/s)", "Gbit/s", "baseline", "(what)", "ratio", "lost", "stall ms",
              "fails", "README target", "enforced by --verify");
  for (const Scenario& s : all) {
    std::string target = s.target + (s.targetMet ? ": met" : ": missed");
    std::string bound = s.bound + (s.boundMet ? ": PASS" : ": FAIL");
    if (!s.ran) {
      std::printf("%-26s %-16s  not run: %s  %s\n", s.name.c_str(),
                  limitsText(s.limitsMbit).c_str(), s.error.c_str(), bound.c_str());
      continue;
    }
    if (s.timed) {
      std::printf("%-26s %-16s %6.1fus %7.1fus %-22s %7.2f %5llu %8s %5llu  %-34s %-28s\n",
                  s.name.c_str(), limitsText(s.limitsMbit).c_str(), s.latencyUs,
                  s.baselineLatencyUs, s.baseline.c_str(), s.ratio, (unsigned long long)s.bytesLost,
                  "-", (unsigned long long)s.failovers, target.c_str(), bound.c_str());
    } else {
      std::printf("%-26s %-16s %8.2f %9.2f %-22s %7.2f %5llu %8.1f %5llu  %-34s %-28s\n",
                  s.name.c_str(), limitsText(s.limitsMbit).c_str(), s.gbps, s.baselineGbps,
                  s.baseline.c_str(), s.ratio, (unsigned long long)s.bytesLost, s.maxStallMs,
                  (unsigned long long)s.failovers, target.c_str(), bound.c_str());
    }
    if (!s.error.empty()) std::printf("%-26s error: %s\n", "", s.error.c_str());
  }
  std::printf(
      "Gbit/s: steady state (the warm-up and the final drain left out); lost: bytes "
      "that did not arrive intact; fails: rails declared failed by either side (faults are "
      "injected only in rail_down and transitions; elsewhere each is a false failover).\n");
}

std::string jsonEscape(const std::string& in) {
  std::string out;
  for (char c : in) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

bool writeJson(const std::string& path, const std::vector<Scenario>& all, const Options& opt) {
  std::ofstream f(path);
  if (!f) return false;
  double load[3] = {};
  if (FILE* p = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(p, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    std::fclose(p);
  }
  char buf[768];
  f << "{\n  \"tool\": \"autopilot netbench\",\n";
  std::snprintf(buf, sizeof(buf),
                "  \"quick\": %s,\n  \"message_bytes\": %zu,\n  \"depth\": %d,\n"
                "  \"rail_mbit\": %.0f,\n  \"seconds\": %.2f,\n  \"warm_seconds\": %.2f,\n"
                "  \"cpus\": %ld,\n  \"load_average_1m\": %.2f,\n",
                opt.quick ? "true" : "false", opt.messageBytes, opt.depth, opt.railMbit,
                opt.seconds, opt.warmSec, sysconf(_SC_NPROCESSORS_ONLN), load[0]);
  f << buf << "  \"scenarios\": [\n";
  for (size_t i = 0; i < all.size(); ++i) {
    const Scenario& s = all[i];
    std::string limits;
    for (double m : s.limitsMbit) limits += (limits.empty() ? "" : ", ") + std::to_string(int(m));
    std::snprintf(buf, sizeof(buf),
                  "    {\"name\": \"%s\", \"ran\": %s, \"rails\": %d, \"rate_limits_mbit\": [%s], "
                  "\"bytes\": %llu, \"seconds\": %.3f, \"gbps\": %.4f, "
                  "\"whole_run_gbps\": %.4f, \"steady_messages\": %zu, \"baseline_gbps\": %.4f, ",
                  s.name.c_str(), s.ran ? "true" : "false", s.rails, limits.c_str(),
                  (unsigned long long)s.bytes, s.seconds, s.gbps, s.wholeRunGbps, s.steadyMessages,
                  s.baselineGbps);
    f << buf;
    std::snprintf(buf, sizeof(buf),
                  "\"baseline\": \"%s\", \"ratio\": %.4f, \"bytes_lost\": %llu, "
                  "\"rail_failovers\": %llu, "
                  "\"max_stall_ms\": %.2f, \"latency_us\": %.2f, \"baseline_latency_us\": %.2f, "
                  "\"target\": \"%s\", \"target_met\": %s, \"bound\": \"%s\", "
                  "\"bound_met\": %s, ",
                  s.baseline.c_str(), s.ratio, (unsigned long long)s.bytesLost,
                  (unsigned long long)s.failovers, s.maxStallMs, s.latencyUs, s.baselineLatencyUs,
                  s.target.c_str(), s.targetMet ? "true" : "false", s.bound.c_str(),
                  s.boundMet ? "true" : "false");
    f << buf;
    if (!s.phases.empty()) {
      f << "\"phases\": [";
      for (size_t k = 0; k < s.phases.size(); ++k) {
        const Scenario::PhaseFigures& p = s.phases[k];
        std::snprintf(buf, sizeof(buf),
                      "%s{\"name\": \"%s\", \"seconds\": %.3f, \"capacity_gbps\": %.4f, "
                      "\"gbps\": %.4f, \"efficiency\": %.4f, \"recovery_ms\": %.1f, "
                      "\"max_gap_ms\": %.1f, \"failovers\": %llu, \"false_failovers\": %llu}",
                      k ? ", " : "", p.name.c_str(), p.seconds, p.capacityGbps, p.gbps,
                      p.efficiency, p.recoveryMs, p.maxGapMs, (unsigned long long)p.failovers,
                      (unsigned long long)(p.railDown ? 0 : p.failovers));
        f << buf;
      }
      f << "], ";
    }
    f << "\"error\": \"" << jsonEscape(s.error) << "\"}" << (i + 1 < all.size() ? "," : "") << "\n";
  }
  f << "  ]\n}\n";
  return bool(f);
}

// What --only selects (each with what it is compared with).
const std::vector<std::string> kScenarioNames = {
    "rail_vs_iperf3", "four_rails", "rail_down",     "degraded_rail", "degraded_rail_equal_split",
    "transitions",    "pingpong",   "small_messages"};

int cmdNetbench(int argc, char** argv) {
  Options opt;
  cli::Args args(
      "autopilot netbench",
      "Runs the net plugin over veth rails between two network namespaces (needs root) and\n"
      "compares it with iperf3, the physical limit of shaped rails, our own equal-split mode,\n"
      "and a plain TCP ping-pong, all measured in the same run.");
  args.addFlag("--quick", opt.quick,
               "CI's run (2.5 s per scenario, rails at 250 Mbit/s so that the rails, not a loaded "
               "host's CPUs, are the limit; --seconds and --rail-mbit still apply)");
  args.addText("--json", opt.json, "the results as JSON").typeName("FILE");
  args.addFlag("--verify", opt.verify,
               "exit 1 unless every scenario ran without error, lost nothing and met its enforced "
               "bound (README's target with slack for a loaded machine; both are printed)");
  cli::Opt seconds =
      args.addReal("--seconds", opt.seconds, cli::Interval::positive(),
                   "per throughput scenario (0.3 .. 600; values outside are clamped)");
  cli::Opt rate =
      args.addReal("--rail-mbit", opt.railMbit, cli::Interval::positive(),
                   "the rate a shaped rail gets (the degraded one a quarter; 8 .. 100000, values "
                   "outside are clamped)")
          .typeName("M");
  args.addChoice("--only", opt.only, kScenarioNames,
                 "run just this scenario (and what it is compared with)");
  args.footer("Exit code 77: cannot run here (not root, no ip/tc).");
  if (std::optional<int> rc = args.parse(argc, argv)) return *rc;
  if (opt.quick) {
    // Rails at 1 Gbit/s make four of them CPU-bound on a loaded 2-core host (the two polling
    // processes, the copies and tbf share the cores with whatever else runs), and the figures
    // then measure the load, not the striping. At 250 Mbit/s the rails are the limit.
    if (!seconds.given()) opt.seconds = 2.5;
    if (!rate.given()) opt.railMbit = 250;
    opt.pingIterations = 3000;
  }
  opt.seconds = std::clamp(opt.seconds, 0.3, 600.0);
  opt.railMbit = std::clamp(opt.railMbit, 8.0, 100000.0);
  opt.warmSec = std::min(opt.quick ? 0.5 : 1.0, opt.seconds / 3);
  std::string why;
  if (!NetnsTestbed::available(&why)) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::strcmp(ci, "true") == 0) {
      std::printf("netbench: FAIL: cannot run under CI=true: %s\n", why.c_str());
      return 1;
    }
    std::printf("netbench: skipped: %s\n", why.c_str());
    return 77;
  }
  NetnsTestbed bed(4);
  if (!bed.ok()) {
    std::fprintf(stderr, "netbench: %s\n", bed.error().c_str());
    return 1;
  }
  std::printf(
      "netbench: namespaces %s/%s, 4 veth rails, %s (%.1f s per stream, rails at %.0f "
      "Mbit/s); a shared %ld-core machine\n",
      bed.ns('A').c_str(), bed.ns('B').c_str(), opt.quick ? "quick run" : "full run", opt.seconds,
      opt.railMbit, sysconf(_SC_NPROCESSORS_ONLN));
  std::vector<Scenario> all;
  const double t = opt.seconds;
  const double R = opt.railMbit;

  auto want = [&](const char* name) { return opt.only.empty() || opt.only == name; };
  if (want("rail_vs_iperf3")) {  // 1. one unshaped rail vs iperf3
    Scenario s;
    s.name = "rail_vs_iperf3";
    s.rails = 1;
    s.limitsMbit = {0};
    shapeAll(bed, {});
    std::fprintf(stderr, "netbench: %s ...\n", s.name.c_str());
    runStream(bed, opt, &s, {}, [&] { sleepSec(t); });
    s.baselineGbps = iperf3Gbps(bed, t, &s.error);
    s.baseline = "iperf3, same rail";
    s.ratio = s.baselineGbps > 0 ? s.gbps / s.baselineGbps : 0;
    s.target = "ratio >= 0.9";
    s.targetMet = s.ran && s.ratio >= 0.9;
    s.bound = "ratio >= " + fmt("%.2f", kIperfBound);
    s.boundMet = s.ran && s.ratio >= kIperfBound;
    all.push_back(s);
  }
  Scenario four;
  if (want("four_rails") || want("rail_down")) {  // 2. four shaped rails
    four.name = "four_rails";
    four.rails = 4;
    four.limitsMbit = {R, R, R, R};
    shapeAll(bed, four.limitsMbit);
    std::fprintf(stderr, "netbench: %s ...\n", four.name.c_str());
    runStream(bed, opt, &four, {}, [&] { sleepSec(t); });
    four.baselineGbps = 4 * R / 1000;
    four.baseline = "sum of the rail rates";
    four.ratio = four.gbps / four.baselineGbps;
    four.target = "ratio >= 0.9";
    four.targetMet = four.ran && four.ratio >= 0.9;
    four.bound = "ratio >= " + fmt("%.2f", kFourRailsBound);
    four.boundMet = four.ran && four.ratio >= kFourRailsBound;
    all.push_back(four);
  }
  Scenario degraded, equal;
  if (want("degraded_rail") || want("degraded_rail_equal_split")) {
    // 3. one rail at a quarter of the others' rate: measured striping and equal split.
    degraded.name = "degraded_rail";
    equal.name = "degraded_rail_equal_split";
    degraded.rails = equal.rails = 4;
    degraded.limitsMbit = equal.limitsMbit = {R, R, R, R / 4};
    shapeAll(bed, degraded.limitsMbit);
    std::fprintf(stderr, "netbench: %s ...\n", degraded.name.c_str());
    runStream(bed, opt, &degraded, {}, [&] { sleepSec(t); });
    std::fprintf(stderr, "netbench: %s ...\n", equal.name.c_str());
    runStream(bed, opt, &equal, {{"NCCL_AUTOPILOT_NET_STRIPING", "equal"}}, [&] { sleepSec(t); });
    degraded.baselineGbps = 3.25 * R / 1000;
    degraded.baseline = "sum of the rail rates";
    degraded.ratio = degraded.gbps / degraded.baselineGbps;
    degraded.target = "ratio >= 0.85";
    degraded.targetMet = degraded.ran && degraded.ratio >= 0.85;
    degraded.bound = "ratio >= " + fmt("%.2f", kDegradedBound);
    degraded.boundMet = degraded.ran && degraded.ratio >= kDegradedBound;
    equal.baselineGbps = degraded.gbps;
    equal.baseline = "degraded_rail (ours)";
    equal.ratio = equal.gbps > 0 ? degraded.gbps / equal.gbps : 0;
    equal.target = "ours / equal >= 2.5";
    equal.targetMet = equal.ran && degraded.ran && equal.ratio >= 2.5;
    equal.bound = "ours / equal >= " + fmt("%.2f", kEqualSplitBound);
    equal.boundMet = equal.ran && degraded.ran && equal.ratio >= kEqualSplitBound;
    all.push_back(degraded);
    all.push_back(equal);
  }
  if (want("rail_down")) {  // 4. a rail taken down mid-transfer, then back up
    Scenario s;
    s.name = "rail_down";
    s.rails = 4;
    s.limitsMbit = {R, R, R, R};
    shapeAll(bed, s.limitsMbit);
    std::fprintf(stderr, "netbench: %s ...\n", s.name.c_str());
    runStream(bed, opt, &s, {}, [&] {
      sleepSec(std::max(opt.warmSec, t / 3));
      bed.linkDown(1);
      sleepSec(std::max(0.6, t / 2));
      bed.linkUp(1);
      sleepSec(std::max(0.5, t / 2));
    });
    s.baselineGbps = four.gbps;
    s.baseline = "four_rails (no fault)";
    s.ratio = s.baselineGbps > 0 ? s.gbps / s.baselineGbps : 0;
    s.target = "0 B lost, stall <= 250 ms";
    s.targetMet = s.ran && s.bytesLost == 0 && s.maxStallMs <= 250;
    s.bound = "0 B lost, stall <= " + fmt("%.0f ms", kStallBoundMs);
    s.boundMet = s.ran && s.bytesLost == 0 && s.maxStallMs <= kStallBoundMs;
    all.push_back(s);
  }
  if (want("transitions")) {  // 5. degrade, fail, heal, flap while streaming
    Scenario s;
    std::fprintf(stderr, "netbench: transitions ...\n");
    runTransitions(bed, opt, &s);
    all.push_back(s);
  }
  if (want("pingpong")) {  // 6. 8-byte ping-pong
    Scenario s;
    s.name = "pingpong";
    s.timed = true;
    s.rails = 1;
    s.limitsMbit = {0};
    shapeAll(bed, {});
    std::fprintf(stderr, "netbench: %s ...\n", s.name.c_str());
    // The three alternate in rounds and the medians are compared: the machine's load changes
    // every latency here, blocking TCP's most (how deeply idle CPUs sleep). The baseline is
    // polled TCP, the same way of waiting as ours: blocking TCP took 8 to 110 us on the same VM
    // depending on its load, which made any ratio against it meaningless.
    constexpr int kRounds = 5;
    std::vector<double> ours, plain, blocking;
    for (int round = 0; round < kRounds && s.error.empty(); ++round) {
      ours.push_back(pluginPingPongUs(bed, opt.pingIterations / kRounds, &s.error));
      plain.push_back(plainPingPongUs(bed, opt.pingIterations / kRounds, true, &s.error));
      blocking.push_back(plainPingPongUs(bed, opt.pingIterations / kRounds, false, &s.error));
    }
    s.latencyUs = median(ours);
    s.baselineLatencyUs = median(plain);
    s.baseline = fmt("polled TCP (blocking %.0f us)", median(blocking));
    s.ran = s.error.empty();
    s.ratio = s.baselineLatencyUs > 0 ? s.latencyUs / s.baselineLatencyUs : 0;
    s.target = "ratio <= 1.2";
    s.targetMet = s.ran && s.ratio <= 1.2;
    s.bound = "ours <= " + fmt("%.0f us", kPingPongBoundUs);
    s.boundMet = s.ran && s.latencyUs > 0 && s.latencyUs <= kPingPongBoundUs;
    all.push_back(s);
  }
  if (want("small_messages")) {  // 7. small messages: two rails against one
    // Latency-bound traffic gains nothing from a second rail; what a second rail must not do
    // is cost time per message. Rounds alternate one rail and two; medians are compared.
    Scenario s;
    s.name = "small_messages";
    s.timed = true;
    s.rails = 2;
    s.limitsMbit = {0, 0};
    shapeAll(bed, {});
    std::fprintf(stderr, "netbench: %s ...\n", s.name.c_str());
    constexpr size_t kBytes = 2048;
    constexpr int kRounds = 3;
    const double streamSec = opt.quick ? 0.5 : 1.5;
    auto usPerMessage = [&](int rails) {
      StreamRun run = runStream(pairOptions(bed, rails, {}), kBytes, opt.depth, Verify::kSampled,
                                [&](const std::function<void()>&) { sleepSec(streamSec); });
      if (!run.ok || run.result.messages == 0) {
        s.error = "stream on " + std::to_string(rails) + " rail(s) failed";
        return 0.0;
      }
      s.bytesLost += run.result.corrupt * kBytes;
      return 1e6 * run.result.seconds / double(run.result.messages);
    };
    std::vector<double> one, two;
    for (int round = 0; round < kRounds && s.error.empty(); ++round) {
      one.push_back(usPerMessage(1));
      two.push_back(usPerMessage(2));
    }
    s.latencyUs = median(two);
    s.baselineLatencyUs = median(one);
    s.baseline = "one rail";
    s.ran = s.error.empty();
    s.ratio = s.baselineLatencyUs > 0 ? s.latencyUs / s.baselineLatencyUs : 0;
    s.target = "ratio <= 1.1";
    s.targetMet = s.ran && s.ratio <= 1.1;
    s.bound = "completes, 0 B lost";
    s.boundMet = s.ran && s.bytesLost == 0;
    all.push_back(s);
  }
  printTable(all);
  for (const Scenario& s : all) {
    if (!s.phases.empty()) printPhases(s);
  }
  if (!opt.json.empty() && !writeJson(opt.json, all, opt)) {
    std::fprintf(stderr, "netbench: cannot write %s\n", opt.json.c_str());
    return 1;
  }
  if (opt.verify) {
    int failed = 0;
    for (const Scenario& s : all) {
      std::string why;
      if (!s.ran) {
        why = "did not run: " + s.error;
      } else if (!s.error.empty()) {
        why = s.error;  // e.g. the baseline tool failed: the comparison means nothing
      } else if (s.bytesLost != 0) {
        why = std::to_string(s.bytesLost) + " bytes lost";
      } else if (!s.boundMet) {
        why = "bound not met: " + s.bound;
      }
      if (!why.empty()) {
        std::printf("netbench --verify: %s: FAIL: %s\n", s.name.c_str(), why.c_str());
        ++failed;
      }
    }
    if (failed > 0) return 1;
    std::printf("netbench --verify: all %zu scenarios met their enforced bounds\n", all.size());
  }
  return 0;
}

cli::CommandRegistrar reg(
    "netbench", cmdNetbench,
    "benchmark the net plugin over veth rails (root): vs iperf3, equal split, "
    "rail failure, degrade/fail/heal/flap per phase, ping-pong");

}  // namespace
}  // namespace autopilot::bench

// Rail faults simulated by the plugin itself (NCCL_AUTOPILOT_FAULT_FILE), over loopback rails:
// no privileges needed. A simulated `down` stops all traffic on a rail without any error, as
// a dead link does; `rate` paces it. The real-fault versions (veth rails in network
// namespaces) are in test_tcp_netns_faults.cc.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "bench/net/pair.h"
#include "common/host/log_capture.h"
#include "test/net/watched_run_checks.h"

using namespace autopilot;
using namespace autopilot::bench;

namespace {

bool railLineCaptured(const std::string& role, int index, const std::string& name,
                      const std::string& transition) {
  std::string all;
  for (const auto& rec : host::LogCapture::records()) all += rec.message + "\n";
  return railLine(all, role, index, name, transition);
}

// A needle (alternatives) for any transition of `role` rail `r` to failed.
std::string failedNeedle(const std::string& role, int r, const std::string& name) {
  std::string p = role + " rail " + std::to_string(r) + " (" + name + "): ";
  return p + "healthy -> failed|" + p + "degraded -> failed|" + p + "probing -> failed|" + p +
         "standby -> failed";
}

std::string planPath(const char* what) {
  return "/tmp/apn-" + std::string(what) + "-" + std::to_string(getpid()) + ".txt";
}

// Two loopback rails paced to 400 Mbit/s each by the fault plan at `plan`.
const char* kTwoRails = "rail 0 rate 400\nrail 1 rate 400\n";

PairOptions simPair(const std::string& plan,
                    const std::vector<std::pair<std::string, std::string>>& extraEnv = {}) {
  writeFaultPlan(plan, kTwoRails);
  PairOptions o = tcpPair(2);
  o.timeoutMs = 60000;
  o.env.push_back({"NCCL_AUTOPILOT_FAULT_FILE", plan});
  o.env.insert(o.env.end(), extraEnv.begin(), extraEnv.end());
  return o;
}

// Rail 1's share of what both rails carried between two snapshots of an end (TCP counters).
double rail1Share(const EndState& later, const EndState& earlier) {
  double b0 = double(later.bytesSince(earlier, "127.0.0.1", true));
  double b1 = double(later.bytesSince(earlier, "127.0.0.2", true));
  return b0 + b1 > 0 ? b1 / (b0 + b1) : -1;
}

struct SimRun {
  StreamResult stream;
  int receiver = -1, sender = -1;
  double railShare[8] = {};       // fraction of the bytes each rail carried (sender's summary)
  bool railFailedLogged[8] = {};  // the sender logged a transition of the rail to failed
  long failures[8] = {};          // the rail's failure count in the sender's close summary
};

bool contains(const std::string& log, const std::string& needle) {
  return log.find(needle) != std::string::npos;
}

// Parses the sender's close summary ("rail N <state> X MiB, ...") into shares.
void sharesFromLog(double* shares, int rails) {
  double bytes[8] = {}, total = 0;
  for (const auto& rec : host::LogCapture::records()) {
    if (rec.message.find("send closed:") == std::string::npos) continue;
    for (int r = 0; r < rails; ++r) {
      std::string key = "rail " + std::to_string(r) + " ";
      size_t at = rec.message.find(key);
      if (at == std::string::npos) continue;
      size_t num = rec.message.find(' ', at + key.size()) + 1;
      char* end = nullptr;
      double v = std::strtod(rec.message.c_str() + num, &end);
      std::string unit(end);  // " B, ", " KiB, " ... (humanBytes)
      double scale = unit.rfind(" GiB", 0) == 0   ? 1073741824.0
                     : unit.rfind(" MiB", 0) == 0 ? 1048576.0
                     : unit.rfind(" KiB", 0) == 0 ? 1024.0
                                                  : 1.0;
      bytes[r] = v * scale;
      total += bytes[r];
    }
  }
  for (int r = 0; r < rails; ++r) shares[r] = total > 0 ? bytes[r] / total : 0;
}

// Streams `messageBytes` messages over `rails` loopback rails while `script` rewrites the
// fault plan; the sender reports how often it saw `countNeedles` in its own log.
SimRun simulated(int rails, size_t messageBytes, const std::string& initialPlan,
                 const std::function<void(const std::string& plan)>& script,
                 const std::vector<std::string>& senderMustLog,
                 const std::vector<std::string>& senderMustNotLog = {},
                 const std::vector<std::pair<std::string, std::string>>& extraEnv = {},
                 int timeoutMs = 60000) {
  std::string plan = "/tmp/apn-fault-" + std::to_string(getpid()) + ".txt";
  writeFaultPlan(plan, initialPlan);
  PairOptions o;
  o.timeoutMs = timeoutMs;
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(rails)}, {"NCCL_AUTOPILOT_FAULT_FILE", plan}};
  o.env.insert(o.env.end(), extraEnv.begin(), extraEnv.end());
  SimRun run;
  Channel results[2], shares[2];
  channelPair(&results[0], &results[1]);
  channelPair(&shares[0], &shares[1]);
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel& parent) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        PEER_CHECK(parent.sendLine("connected"), "parent");
        StreamResult r;
        if (int rc = streamReceive(ep, comm, peer, messageBytes, 8, &r)) return rc;
        results[1].send(&r, sizeof(r));
        ep.net()->closeRecv(comm);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel& parent) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        if (int rc = streamSend(ep, comm, peer, parent, messageBytes, 8)) return rc;
        // A needle "a|b" is satisfied by either alternative.
        for (const std::string& n : senderMustLog) {
          size_t seen = 0, start = 0;
          while (start <= n.size()) {
            size_t bar = n.find('|', start);
            if (bar == std::string::npos) bar = n.size();
            seen += host::LogCapture::count(-1, n.substr(start, bar - start));
            start = bar + 1;
          }
          PEER_CHECK(seen >= 1, "the sender never logged '%s'", n.c_str());
        }
        for (const std::string& n : senderMustNotLog) {
          PEER_CHECK(host::LogCapture::count(-1, n) == 0, "the sender logged '%s'", n.c_str());
        }
        ep.net()->closeSend(comm);
        SimRun facts;
        sharesFromLog(facts.railShare, rails);
        std::string summary;
        for (const auto& rec : host::LogCapture::records()) {
          if (contains(rec.message, "send closed:")) summary = rec.message;
        }
        for (int r = 0; r < rails && r < 8; ++r) {
          facts.railFailedLogged[r] =
              railLineCaptured("send", r, "lo/127.0.0." + std::to_string(r + 1), "-> failed");
          facts.failures[r] = summaryFailures(summary, r);
        }
        shares[1].send(&facts, sizeof(facts));
        return 0;
      },
      [&](Channel& toReceiver, Channel& toSender) {
        if (!toReceiver.expect("connected", 30000)) return;
        script(plan);
        toSender.sendLine("stop");
      });
  results[0].recv(&run.stream, sizeof(run.stream), 1000);
  SimRun facts;
  if (shares[0].recv(&facts, sizeof(facts), 1000)) {
    std::copy(facts.railShare, facts.railShare + 8, run.railShare);
    std::copy(facts.railFailedLogged, facts.railFailedLogged + 8, run.railFailedLogged);
    std::copy(facts.failures, facts.failures + 8, run.failures);
  }
  run.receiver = out.receiver;
  run.sender = out.sender;
  unlink(plan.c_str());
  return run;
}

void sleepMs(int ms) { usleep(useconds_t(ms) * 1000); }

// One receive of all of `buf` with tag 0, as NCCL posts it for a single send.
abi::Result irecvWhole(NetEndpoint& ep, void* comm, std::vector<uint8_t>& buf, void** req) {
  void* data = buf.data();
  size_t size = buf.size();
  int tag = 0;
  return ep.irecv(comm, 1, &data, &size, &tag, req);
}

}  // namespace

TEST_CASE("simulated: a rail going down mid-transfer loses nothing, and re-joins when up",
          "[net][tcp][simfault]") {
  const std::string plan = planPath("rejoin");
  const std::string rail1 = "lo/127.0.0.2";
  bool failedOver = false, rejoined = false, healthy = false, carried = false;
  uint64_t atFailure = 0, duringOutage = 0;
  EndState atProbing, atHealthy, later;
  WatchedRun run = runWatchedStream(simPair(plan), 1 << 20, 8, [&](StreamWatch& w) {
    EndState st;
    if (!w.waitState(
            true, [](const EndState& s) { return s.completed >= 20; }, 30, &st))
      return;
    writeFaultPlan(plan, std::string(kTwoRails) + "rail 1 down\n");
    // Events, not clocks: the rail is declared failed, then the stream goes on without it
    // while it is still down.
    failedOver = w.waitLog(false, {"send rail 1 (" + rail1 + "): ", "-> failed"}, 20);
    w.state(true, &st);
    atFailure = st.completed;
    bool moved = w.waitState(
        true, [&](const EndState& s) { return s.completed >= atFailure + 20; }, 20, &st);
    duringOutage = st.completed - atFailure;
    if (!failedOver || !moved) return;
    writeFaultPlan(plan, kTwoRails);
    rejoined = w.waitLog(false, {"send rail 1 (" + rail1 + "): failed -> probing"}, 20);
    w.state(false, &atProbing);
    healthy = w.waitLog(false, {"send rail 1 (" + rail1 + "): probing -> healthy"}, 20);
    w.state(false, &atHealthy);
    // Then 100 more messages (100 MiB, about 1 s at 2 x 400 Mbit/s).
    uint64_t from = atHealthy.completed;
    carried = w.waitState(
        false, [&](const EndState& s) { return s.completed >= from + 100; }, 30, &later);
  });
  INFO("sender log:\n" << run.senderLog);
  checkRanClean(run);
  CHECK(failedOver);
  CHECK(contains(run.senderLog, "SIMULATED fault: rail 1"));
  INFO("messages completed with rail 1 down, after it was declared failed: " << duringOutage);
  CHECK(duringOutage >= 20);
  CHECK(rejoined);
  CHECK(healthy);
  CHECK(carried);
  // The re-joined rail starts small (an eighth of its peers' bandwidth) and its share grows
  // with what it delivers: on two equal rails it reaches a real share. Measured with the
  // kernel's TCP counters of the rail's new socket, not the plugin's own bookkeeping.
  double probation = rail1Share(atHealthy, atProbing), after = rail1Share(later, atHealthy);
  INFO("rail 1's share: " << probation << " during probation, " << after << " after it");
  CHECK(probation > 0.0);
  CHECK(after > 0.3);
}

TEST_CASE("simulated: a flapping rail never loses or corrupts data", "[net][tcp][simfault]") {
  SimRun run = simulated(
      2, 256 << 10, "rail 0 rate 300\nrail 1 rate 300\n",
      [](const std::string& plan) {
        for (int i = 0; i < 6; ++i) {
          sleepMs(250);
          writeFaultPlan(plan, "rail 0 rate 300\nrail 1 rate 300\nrail 1 down\n");
          sleepMs(250);
          writeFaultPlan(plan, "rail 0 rate 300\nrail 1 rate 300\n");
        }
        sleepMs(300);
      },
      // Measurement noise on a loaded machine may call the rail degraded before it first fails.
      {"send rail 1 (lo/127.0.0.2): healthy -> failed|send rail 1 (lo/127.0.0.2): degraded -> "
       "failed"});
  CHECK(run.receiver == 0);
  CHECK(run.sender == 0);
  CHECK(run.stream.messages > 50);
  CHECK(run.stream.corrupt == 0);
}

TEST_CASE("simulated: a rate-limited rail is marked degraded and carries a small share",
          "[net][tcp][simfault]") {
  SimRun run = simulated(2, 1 << 20, "rail 0 rate 800\nrail 1 rate 40\n",
                         [](const std::string&) { sleepMs(1500); },
                         {"send rail 1 (lo/127.0.0.2): healthy -> degraded"});
  CHECK(run.receiver == 0);
  CHECK(run.sender == 0);
  CHECK(run.stream.corrupt == 0);
  // Never failed, from any state (healthy, degraded or probing): no transition to failed in
  // the log, and no failure in the plugin's own count.
  CHECK_FALSE(run.railFailedLogged[1]);
  CHECK(run.failures[1] == 0);
  // An equal split would give each rail half the bytes (and run at 2 x 40 Mbit/s).
  INFO("share of the slow rail " << run.railShare[1]);
  CHECK(run.railShare[1] > 0.0);
  CHECK(run.railShare[1] < 0.15);
}

TEST_CASE("simulated: a degraded rail that heals is re-admitted to a full share",
          "[net][tcp][simfault]") {
  SimRun run = simulated(2, 1 << 20, "rail 0 rate 800\nrail 1 rate 40\n",
                         [](const std::string& plan) {
                           sleepMs(1000);
                           writeFaultPlan(plan, "rail 0 rate 800\nrail 1 rate 800\n");
                           sleepMs(2000);
                         },
                         {"send rail 1 (lo/127.0.0.2): healthy -> degraded",
                          "send rail 1 (lo/127.0.0.2): degraded -> healthy"});
  CHECK(run.receiver == 0);
  CHECK(run.sender == 0);
  CHECK(run.stream.corrupt == 0);
  CHECK(run.railShare[1] > 0.25);
}

// A rail's rate drops a hundredfold mid-stream (400 -> 4 Mbit/s, paced by the fault plan). What
// it holds at that moment (up to 50 ms of its old rate, a few MiB) would take seconds at the
// new rate, and every message with a chunk there would wait for it. Its late chunks are copied
// to the other rail instead: the stream goes on, nothing is lost or written into a buffer
// after its receive completed (Verify::kIdle), and the slow rail is never failed. Measured
// longest gap after the drop: 1.05-1.08 s with NCCL_AUTOPILOT_NET_LATE_COPY=0, 0.17 s with
// the copies (about 30 of them).
TEST_CASE("simulated: a rail whose rate drops a hundredfold holds no message back (late copies)",
          "[net][tcp][simfault]") {
  const std::string plan = planPath("latecopy");
  PairOptions o = simPair(plan);
  StreamRun run = runStream(
      o, 1 << 20, 8, Verify::kIdle,
      [&](const std::function<void()>& mark) {
        sleepMs(1000);
        mark();
        writeFaultPlan(plan, "rail 0 rate 400\nrail 1 rate 4\n");
        sleepMs(1500);
      },
      true);
  unlink(plan.c_str());
  REQUIRE(run.ok);
  CHECK(run.result.corrupt == 0);
  CHECK(run.result.overwritten == 0);
  INFO("sender log:\n" << run.senderLog);
  INFO("longest gap after the drop " << run.result.maxGapAfterMarkSec * 1e3 << " ms");
  CHECK(run.result.maxGapAfterMarkSec >= 0);
  CHECK(run.result.maxGapAfterMarkSec < 0.7);
  CHECK(contains(run.senderLog, "late cop"));
  CHECK_FALSE(contains(run.senderLog, "; 0 late copies"));
  CHECK_FALSE(contains(run.senderLog, "-> failed"));
}

// Messages one at a time, as a ring's steps are, with rail 1 at a twentieth of rail 0: each of
// its probes would hold a message (a 64 KiB chunk takes it 26 ms, the message 5 ms on rail 0).
// They are copies of chunks that also travel on rail 0 instead: the receiver keeps the first
// to land and drops the other, also once NCCL owns the buffer again (Verify::kIdle), and the
// sender completes a message without waiting for its copy.
TEST_CASE("simulated: a slow rail is probed with copies; every byte still arrives intact",
          "[net][tcp][simfault]") {
  const std::string plan = planPath("probecopy");
  PairOptions o = simPair(plan);
  writeFaultPlan(plan, "rail 0 rate 400\nrail 1 rate 20\n");
  StreamRun run = runStream(
      o, 256 << 10, 1, Verify::kIdle, [&](const std::function<void()>&) { sleepMs(3000); }, true);
  unlink(plan.c_str());
  REQUIRE(run.ok);
  INFO("sender log:\n" << run.senderLog);
  CHECK(run.result.messages > 50);
  CHECK(run.result.corrupt == 0);
  CHECK(run.result.overwritten == 0);
  CHECK(contains(run.senderLog, "probe cop"));
  CHECK_FALSE(contains(run.senderLog, ", 0 probe copies"));
  CHECK_FALSE(contains(run.senderLog, "-> failed"));
}

TEST_CASE("simulated: a standby rail carries nothing until the active one dies",
          "[net][tcp][simfault]") {
  SimRun idle = simulated(2, 1 << 20, "rail 0 rate 400\nrail 1 rate 400\n",
                          [](const std::string&) { sleepMs(800); }, {}, {},
                          {{"NCCL_AUTOPILOT_NET_STANDBY", "lo/127.0.0.2"}});
  CHECK(idle.receiver == 0);
  CHECK(idle.sender == 0);
  CHECK(idle.stream.corrupt == 0);
  CHECK(idle.railShare[1] == 0.0);

  SimRun takeover =
      simulated(2, 1 << 20, "rail 0 rate 400\nrail 1 rate 400\n",
                [](const std::string& plan) {
                  sleepMs(400);
                  writeFaultPlan(plan, "rail 0 rate 400\nrail 1 rate 400\nrail 0 down\n");
                  sleepMs(1000);
                },
                {"send rail 0 (lo/127.0.0.1): healthy -> failed"}, {},
                {{"NCCL_AUTOPILOT_NET_STANDBY", "lo/127.0.0.2"}});
  CHECK(takeover.receiver == 0);
  CHECK(takeover.sender == 0);
  CHECK(takeover.stream.corrupt == 0);
  CHECK(takeover.railShare[1] > 0.3);
}

// The baseline mode (NCCL_AUTOPILOT_NET_FAILOVER=0, what the benchmarks compare against): a
// silent rail is never declared dead, so the connection stalls at the fault, with no error,
// no migration and no lost byte; once the rail moves bytes again the stream resumes where it
// stopped, which shows the stall was the dead rail's.
TEST_CASE("simulated: with failover off a dead rail stalls the connection",
          "[net][tcp][simfault]") {
  const std::string plan = planPath("off");
  bool progressed = false, faultApplied = false, stalled = false, resumed = false;
  double faultAt = 0;
  long failedLogs = -1, resendLogs = -1, offLogs = -1;
  EndState before, receiverStalled, senderStalled, after;
  WatchedRun run = runWatchedStream(
      simPair(plan, {{"NCCL_AUTOPILOT_NET_FAILOVER", "0"}}), 256 << 10, 8, [&](StreamWatch& w) {
        progressed = w.waitState(
            true, [](const EndState& s) { return s.completed >= 30; }, 30, &before);
        if (!progressed) return;
        writeFaultPlan(plan, std::string(kTwoRails) + "rail 1 down\n");
        faultApplied = w.waitLog(false, {"SIMULATED fault: rail 1 (lo/127.0.0.2) DOWN"}, 10);
        faultAt = nowSeconds();
        // A stall: one second without a completion. With failover, the rail's chunks would
        // move to rail 0 within its stall timeout (100 ms plus its queue at 400 Mbit/s).
        stalled = w.waitState(
            true,
            [&](const EndState& s) {
              return nowSeconds() - std::max(s.lastCompletionAt, faultAt) >= 1.0;
            },
            15, &receiverStalled);
        w.state(false, &senderStalled);
        failedLogs = w.logCount(false, "-> failed") + w.logCount(true, "-> failed");
        resendLogs = w.logCount(false, "re-sending");
        offLogs = w.logCount(false, "failover is off") + w.logCount(true, "failover is off");
        if (!stalled) return;
        writeFaultPlan(plan, kTwoRails);
        resumed = w.waitState(
            true, [&](const EndState& s) { return s.completed >= receiverStalled.completed + 30; },
            20, &after);
        // Still nothing declared dead, after the heal as well (the closing that follows the
        // script may fail rails: those lines are not counted).
        failedLogs += w.logCount(false, "-> failed") + w.logCount(true, "-> failed");
        resendLogs += w.logCount(false, "re-sending");
      });
  INFO("sender log:\n" << run.senderLog);
  INFO("receiver log:\n" << run.receiverLog);
  checkRanClean(run);
  INFO("messages before the fault " << before.completed << ", at the stall "
                                    << receiverStalled.completed << ", after healing "
                                    << after.completed);
  CHECK(progressed);
  CHECK(faultApplied);
  CHECK(stalled);
  // Stalled, not failed: no error on either end, sends held, nothing declared dead or re-sent.
  CHECK(receiverStalled.error == 0);
  CHECK(senderStalled.error == 0);
  CHECK(senderStalled.posted > senderStalled.completed);
  CHECK(failedLogs == 0);
  CHECK(resendLogs == 0);
  CHECK(offLogs == 0);
  CHECK(resumed);
  unlink(plan.c_str());
}

// NCCL gets an error only when no rail at all is left for NCCL_AUTOPILOT_NET_PEER_TIMEOUT_MS
// (2 s by default): not while one rail is left however long, not when every rail is back within
// the grace, and then, with every rail dead, after the grace and not before. The plugin's own
// figure ("no rail left for N ms") is checked against the default; the wall-clock bounds
// observed from outside have a 3x margin.
TEST_CASE("simulated: an error only when no rail is left for 2 s", "[net][tcp][simfault]") {
  const std::string plan = planPath("norail");
  const std::string rail0 = "lo/127.0.0.1", rail1 = "lo/127.0.0.2";
  const std::string bothDown = std::string(kTwoRails) + "rail 0 down\nrail 1 down\n";
  bool oneLeftFailed = false, oneLeftMoved = false, allFailed = false, backAgain = false;
  bool bothBack = false, deadFailed = false, errored = false;
  EndState oneLeft, briefAfter, atLastFailure, graceMid, senderEnd, receiverEnd;
  double lastFailureAt = 0;
  WatchedRun run = runWatchedStream(simPair(plan), 1 << 20, 8, [&](StreamWatch& w) {
    EndState st;
    if (!w.waitState(
            true, [](const EndState& s) { return s.completed >= 20; }, 30, &st))
      return;
    // 1. One rail left: rail 1 fails, and for 3 s (longer than the grace) the stream goes on.
    writeFaultPlan(plan, std::string(kTwoRails) + "rail 1 down\n");
    oneLeftFailed = w.waitLog(false, {"send rail 1 (" + rail1 + "): ", "-> failed"}, 20);
    double t = nowSeconds();
    w.state(true, &st);
    uint64_t from = st.completed;
    oneLeftMoved = w.waitState(
        true, [&](const EndState& s) { return nowSeconds() - t >= 3.0 && s.completed > from + 20; },
        30, &oneLeft);
    // 2. Every rail dead, but back well within the grace: both fail, both re-join, no error.
    writeFaultPlan(plan, bothDown);
    allFailed = w.waitLog(false, {"send rail 0 (" + rail0 + "): ", "-> failed"}, 20);
    writeFaultPlan(plan, kTwoRails);
    w.state(true, &st);
    from = st.completed;
    backAgain = w.waitState(
        true, [&](const EndState& s) { return s.completed >= from + 20; }, 30, &briefAfter);
    // Both rails back (rail 1, down since step 1, re-connects at its grown backoff).
    bothBack = w.waitLogCount(false, "send rail 0 (" + rail0 + "): failed -> probing", 1, 20) &&
               w.waitLogCount(false, "send rail 1 (" + rail1 + "): failed -> probing", 1, 20);
    // 3. Every rail dead for good: the error comes after the grace, counted from the second
    // rail's failure.
    long failed0 = w.logCount(false, failedNeedle("send", 0, rail0));
    long failed1 = w.logCount(false, failedNeedle("send", 1, rail1));
    writeFaultPlan(plan, bothDown);
    deadFailed = w.waitLogCount(false, failedNeedle("send", 0, rail0), failed0 + 1, 20) &&
                 w.waitLogCount(false, failedNeedle("send", 1, rail1), failed1 + 1, 20);
    lastFailureAt = nowSeconds();
    w.state(false, &atLastFailure);
    usleep(1000 * 1000);
    w.state(false, &graceMid);
    errored = w.waitState(
        false, [](const EndState& s) { return s.error != 0; }, 30, &senderEnd);
    w.waitState(
        true, [](const EndState& s) { return s.error != 0; }, 3, &receiverEnd);
  });
  INFO("sender log:\n" << run.senderLog);
  INFO("receiver log:\n" << run.receiverLog);
  CHECK(run.started);
  CHECK(run.outcome.receiver == 0);
  CHECK(run.outcome.sender == 0);
  CHECK(run.receiver.corrupt == 0);
  // 1.
  CHECK(oneLeftFailed);
  CHECK(oneLeftMoved);
  CHECK(oneLeft.error == 0);
  // 2.
  CHECK(allFailed);
  CHECK(backAgain);
  CHECK(briefAfter.error == 0);
  CHECK(bothBack);
  // 3. The plugin's own count: exactly one "no rail left" error, after at least the grace.
  CHECK(deadFailed);
  CHECK(errored);
  CHECK(senderEnd.error == int32_t(abi::kRemoteError));
  CHECK(atLastFailure.error == 0);
  CHECK(graceMid.error == 0);
  size_t at = run.senderLog.find("send: no rail left for ");
  REQUIRE(at != std::string::npos);
  long ms = std::atol(run.senderLog.c_str() + at + std::strlen("send: no rail left for "));
  INFO("sender: no rail left for " << ms << " ms; error seen "
                                   << (senderEnd.errorAt - lastFailureAt)
                                   << " s after the last rail's failure was seen");
  CHECK(ms >= 2000);
  CHECK(ms < 6000);
  CHECK(senderEnd.errorAt - lastFailureAt < 6.0);
  CHECK(run.senderLog.find("no rail left for", at + std::strlen("send: no rail left for ")) ==
        std::string::npos);
  // The receiver is not required to fail here: with every link dead it hears nothing, which it
  // cannot tell from a sender that has nothing to send yet (NCCL may post receives long before
  // the matching sends), so it waits, as NCCL's own transports do, until NCCL aborts. Whether
  // it noticed depends on timing (an announcement still queued when the links died): it is
  // only reported.
  INFO("receiver error after the last failure: " << receiverEnd.error);
  unlink(plan.c_str());
}

// A rail that loses its inbound direction at the sender: data lands, its acknowledgements never
// come back. The sender fails the rail and re-sends copies of chunks the receiver already has;
// the receiver completes without them and, with nothing more posted, stops calling test() (as
// NCCL's proxy does when it has nothing to wait for). Every send must still complete (the
// receiver's watermark says so), with no error and every byte checked. The last message of
// each transfer is the one at stake: a fresh connection has both rails live, so it always
// puts chunks on the deaf rail.
TEST_CASE("simulated: lost acknowledgements never hold a send whose data landed",
          "[net][tcp][simfault]") {
  std::string plan = "/tmp/apn-deaf-" + std::to_string(getpid()) + ".txt";
  writeFaultPlan(plan, "rail 1 deaf\n");
  PairOptions o = tcpPair(2);
  o.timeoutMs = 60000;
  o.senderEnv = {{"NCCL_AUTOPILOT_FAULT_FILE", plan}};
  const std::vector<Message> transfers[] = {
      {Message{size_t(4) << 20, size_t(4) << 20}},
      {Message{size_t(1) << 20, size_t(1) << 20},
       Message{(size_t(16) << 20) + 3, (size_t(16) << 20) + 3}},
      {Message{300000, 300000}}};
  for (const auto& msgs : transfers) {
    DYNAMIC_SECTION(msgs.size() << " message(s), the last of " << msgs.back().size << " bytes") {
      PairOutcome out = transferMessages(o, msgs, 1);
      CHECK(out.receiver == 0);
      CHECK(out.sender == 0);
    }
  }
  unlink(plan.c_str());
}

// A send the receiver completed must not wait on any rail. Rail 1 is deaf at the sender (its
// chunks land, their acknowledgements are lost), so it fails and copies of its chunks go to
// rail 0, queued behind rail 0's own chunks, paced to 2 Mbit/s. The receiver completes from
// the originals while rail 0 writes the first copy (256 KiB: about 1 s at that rate); its
// watermark reaches the sender on rail 0, and 300 ms later rail 0 goes silent for good. Rail 0
// then holds only that copy, which does not count as held data (the receiver may rightly never
// read it), so nothing fails the rail: a send waiting for the copy's write to finish would
// wait forever (it did: item 7 of the net contract issue). It must be done at once.
TEST_CASE("simulated: a send the receiver completed never waits on a rail writing a copy",
          "[net][tcp][simfault]") {
  const std::string plan = planPath("stuck");
  writeFaultPlan(plan, "rail 0 rate 2\nrail 1 deaf\n");
  PairOptions o = tcpPair(2);
  o.timeoutMs = 60000;
  // Rail 1's chunks must be re-sent after it fails, not copied while it is merely late.
  o.senderEnv = {{"NCCL_AUTOPILOT_FAULT_FILE", plan}, {"NCCL_AUTOPILOT_NET_LATE_COPY", "0"}};
  const size_t kBytes = 2 << 20;
  double sendDoneAt = 0;
  Channel times[2];
  channelPair(&times[0], &times[1]);
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel& parent) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(kBytes);
        void* req = nullptr;
        PEER_CHECK(irecvWhole(ep, comm, buf, &req) == abi::kSuccess, "irecv");
        PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "receive");
        PEER_CHECK(checkPattern(buf.data(), buf.size(), 7) < 0, "data");
        PEER_CHECK(parent.sendLine("received"), "parent");
        // Nothing more posted: like NCCL's proxy, this side makes no more calls until the end.
        PEER_CHECK(peer.expect("sender done", 30000), "the sender did not finish");
        ep.net()->closeRecv(comm);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(kBytes);
        fillPattern(buf.data(), buf.size(), 7);
        void* req = nullptr;
        PEER_CHECK(ep.isend(comm, buf.data(), buf.size(), 0, &req) == abi::kSuccess, "isend");
        abi::Result r = ep.wait(req, nullptr, 20);
        double doneAt = nowSeconds();
        times[1].send(&doneAt, sizeof(doneAt));
        PEER_CHECK(r == abi::kSuccess, "the send never completed (%d)", int(r));
        PEER_CHECK(host::LogCapture::count(-1, "unacknowledged chunk") >= 1,
                   "rail 1's chunks were never re-sent: the scenario did not happen");
        peer.sendLine("sender done");
        ep.net()->closeSend(comm);
        return 0;
      },
      [&](Channel& toReceiver, Channel&) {
        if (!toReceiver.expect("received", 30000)) return;
        double receivedAt = nowSeconds();
        sleepMs(300);
        writeFaultPlan(plan, "rail 0 down\nrail 1 deaf\n");
        double downAt = nowSeconds();
        if (times[0].recv(&sendDoneAt, sizeof(sendDoneAt), 30000)) {
          INFO("send done " << (sendDoneAt - receivedAt) * 1e3 << " ms after the receive, "
                            << (sendDoneAt - downAt) * 1e3 << " ms after rail 0 went silent");
          CHECK(sendDoneAt < downAt);
        }
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
  CHECK(sendDoneAt > 0);
  unlink(plan.c_str());
}

TEST_CASE("simulated: an announcement stranded on a rail that went down is repeated elsewhere",
          "[net][tcp][simfault]") {
  // The demo's hang at the rail failure (the quick loopback scenario, about 1 run in 10 beside a
  // CPU hog, before receivers repeated their announcements): a receive was announced on rail 0
  // and the sender's TCP acknowledged the frame, then rail 0 went down before the sender read
  // it. Neither side held anything on rail 0 (the receiver's frame counts as taken, the sender
  // had no data for a receive it never saw), so no detector could fail the rail, and the
  // sender waited for an announcement while the receiver waited for data. Here the sender
  // makes no call until rail 0 is down, so it cannot read the announcement in time.
  const std::string plan = planPath("stranded");
  PairOptions o = simPair(plan);
  const size_t kBytes = 1 << 20;
  PairOutcome out = runPair(
      o,
      [&](NetEndpoint& ep, Channel& peer, Channel& parent) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        std::vector<uint8_t> buf(kBytes);
        void* req = nullptr;
        PEER_CHECK(irecvWhole(ep, comm, buf, &req) == abi::kSuccess, "irecv");
        PEER_CHECK(parent.sendLine("posted"), "parent");
        PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "the receive never completed");
        PEER_CHECK(checkPattern(buf.data(), buf.size(), 3) < 0, "data");
        PEER_CHECK(host::LogCapture::count(-1, "announcing them again") >= 1,
                   "the receive completed without being announced again: the scenario did "
                   "not happen");
        PEER_CHECK(peer.expect("sender done", 30000), "the sender did not finish");
        ep.net()->closeRecv(comm);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel& parent) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        PEER_CHECK(parent.expect("go", 30000), "no go from the parent");
        std::vector<uint8_t> buf(kBytes);
        fillPattern(buf.data(), buf.size(), 3);
        void* req = nullptr;
        PEER_CHECK(ep.isend(comm, buf.data(), buf.size(), 0, &req, 30) == abi::kSuccess,
                   "the send was never matched to the receive");
        PEER_CHECK(ep.wait(req, nullptr, 30) == abi::kSuccess, "the send never completed");
        peer.sendLine("sender done");
        ep.net()->closeSend(comm);
        return 0;
      },
      [&](Channel& toReceiver, Channel& toSender) {
        if (!toReceiver.expect("posted", 30000)) return;
        sleepMs(100);  // the announcement is in the sender's socket, acknowledged
        writeFaultPlan(plan, "rail 0 down\nrail 1 rate 400\n");
        sleepMs(300);  // both ends have read the plan
        toSender.sendLine("go");
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
  unlink(plan.c_str());
}

TEST_CASE("simulated: a rail one connection found dead gets no data from the others",
          "[net][tcp][simfault][news]") {
  // Two connections of one process over the same two rails. A is busy when rail 1 goes down
  // and finds it dead by its own detector; B is idle then (NCCL progresses a comm only through
  // its requests). B's next send must go on rail 0 only, with nothing of it on rail 1 to stall
  // or to replay, and B fails rail 1 too.
  //
  // The premise is that both rails are healthy when rail 1 goes down. A failover during the
  // fault-free warm-up (a false one, not fixed yet: it happens a few times in a hundred runs at
  // the first chunks of a connection) breaks it; the attempt then says so and is repeated, at
  // most three times, and three broken attempts fail the case.
  const std::string plan = planPath("news");
  const std::string rail1 = "lo/127.0.0.2";
  PairOptions o = simPair(plan);
  const size_t kSmall = 8 << 20, kBig = 64 << 20, kMid = 32 << 20;
  constexpr int kPremiseBroken = 42;
  PairOutcome out;
  for (int attempt = 0; attempt < 3; ++attempt) {
    writeFaultPlan(plan, kTwoRails);
    out = runPair(
        o,
        [&](NetEndpoint& ep, Channel& peer, Channel&) {
          void *a = nullptr, *b = nullptr;
          if (int rc = listenAndAccept(ep, peer, &a)) return rc;
          if (int rc = listenAndAccept(ep, peer, &b)) return rc;
          // Every receive of the scenario, in order per connection, driven until the sender says
          // it is done.
          std::vector<std::vector<uint8_t>> bufs;
          std::vector<void*> reqs;
          for (auto [comm, size] : {std::pair{a, kSmall}, {a, kBig}, {b, kSmall}, {b, kMid}}) {
            bufs.emplace_back(size);
            void* data = bufs.back().data();
            size_t n = size;
            int tag = 0;
            void* req = nullptr;
            PEER_CHECK(ep.irecv(comm, 1, &data, &n, &tag, &req) == abi::kSuccess, "irecv");
            reqs.push_back(req);
          }
          std::vector<bool> done(reqs.size(), false);
          while (!peer.readable()) {
            for (size_t i = 0; i < reqs.size(); ++i) {
              if (done[i]) continue;
              int flag = 0;
              PEER_CHECK(ep.test(reqs[i], &flag, nullptr) == abi::kSuccess, "receive %zu", i);
              done[i] = flag != 0;
            }
          }
          std::string line;
          PEER_CHECK(peer.recvLine(&line, 1000), "sender");
          if (line == "premise broken") return kPremiseBroken;
          PEER_CHECK(line == "done", "sender: %s", line.c_str());
          for (size_t i = 0; i < reqs.size(); ++i) PEER_CHECK(done[i], "receive %zu incomplete", i);
          ep.net()->closeRecv(a);
          ep.net()->closeRecv(b);
          return 0;
        },
        [&](NetEndpoint& ep, Channel& peer, Channel&) {
          void *a = nullptr, *b = nullptr;
          if (int rc = receiveHandleAndConnect(ep, peer, &a)) return rc;
          if (int rc = receiveHandleAndConnect(ep, peer, &b)) return rc;
          std::vector<uint8_t> data(kBig, 7);
          auto send = [&](void* comm, size_t size) {
            void* req = nullptr;
            if (ep.isend(comm, data.data(), size, 0, &req) != abi::kSuccess) return false;
            return ep.wait(req, nullptr, 30) == abi::kSuccess;
          };
          // Both connections carry data on both rails first.
          PEER_CHECK(send(a, kSmall) && send(b, kSmall), "warm-up sends");
          if (host::LogCapture::count(abi::kLogWarn, "-> failed") > 0) {
            std::fprintf(stderr, "a rail failed with no fault injected: the premise is broken\n");
            peer.sendLine("premise broken");
            return kPremiseBroken;
          }
          // Rail 1 dies under A's 64 MiB (about 0.7 s at 2 x 400 Mbit/s).
          writeFaultPlan(plan, std::string(kTwoRails) + "rail 1 down\n");
          PEER_CHECK(send(a, kBig), "A's send with rail 1 down");
          PEER_CHECK(railLineCaptured("send", 1, rail1, "-> failed"), "A did not find rail 1 dead");
          // B's 32 MiB: what is logged while it runs is B's (A has nothing in flight).
          size_t from = host::LogCapture::records().size();
          double t0 = nowSeconds();
          PEER_CHECK(send(b, kMid), "B's send with rail 1 down");
          double took = nowSeconds() - t0;
          std::string during;
          const auto& records = host::LogCapture::records();
          for (size_t i = from; i < records.size(); ++i) during += records[i].message + "\n";
          std::fprintf(stderr, "B's 32 MiB with rail 1 dead took %.3f s; B logged:\n%s", took,
                       during.c_str());
          PEER_CHECK(contains(during, "rail 1 (" + rail1 +
                                          "): another connection of this process "
                                          "found it dead"),
                     "B was not told");
          // B fails rail 1 while its send runs: on the news (silence there while the peer answers
          // on rail 0), or by its own detector when an acknowledgement of its warm-up was still
          // due there. Either way nothing of the new send was on rail 1: nothing to re-send.
          PEER_CHECK(railLine(during, "send", 1, rail1, "-> failed"), "B kept rail 1");
          PEER_CHECK(!contains(during, "re-sending"), "B put data on rail 1 and replayed it");
          writeFaultPlan(plan, kTwoRails);
          peer.sendLine("done");
          ep.net()->closeSend(a);
          ep.net()->closeSend(b);
          return 0;
        });
    if (out.sender != kPremiseBroken) break;
  }
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

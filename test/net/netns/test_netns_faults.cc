// Real rail faults over veth rails between two network namespaces: a rail taken down
// mid-transfer, a flapping rail, a rail rate-limited with tbf, and the rail healed. Sender in
// namespace A, receiver in B, data checked end to end. Root only: main() below exits 77 with the
// reason where the test bed cannot be built (CTest's SKIP_RETURN_CODE), and 1 under CI=true,
// where every test must run.
#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/net/netns.h"
#include "bench/net/pair.h"
#include "common/host/log_capture.h"
#include "test/net/watched_run_checks.h"

using namespace autopilot;
using namespace autopilot::bench;

namespace {

void sleepMs(int ms) { usleep(useconds_t(ms) * 1000); }

struct NetnsRun {
  StreamResult stream;
  int receiver = -1, sender = -1;
  std::string senderLog;  // the sender's rail state changes and close summary
};

// Streams over `bed`'s rails while `script` breaks things; the sender returns its log lines
// about rails (state changes, summary) for the test to inspect.
NetnsRun stream(const NetnsTestbed& bed, size_t messageBytes, const std::function<void()>& script) {
  PairOptions o;
  o.receiverEnv = {{"NCCL_AUTOPILOT_IFNAME", bed.ifnamePrefix('B')}};
  o.senderEnv = {{"NCCL_AUTOPILOT_IFNAME", bed.ifnamePrefix('A')}};
  o.receiverSetup = [&] { bed.enter('B'); };
  o.senderSetup = [&] { bed.enter('A'); };
  NetnsRun run;
  Channel results[2], logs[2];
  channelPair(&results[0], &results[1]);
  channelPair(&logs[0], &logs[1]);
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
        ep.net()->closeSend(comm);
        std::string lines;
        for (const auto& rec : host::LogCapture::records()) {
          if (rec.message.find("send") != std::string::npos) lines += rec.message + "\n";
        }
        logs[1].sendLine(lines);
        return 0;
      },
      [&](Channel& toReceiver, Channel& toSender) {
        if (!toReceiver.expect("connected", 30000)) return;
        script();
        toSender.sendLine("stop");
      });
  results[0].recv(&run.stream, sizeof(run.stream), 5000);
  logs[0].recvLine(&run.senderLog, 5000);
  run.receiver = out.receiver;
  run.sender = out.sender;
  return run;
}

bool contains(const std::string& log, const std::string& needle) {
  return log.find(needle) != std::string::npos;
}

PairOptions inNamespaces(const NetnsTestbed& bed) {
  PairOptions o;
  o.receiverEnv = {{"NCCL_AUTOPILOT_IFNAME", bed.ifnamePrefix('B')}};
  o.senderEnv = {{"NCCL_AUTOPILOT_IFNAME", bed.ifnamePrefix('A')}};
  o.receiverSetup = [&bed] { bed.enter('B'); };
  o.senderSetup = [&bed] { bed.enter('A'); };
  return o;
}

}  // namespace

TEST_CASE("veth: a rail taken down mid-transfer loses nothing; it re-joins when up",
          "[net][netns]") {
  NetnsTestbed bed(2);
  REQUIRE(bed.ok());
  const std::string rail1 = bed.ifname('A', 1);
  const std::string send1 = "send rail 1 (" + rail1 + "): ";
  bool failedOver = false, moved = false, rejoined = false, healthy = false, carried = false;
  uint64_t duringOutage = 0;
  EndState atHealthy, ramped, later;
  WatchedRun run = runWatchedStream(inNamespaces(bed), 4 << 20, 8, [&](StreamWatch& w) {
    EndState st;
    if (!w.waitState(
            true, [](const EndState& s) { return s.completed >= 20; }, 30, &st))
      return;
    bed.linkDown(1);
    // Events, not clocks: the rail is declared failed and the stream goes on while the link is
    // still down. (Its chunks are re-sent on rail 0 unless all had landed: a rail that dies
    // after its data did may hold only copies the receiver no longer needs.) The sender's own
    // interface went down: it says so at the first stalled check, not after a stall timeout.
    failedOver = w.waitLog(false, {send1, "-> failed: its interface " + rail1 + " is down"}, 20);
    w.state(true, &st);
    uint64_t from = st.completed;
    moved = w.waitState(
        true, [&](const EndState& s) { return s.completed >= from + 20; }, 20, &st);
    duringOutage = st.completed - from;
    bed.linkUp(1);
    rejoined = w.waitLog(false, {send1 + "failed -> probing"}, 20);
    healthy = w.waitLog(false, {send1 + "probing -> healthy"}, 20);
    w.state(false, &atHealthy);
    // 100 more messages (400 MiB) while the re-joined rail's share grows, then 100 more on
    // both rails.
    carried =
        w.waitState(
            false, [&](const EndState& s) { return s.completed >= atHealthy.completed + 100; }, 30,
            &ramped) &&
        w.waitState(
            false, [&](const EndState& s) { return s.completed >= ramped.completed + 100; }, 30,
            &later);
  });
  INFO("sender log:\n" << run.senderLog);
  checkRanClean(run);
  CHECK(failedOver);
  INFO("messages completed with the link down, after the rail was declared failed: "
       << duringOutage);
  CHECK(moved);
  CHECK(rejoined);
  // Lost with the sender's own link, the rail is re-connected when the link returns, not when
  // the failback backoff (grown while the link was down) next allows.
  CHECK(contains(run.senderLog, "interface " + rail1 + " is up again; re-connecting now"));
  CHECK(healthy);
  CHECK(carried);
  // The re-joined rail starts small and grows with what it delivers: on two equal rails it
  // carries a real share again (the kernel's counters of its new socket). How fast it grows
  // depends on the host: one CI run gave it 0.23 of the first 100 messages (400 MiB), where
  // our 2-core machine gives it 0.47-0.50 even under a CPU hog, so the share is checked over
  // the 100 after those; the first window's is reported.
  auto rail1Share = [&](const EndState& to, const EndState& from) {
    double b0 = double(to.bytesSince(from, bed.address('A', 0), true));
    double b1 = double(to.bytesSince(from, bed.address('A', 1), true));
    return b0 + b1 > 0 ? b1 / (b0 + b1) : -1;
  };
  INFO("rail 1's share of the first 100 messages after the re-join: " << rail1Share(ramped,
                                                                                    atHealthy));
  double share = rail1Share(later, ramped);
  INFO("rail 1's share of the next 100: " << share);
  CHECK(share > 0.3);
}

TEST_CASE("veth: an idle connection over a rail another connection found dead leaves it too",
          "[net][netns]") {
  // Two connections between the same two processes over the same rails, as in a ring of two:
  // A streams to B, and B's connection to A is idle (A has a receive posted on it, nothing is
  // sent). Rail 1's link goes down. A's streaming send comm fails the rail (its own interface is
  // down). A's idle receive comm holds nothing on the rail, so no stall, timeout or
  // unacknowledged byte of its own shows the loss; what tells it is the news that the other
  // connection failed the rail, together with its own interface being down. Without acting on
  // that it would keep the dead rail through the outage and count a failover only after the
  // repair, when every rail is up again.
  NetnsTestbed bed(2);
  REQUIRE(bed.ok());
  const std::string rail1 = bed.ifname('A', 1);
  const std::string down = "-> failed: its interface " + rail1 + " is down or lost its carrier";
  bool busyFailed = false, idleFailed = false, moved = false;
  WatchedRun run = runWatchedStream(
      inNamespaces(bed), 4 << 20, 8,
      [&](StreamWatch& w) {
        EndState st;
        if (!w.waitState(
                true, [](const EndState& s) { return s.completed >= 20; }, 30, &st))
          return;
        bed.linkDown(1);
        busyFailed = w.waitLog(false, {"send rail 1 (" + rail1 + "): ", down}, 20);
        // While the link is still down.
        idleFailed = w.waitLog(false,
                               {"recv rail 1 (" + rail1 + "): ", down,
                                " (checked when another connection of this process found the "
                                "rail dead)"},
                               20);
        w.state(true, &st);
        const uint64_t from = st.completed;
        moved = w.waitState(
            true, [&](const EndState& s) { return s.completed >= from + 10; }, 20);
        bed.linkUp(1);
      },
      /*idleCompanion=*/true);
  INFO("sender log:\n" << run.senderLog);
  checkRanClean(run);
  CHECK(run.sender.corrupt == 0);  // nothing was sent on the idle connection
  CHECK(busyFailed);
  CHECK(idleFailed);
  CHECK(moved);
}

TEST_CASE("veth: a path that goes silent with its links up is failed by the stall check",
          "[net][netns]") {
  // A blackhole route on host A for B's rail-1 address: A's packets to B on that rail vanish
  // while every interface stays up (a failed switch port or a peer's dead NIC look like this
  // from here), so only silence can tell. TCP's retransmission timeout extends the allowance
  // (a lost segment is resent only when it fires); the stall check must still fail the rail.
  NetnsTestbed bed(2);
  REQUIRE(bed.ok());
  const std::string rail1 = bed.ifname('A', 1);
  const std::string send1 = "send rail 1 (" + rail1 + "): ";
  const std::string recv1 = "recv rail 1 (" + bed.ifname('B', 1) + "): ";
  const std::string blackhole = "blackhole " + bed.address('B', 1) + "/32";
  bool failedOver = false, moved = false, rejoined = false;
  WatchedRun run = runWatchedStream(inNamespaces(bed), 4 << 20, 8, [&](StreamWatch& w) {
    EndState st;
    if (!w.waitState(
            true, [](const EndState& s) { return s.completed >= 20; }, 30, &st))
      return;
    REQUIRE(bed.exec('A', "ip route add " + blackhole) == 0);
    // Either end's stall check may call it first: the sender's (its chunks make no progress)
    // and the receiver's (its control frames are not taken) wait out the same retransmission
    // timer, about 250 ms here, and the one that fails the rail first resets the connection,
    // which the other end then reports as its reason.
    const double deadline = bench::nowSeconds() + 20;
    while (!failedOver && bench::nowSeconds() < deadline) {
      failedOver = w.logHas(false, {send1, "-> failed: no progress"}) ||
                   w.logHas(true, {recv1, "-> failed: the sender has taken none of our control"});
      if (!failedOver) sleepMs(20);
    }
    w.state(true, &st);
    uint64_t from = st.completed;
    moved = w.waitState(
        true, [&](const EndState& s) { return s.completed >= from + 20; }, 20, &st);
    bed.exec('A', "ip route del " + blackhole);
    rejoined = w.waitLog(false, {send1 + "failed -> probing"}, 20);
  });
  INFO("sender log:\n" << run.senderLog);
  checkRanClean(run);
  CHECK(failedOver);
  CHECK(moved);
  CHECK(rejoined);
  // No interface ever went down, so that reason must not appear.
  CHECK_FALSE(contains(run.senderLog, "is down or lost its carrier"));
  CHECK_FALSE(contains(run.receiverLog, "is down or lost its carrier"));
}

TEST_CASE("veth: a live rail behind a deep queue that slows tenfold is never failed",
          "[net][netns]") {
  // As the demo shapes its rails: queues of up to 400 ms, and a rate dropped from 250 to
  // 25 Mbit/s in place (`tc qdisc change`), three times. What the rail already queued drains ten
  // times slower and TCP's round trip jumps with it; the rail stays alive throughout, so it must
  // never be failed. With the bucket the demo had (32 KiB, smaller than the GSO packets already
  // queued) tbf never sent those packets, the rail carried nothing for seconds and was failed as
  // dead: every run of this test did so, and the demo saw 2 s with no collective completing.
  NetnsTestbed bed(2);
  REQUIRE(bed.ok());
  const std::string dev = " dev " + bed.ifname('A', 1) + " root tbf ";
  auto tbf = [&](const char* verb, int mbit) {
    return bed.exec('A', std::string("tc qdisc ") + verb + dev + tbfArguments(mbit, 400));
  };
  REQUIRE(tbf("replace", 250) == 0);
  REQUIRE(bed.shape(0, 250));
  NetnsRun run = stream(bed, 4 << 20, [&] {
    for (int i = 0; i < 3; ++i) {
      sleepMs(1500);
      REQUIRE(tbf("change", 25) == 0);
      sleepMs(2500);
      REQUIRE(tbf("change", 250) == 0);
    }
    sleepMs(1000);
  });
  INFO(run.senderLog);
  CHECK(run.receiver == 0);
  CHECK(run.sender == 0);
  CHECK(run.stream.corrupt == 0);
  CHECK(run.stream.messages > 20);
  CHECK_FALSE(contains(run.senderLog, "-> failed"));
}

TEST_CASE("veth: a flapping rail never loses or corrupts data", "[net][netns]") {
  NetnsTestbed bed(2);
  REQUIRE(bed.ok());
  for (int r = 0; r < 2; ++r) bed.shape(r, 1000);
  NetnsRun run = stream(bed, 1 << 20, [&] {
    for (int i = 0; i < 5; ++i) {
      sleepMs(300);
      bed.linkDown(1);
      sleepMs(300);
      bed.linkUp(1);
    }
    sleepMs(500);
  });
  INFO(run.senderLog);
  CHECK(run.receiver == 0);
  CHECK(run.sender == 0);
  CHECK(run.stream.corrupt == 0);
  CHECK(run.stream.messages > 50);
  CHECK((contains(run.senderLog, "healthy -> failed") ||
         contains(run.senderLog, "degraded -> failed")));
}

TEST_CASE("veth: a rail rate-limited with tbf gets a small share; healed, it recovers",
          "[net][netns]") {
  // 3 x 400 Mbit/s and one rail at 50: an 8x gap, and rates a loaded 2-core machine still
  // drives (at 1 Gbit/s per rail the CPU, not tbf, set the rails' speeds, and the slow rail was
  // then rightly not slow enough to be called degraded).
  NetnsTestbed bed(4);
  REQUIRE(bed.ok());
  for (int r = 0; r < 4; ++r) bed.shape(r, 400);
  bed.shape(3, 50);
  const std::string rail3 = bed.ifname('A', 3);
  const std::string send3 = "send rail 3 (" + rail3 + "): ";
  // Events, not clocks: the rail is found degraded, then the stream runs 2 s more.
  bool found = false;
  WatchedRun degraded = runWatchedStream(inNamespaces(bed), 4 << 20, 8, [&](StreamWatch& w) {
    found = w.waitLog(false, {send3 + "healthy -> degraded"}, 20);
    sleepMs(2000);
  });
  INFO(degraded.senderLog);
  checkRanClean(degraded);
  CHECK(found);
  // Slow but alive: never failed, from any state (log and the plugin's own count).
  CHECK_FALSE(railLine(degraded.senderLog, "send", 3, rail3, "-> failed"));
  CHECK(summaryFailures(degraded.senderLog, 3) == 0);
  // Its share matches its speed (50 of 1250 Mbit/s: 0.04), not an equal split's 0.25.
  double share = summaryShare(degraded.senderLog, 3, 4);
  INFO("share of the slow rail " << share);
  CHECK(share > 0.0);
  CHECK(share < 0.15);
  // An equal split is capped at 4 x 50 Mbit/s; the bound is a third of the 1.25 Gbit/s
  // available (netbench measures the real ratio). Measured by the receiver over the whole run.
  double seconds = degraded.receiver.lastCompletionAt - degraded.receiverStartedAt;
  double gbps = double(degraded.receiver.completed) * (4 << 20) * 8 / seconds / 1e9;
  INFO("throughput " << gbps << " Gbit/s of 1.25 available");
  CHECK(gbps > 1.25 / 3);

  bool again = false, recovered = false;
  WatchedRun healed = runWatchedStream(inNamespaces(bed), 4 << 20, 8, [&](StreamWatch& w) {
    again = w.waitLog(false, {send3 + "healthy -> degraded"}, 20);
    bed.shape(3, 400);
    recovered = w.waitLog(false, {send3 + "degraded -> healthy"}, 20);
  });
  INFO(healed.senderLog);
  checkRanClean(healed);
  CHECK(again);
  CHECK(recovered);
  CHECK_FALSE(railLine(healed.senderLog, "send", 3, rail3, "-> failed"));
}

int main(int argc, char** argv) {
  std::string why;
  if (!NetnsTestbed::available(&why)) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true") {
      std::fprintf(stderr, "net_netns_tests: cannot run (%s), and CI=true: a skip is a failure\n",
                   why.c_str());
      return 1;
    }
    std::printf("net_netns_tests skipped: %s\n", why.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

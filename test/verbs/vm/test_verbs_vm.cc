// The verbs transport on real RDMA verbs (Soft-RoCE in the qemu VM of rxe-vm.sh, run by
// run-vm-tests.sh): the plugin .so driven through the harness from two processes, the sender on
// rxe0 + rxe2 and the receiver on rxe1 + rxe3 (two NICs each, one veth wire per NIC pair), with
// the same transfer and stream drivers as the TCP transport's tests (bench/net/pair.h). Faults
// are real: a wire's link taken down, 100% loss on a wire, the receiver's queue pair destroyed
// without a word to the sender; each must lose nothing, and the NIC must re-join when the fault
// is gone. Every figure is printed as a "FIGURE" line for the run's report.
//
// Outside the VM (no RDMA device) every case skips with a message.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "bench/net/pair.h"
#include "common/host/log_capture.h"
#include "test/net/conformance.h"

using namespace autopilot;
using namespace autopilot::bench;

namespace {

bool haveTestBed(std::string* why) {
  if (access("/sys/class/infiniband/rxe3", F_OK) != 0) {
    *why = "no rxe3 device: this test runs inside the qemu test bed (ctest -R verbs_vm)";
    return false;
  }
  return true;
}

// Inside the VM the devices must exist: a case without them fails (it used to warn and pass).
#define REQUIRE_TESTBED()            \
  std::string whyNot;                \
  if (!haveTestBed(&whyNot)) {       \
    FAIL("no test bed: " << whyNot); \
  }

void sleepMs(int ms) { usleep(useconds_t(ms) * 1000); }

void run(const char* command) {
  int rc = std::system(command);
  INFO(command);
  CHECK(rc == 0);
}

// Streams 1 MiB messages, 8 in flight, over both NICs while `script` injects a fault (calling
// `mark` at that moment) and repairs it.
StreamRun stream(const PairOptions& options,
                 const std::function<void(const std::function<void()>&)>& script) {
  return runStream(options, 1 << 20, 8, Verify::kFull, script, true);
}

// The text after the first `key` that follows `from` in `log` ("?" when absent), to the end of
// its line.
std::string after(const std::string& log, const std::string& from, const std::string& key) {
  size_t at = log.find(from);
  if (at != std::string::npos) at = log.find(key, at + from.size());
  if (at == std::string::npos) return "?";
  at += key.size();
  return log.substr(at, log.find('\n', at) - at);
}

// `faultAt`: when the fault was in place (the command that injects it returned; steady clock =
// CLOCK_MONOTONIC, as the plugin's log uses). A failure found by an event can precede it.
void report(const char* name, const StreamRun& run, double faultAt) {
  std::string rail0 = "send rail 0 (" + verbsRail(false, 0) + "): ";
  double failedAt =
      std::atof(after(run.senderLog, "ib send: rail 0 failed at monotonic ", "").c_str());
  std::printf(
      "FIGURE %s: fault -> sender's rail 0 failed %.1f ms (%s); -> first replayed chunk "
      "completed on rail 1: %s; receiver: fault -> first completion %.1f ms, longest gap "
      "after the fault %.1f ms; %llu messages (%.1f MiB) in %.2f s, %llu corrupt\n",
      name, failedAt > 0 ? (failedAt - faultAt) * 1e3 : -1.0,
      after(run.senderLog, rail0, "-> failed: ").c_str(),
      after(run.senderLog, "the first replayed chunk completed on rail 1 ", "").c_str(),
      run.result.markToFirstCompletionSec * 1e3, run.result.maxGapAfterMarkSec * 1e3,
      (unsigned long long)run.result.messages, double(run.result.bytes) / (1 << 20),
      run.result.seconds, (unsigned long long)run.result.corrupt);
  std::fflush(stdout);
}

void checkLossless(const StreamRun& run) {
  INFO("sender log:\n" << run.senderLog);
  INFO("receiver log:\n" << run.receiverLog);
  CHECK(run.outcome.receiver == 0);
  CHECK(run.outcome.sender == 0);
  CHECK(run.ok);
  CHECK(run.result.corrupt == 0);
  CHECK(run.result.messages > 20);
  CHECK(run.result.markToFirstCompletionSec >= 0);
}

}  // namespace

TEST_CASE("rdma: transfers of 0 B to 64 MiB arrive intact over 2 NICs", "[verbs]") {
  REQUIRE_TESTBED();
  double start = nowSeconds();
  PairOutcome out = transferMessages(verbsPair(2), sizeSweep(64 << 20), 1);
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
  std::printf("FIGURE transfers 0 B..64 MiB over 2 NICs: %s in %.2f s\n",
              out.receiver == 0 && out.sender == 0 ? "intact" : "FAILED", nowSeconds() - start);
  std::fflush(stdout);
}

TEST_CASE("rdma: iflush reads through every NIC that delivered data", "[verbs]") {
  REQUIRE_TESTBED();
  std::vector<Message> msgs = sizeSweep(4 << 20);
  PairOutcome out = runPair(
      verbsPair(2),
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        if (int rc = receiveMessages(ep, comm, msgs, 2, true)) return rc;
        // Both NICs carried data, so both flushed through their loopback queue pairs.
        PEER_CHECK(host::LogCapture::count(-1, "loopback queue pair for flushes ready") == 2,
                   "flush queue pairs: %zu",
                   host::LogCapture::count(-1, "loopback queue pair for flushes ready"));
        PEER_CHECK(peer.expect("sender done", 30000), "sender did not finish");
        ep.net()->closeRecv(comm);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        int rc = sendMessages(ep, comm, msgs, 2);
        peer.sendLine("sender done");
        ep.net()->closeSend(comm);
        return rc;
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE("rdma: many small and mid-size messages, 24 in flight, over 2 NICs", "[verbs]") {
  REQUIRE_TESTBED();
  std::vector<Message> msgs;
  for (int i = 0; i < 200; ++i) {
    size_t s = (i % 5 == 0) ? size_t(300 << 10) + size_t(i) : size_t(i * 37 % 9000);
    msgs.push_back({s, s + size_t(i % 4) * 512});
  }
  PairOutcome out = transferMessages(verbsPair(2), msgs, 24);
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE("rdma: multi-receive: one request, n buffers picked by the sends' tags", "[verbs]") {
  REQUIRE_TESTBED();
  PairOutcome out = multiReceive(verbsPair(2), 3);
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

TEST_CASE("rdma: closing with requests in flight is clean, and the process keeps working",
          "[verbs]") {
  REQUIRE_TESTBED();
  PairOutcome out = closeWithRequestsInFlight(verbsPair(2));
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

// README's bounds: 32 receives outstanding per comm; beyond them irecv answers with a NULL
// request (NCCL retries later), never an error. A send is taken only once a posted receive can
// take it (docs/net-contract.md), so beyond the 32 receives posted isend answers NULL too. A
// request's slot is freed only by the test() that reports it done, so an end that never tests its
// requests holds them all. The receiver keeps testing its first receive so that the connection
// progresses (the sender's connect needs it); both comms then close with their requests in
// flight.
TEST_CASE("rdma: requests beyond the bounds get a NULL request, not an error", "[verbs]") {
  REQUIRE_TESTBED();
  PairOutcome out = runPair(
      verbsPair(2),
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = listenAndAccept(ep, peer, &comm)) return rc;
        int accepted = 0;
        void* first = nullptr;
        for (int i = 0; i < 40; ++i) {
          void* data = nullptr;
          size_t size = 0;
          int tag = 1;
          void* mh = nullptr;
          void* req = nullptr;
          abi::Result r = ep.net()->irecv(comm, 1, &data, &size, &tag, &mh, nullptr, &req);
          PEER_CHECK(r == abi::kSuccess, "irecv %d: error %d", i, int(r));
          if (req == nullptr) break;
          if (first == nullptr) first = req;
          ++accepted;
        }
        PEER_CHECK(accepted == 32, "%d receives accepted before a NULL request", accepted);
        double deadline = nowSeconds() + 60;
        bool firstDone = false;
        while (!peer.readable()) {
          int done = 0;
          if (!firstDone) {
            PEER_CHECK(ep.test(first, &done, nullptr) == abi::kSuccess, "test");
            firstDone = done != 0;
          } else {
            usleep(1000);
          }
          PEER_CHECK(nowSeconds() < deadline, "the sender never finished");
        }
        PEER_CHECK(peer.expect("sends posted", 1000), "sender");
        ep.net()->closeRecv(comm);
        return 0;
      },
      [&](NetEndpoint& ep, Channel& peer, Channel&) {
        void* comm = nullptr;
        if (int rc = receiveHandleAndConnect(ep, peer, &comm)) return rc;
        // The receives' announcements arrive over time: NULL until each one has.
        int accepted = 0;
        double deadline = nowSeconds() + 30;
        while (accepted < 32) {
          PEER_CHECK(nowSeconds() < deadline, "%d of the 32 posted receives took a send in 30 s",
                     accepted);
          void* req = nullptr;
          abi::Result r = ep.net()->isend(comm, nullptr, 0, 1, nullptr, nullptr, &req);
          PEER_CHECK(r == abi::kSuccess, "isend %d: error %d", accepted, int(r));
          accepted += req != nullptr;
        }
        for (int i = 0; i < 200; ++i) {
          void* req = nullptr;
          abi::Result r = ep.net()->isend(comm, nullptr, 0, 1, nullptr, nullptr, &req);
          PEER_CHECK(r == abi::kSuccess, "isend beyond the posted receives: error %d", int(r));
          PEER_CHECK(req == nullptr, "a send beyond the 32 posted receives got a request");
          usleep(1000);
        }
        ep.net()->closeSend(comm);
        peer.sendLine("sends posted");
        return 0;
      });
  CHECK(out.receiver == 0);
  CHECK(out.sender == 0);
}

// NCCL's net contract (test/net/conformance.h), the same scenarios as on TCP, through every
// table version.
TEST_CASE(
    "rdma: contract: tag order, many connections per listen, closing with requests in "
    "flight",
    "[verbs][contract]") {
  REQUIRE_TESTBED();
  for (int v : {8, 9, 10, 11}) {
    INFO("net v" << v);
    PairOptions o = verbsPair(2);
    o.maxNetVersion = v;
    PairOutcome tags = test::tagOrder(o);
    CHECK(tags.receiver == 0);
    CHECK(tags.sender == 0);
    PairOutcome many = test::manyConnectionsPerListen(o, 3);
    CHECK(many.receiver == 0);
    CHECK(many.sender == 0);
    PairOutcome receiverCloses = test::receiverClosesWhileSending(o);
    CHECK(receiverCloses.receiver == 0);
    CHECK(receiverCloses.sender == 0);
    PairOutcome senderCloses = test::senderClosesWhileReceiving(o);
    CHECK(senderCloses.receiver == 0);
    CHECK(senderCloses.sender == 0);
  }
}

// Rail 0's failure replayed what it held unacknowledged ("replaying N" in the sender's log),
// and the first replayed chunk completed on rail 1 after rail 0 failed. `mustHold`: the rail
// certainly held chunks when it failed (N > 0 required); otherwise N may be 0 and then nothing
// more is checked.
namespace {
void checkReplay(const std::string& senderLog, bool mustHold) {
  std::string replaying = after(senderLog, "ib send: rail 0 failed at monotonic ", "replaying ");
  INFO("rail 0 failed: replaying " << replaying);
  REQUIRE(!replaying.empty());
  int n = std::atoi(replaying.c_str());
  if (mustHold) CHECK(n > 0);
  if (n == 0) return;
  std::string replayed =
      after(senderLog, "ib send: the first replayed chunk completed on rail 1 ", "");
  INFO("first replayed chunk completed on rail 1: " << replayed);
  CHECK(replayed.find("after rail 0 failed") != std::string::npos);
}
}  // namespace

TEST_CASE("rdma: a NIC's link taken down mid-transfer loses nothing; restored, it re-joins",
          "[verbs][fault]") {
  REQUIRE_TESTBED();
  double faultAt = 0;
  StreamRun r = stream(verbsPair(2), [&](const std::function<void()>& mark) {
    sleepMs(1500);
    mark();
    run("/usr/bin/ip link set veth1 down");
    faultAt = nowSeconds();  // the link is down by now (the command takes ~0.1-0.5 s under TCG)
    sleepMs(1500);
    run("rxe-net-up");
    sleepMs(3000);
  });
  report("link down (veth1)", r, faultAt);
  checkLossless(r);
  INFO("sender log:\n" << r.senderLog);
  // Failed by its own port event, or by the receiver's (which saw it first) RAIL_DOWN.
  CHECK(railLine(r.senderLog, "send", 0, verbsRail(false, 0), "-> failed"));
  CHECK(railLine(r.senderLog, "send", 0, verbsRail(false, 0), "failed -> probing"));
  CHECK(railLine(r.senderLog, "send", 0, verbsRail(false, 0), "probing -> healthy"));
  // The replay: whatever rail 0 held unacknowledged when its port went down was replayed, the
  // first of it completing on rail 1 after rail 0 failed. A port event can find the rail with
  // nothing outstanding (seen once in a CI-like run: "replaying 0"), so the count is checked
  // only when there was something; the loss case below, which is detected because the rail
  // holds chunks, always replays.
  checkReplay(r.senderLog, false);
  // The target at default settings is 250 ms; the emulated test bed is slow and shared.
  CHECK(r.result.markToFirstCompletionSec < 1.5);
}

TEST_CASE("rdma: 100% loss on one NIC loses nothing; healed, it re-joins", "[verbs][fault]") {
  REQUIRE_TESTBED();
  double faultAt = 0;
  StreamRun r = stream(verbsPair(2), [&](const std::function<void()>& mark) {
    sleepMs(1500);
    mark();
    run("/usr/bin/tc qdisc add dev veth0 root netem loss 100%");
    faultAt = nowSeconds();
    sleepMs(1500);
    run("/usr/bin/tc qdisc del dev veth0 root");
    sleepMs(4000);
  });
  report("100% loss (netem on veth0)", r, faultAt);
  checkLossless(r);
  INFO("sender log:\n" << r.senderLog);
  CHECK(railLine(r.senderLog, "send", 0, verbsRail(false, 0), "-> failed"));
  CHECK(railLine(r.senderLog, "send", 0, verbsRail(false, 0), "failed -> probing"));
  checkReplay(r.senderLog, true);
  CHECK(r.result.markToFirstCompletionSec < 3.0);
}

TEST_CASE("rdma: the receiver's queue pair destroyed silently; the sender recovers the rail",
          "[verbs][fault]") {
  REQUIRE_TESTBED();
  const std::string plan = "/tmp/verbs-qp-fault";
  writeFaultPlan(plan, "");
  PairOptions o = verbsPair(2);
  o.receiverEnv.push_back({"NCCL_AUTOPILOT_FAULT_FILE", plan});
  double faultAt = 0;
  StreamRun r = stream(o, [&](const std::function<void()>& mark) {
    sleepMs(1500);
    mark();
    faultAt = nowSeconds();
    writeFaultPlan(plan, "rail " + verbsRail(true, 0) + " qp-reset 1\n");
    sleepMs(3500);
  });
  report("remote QP destroyed (receiver's rxe1:1)", r, faultAt);
  checkLossless(r);
  INFO("sender log:\n" << r.senderLog);
  INFO("receiver log:\n" << r.receiverLog);
  CHECK(railLine(r.receiverLog, "recv", 0, verbsRail(true, 0), "-> failed: SIMULATED"));
  CHECK(railLine(r.senderLog, "send", 0, verbsRail(false, 0), "-> failed"));
  CHECK(railLine(r.senderLog, "send", 0, verbsRail(false, 0), "failed -> probing"));
  CHECK(r.result.markToFirstCompletionSec < 3.0);
}

TEST_CASE("rdma: autopilot ibbench runs (figures under emulation mean nothing)", "[verbs]") {
  REQUIRE_TESTBED();
  int rc = std::system(
      "autopilot ibbench --quick --hca rxe0:1,rxe2:1 --peer-hca rxe1:1,rxe3:1 "
      "--json /tmp/ibbench.json");
  CHECK(rc == 0);
  std::ifstream f("/tmp/ibbench.json");
  std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  INFO(json);
  CHECK(json.find("\"name\": \"all 2 NICs (striped)\"") != std::string::npos);
}

// The fence (docs/net-contract.md). Every write of the sender on wire 0 is delayed 150 ms
// (netem on veth0, which the control connection crosses too, as it does where it shares the
// first NIC), longer than the rail's stall allowance: rail 0 fails whenever it holds data, its
// writes still in flight, and re-joins, over and over. The receiver rotates through 4x as many
// buffers as it posts and checks that none is written between its receive's completion and
// the next receive posted in it. With the fence, no byte of any buffer changes across many
// failovers, and the receiver counts the writes the fence dealt with (landed late, or cut
// off). Without it (NCCL_AUTOPILOT_IB_FENCE=0, the control run), a replay on rail 1 completes
// a request before its late original lands, and buffers are overwritten after completion.
namespace {

struct FenceRun {
  StreamRun run;
  uint64_t senderFailures = 0;  // rail 0's, from the sender's summary at close
  uint64_t late = 0, cut = 0;   // from the receiver's summary at close
};

// The first unsigned number after `key` in the last line of `log` that contains `line`.
uint64_t numberAfter(const std::string& log, const std::string& line, const std::string& key) {
  size_t at = log.rfind(line);
  if (at == std::string::npos) return 0;
  size_t end = log.find('\n', at);
  std::string text = log.substr(at, end == std::string::npos ? std::string::npos : end - at);
  size_t k = text.find(key);
  return k == std::string::npos ? 0 : std::strtoull(text.c_str() + k + key.size(), nullptr, 10);
}

FenceRun fenceRun(bool fence, int seconds) {
  PairOptions o = verbsPair(2);
  // Detection well inside the delay: the NICs retransmit after 33.5 ms (13), the stall
  // allowance is 100 ms and not stretched by this process's lateness (the emulated VM is
  // always late), and failed rails are re-created within 50 ms. A cycle (fail, fence, re-create,
  // probe, fail again) takes about 0.65 s.
  o.env.push_back({"NCCL_AUTOPILOT_IB_TIMEOUT", "13"});
  o.env.push_back({"NCCL_AUTOPILOT_NET_STALL_TIMEOUT_MS", "100"});
  o.env.push_back({"NCCL_AUTOPILOT_NET_LATENESS_CAP_MS", "0"});
  o.env.push_back({"NCCL_AUTOPILOT_NET_FAILBACK_MIN_MS", "20"});
  o.env.push_back({"NCCL_AUTOPILOT_NET_FAILBACK_MAX_MS", "50"});
  o.env.push_back({"NCCL_AUTOPILOT_NET_PEER_TIMEOUT_MS", "10000"});
  o.env.push_back({"NCCL_AUTOPILOT_IB_FENCE", fence ? "1" : "0"});
  // The control connection on wire 0, both ways.
  o.receiverEnv.push_back({"NCCL_AUTOPILOT_NET_ADDRS", "10.0.0.2"});
  o.senderEnv.push_back({"NCCL_AUTOPILOT_NET_ADDRS", "10.0.0.1"});
  o.timeoutMs = (seconds + 60) * 1000;
  FenceRun f;
  f.run = runStream(
      o, 1 << 20, 8, Verify::kIdle,
      [&](const std::function<void()>& mark) {
        sleepMs(1000);
        mark();
        run("/usr/bin/tc qdisc add dev veth0 root netem delay 150ms limit 100000");
        sleepMs(seconds * 1000);
        run("/usr/bin/tc qdisc del dev veth0 root");
        sleepMs(1500);
      },
      true);
  f.senderFailures = numberAfter(f.run.senderLog, "ib send closed: rail 0", "samples), ");
  const std::string fences = "writes the sender gave up on";
  f.late = numberAfter(f.run.receiverLog, fences, "gave up on, ");
  f.cut = numberAfter(f.run.receiverLog, fences, "late (before the fence) and ");
  std::printf(
      "FIGURE fence %s: %llu messages (%.1f MiB) in %.1f s, rail 0 failed %llu times at the "
      "sender; writes landed late %llu, cut off %llu; %llu buffers overwritten after their "
      "receive completed, %llu messages corrupt\n",
      fence ? "on" : "off (control run)", (unsigned long long)f.run.result.messages,
      double(f.run.result.bytes) / (1 << 20), f.run.result.seconds,
      (unsigned long long)f.senderFailures, (unsigned long long)f.late, (unsigned long long)f.cut,
      (unsigned long long)f.run.result.overwritten, (unsigned long long)f.run.result.corrupt);
  std::fflush(stdout);
  return f;
}

}  // namespace

TEST_CASE("rdma: fence: writes delayed on one wire, no reused buffer overwritten",
          "[verbs][fault][fence]") {
  REQUIRE_TESTBED();
  {
    FenceRun on = fenceRun(true, 80);
    INFO("sender log:\n" << on.run.senderLog);
    INFO("receiver log:\n" << on.run.receiverLog);
    CHECK(on.run.ok);
    CHECK(on.run.result.corrupt == 0);
    CHECK(on.run.result.overwritten == 0);
    // How many cycles fit in 80 s is the emulated VM's speed: 117-119 on a quiet host, 90
    // beside stress-ng --cpu 2 (2026-12-02). The fence's work is checked by `late + cut`; the
    // count only says the delay kept failing the rail, with a 3x margin under load.
    CHECK(on.senderFailures >= 30);
    CHECK(on.late + on.cut > 0);
  }
  {
    FenceRun off = fenceRun(false, 20);
    INFO("sender log:\n" << off.run.senderLog);
    INFO("receiver log:\n" << off.run.receiverLog);
    CHECK(off.run.ok);
    CHECK(off.senderFailures > 0);
    CHECK(off.run.result.overwritten + off.run.result.corrupt > 0);
  }
}

// A write the receiver's NIC rejects (simulated: the sender's data writes on rail 1 name a key
// the receiver never registered, `reject` in the fault plan) fails the rail like a path failure,
// and the chunk is replayed on the other NIC: nothing is lost, and the rail keeps re-joining
// and failing while the fault stands. With 1 MiB messages the rejected write is a multi-packet
// one (the receiver's QP flushes its receives); with 1 KiB messages it is one packet, and the
// receiver's own receive completes with the rejection. Soft-RoCE once rejected a replay in the
// fence case, whose like had landed in the failovers just before (IBV_WC_REM_INV_REQ_ERR on both
// sides); that failed the comm.
namespace {

StreamRun rejectRun(size_t messageBytes, const std::string& faults, int seconds) {
  const std::string plan = "/tmp/verbs-reject-fault";
  writeFaultPlan(plan, "");
  PairOptions o = verbsPair(2);
  o.senderEnv.push_back({"NCCL_AUTOPILOT_FAULT_FILE", plan});
  o.env.push_back({"NCCL_AUTOPILOT_NET_FAILBACK_MIN_MS", "20"});
  o.env.push_back({"NCCL_AUTOPILOT_NET_FAILBACK_MAX_MS", "200"});
  o.env.push_back({"NCCL_AUTOPILOT_NET_PEER_TIMEOUT_MS", "3000"});
  return runStream(
      o, messageBytes, 8, Verify::kFull,
      [&](const std::function<void()>& mark) {
        sleepMs(1500);
        mark();
        writeFaultPlan(plan, faults);
        sleepMs(seconds * 1000);
        writeFaultPlan(plan, "");
        sleepMs(1500);
      },
      true);
}

// From the sender's summary at close: "... ib send closed: N chunk(s) replayed after the
// receiver's NIC rejected a write".
uint64_t rejectedReplays(const std::string& senderLog) {
  size_t at = senderLog.rfind(" replayed after the receiver's NIC rejected");
  if (at == std::string::npos) return 0;
  const std::string key = "ib send closed: ";
  size_t k = senderLog.rfind(key, at);
  return k == std::string::npos ? 0
                                : std::strtoull(senderLog.c_str() + k + key.size(), nullptr, 10);
}

}  // namespace

TEST_CASE("rdma: writes the receiver's NIC rejects are replayed on the other NIC",
          "[verbs][fault][reject]") {
  REQUIRE_TESTBED();
  for (size_t bytes : {size_t(1) << 20, size_t(1) << 10}) {
    StreamRun r = rejectRun(bytes, "rail 1 reject\n", 3);
    INFO("message size " << bytes);
    checkLossless(r);
    uint64_t replays = rejectedReplays(r.senderLog);
    std::printf(
        "FIGURE rejected writes, %zu B messages: %llu messages (%.1f MiB) in %.1f s, "
        "%llu chunks replayed after a rejection, rail 1 failed %ld times, longest gap "
        "after the fault %.1f ms, 0 corrupt: %s\n",
        bytes, (unsigned long long)r.result.messages, double(r.result.bytes) / (1 << 20),
        r.result.seconds, (unsigned long long)replays, summaryFailures(r.senderLog, 1),
        r.result.maxGapAfterMarkSec * 1e3, r.result.corrupt == 0 ? "yes" : "no");
    std::fflush(stdout);
    CHECK(replays > 0);
    CHECK(r.senderLog.find("IBV_WC_REM_ACCESS_ERR") != std::string::npos);
    CHECK(railLine(r.senderLog, "send", 1, verbsRail(false, 1), "failed -> probing"));
    if (bytes <= 1024) {  // one packet: the receive itself carries the rejection
      CHECK(r.receiverLog.find("this NIC rejected a write") != std::string::npos);
    }
    CHECK(r.result.maxGapAfterMarkSec < 3.0);
  }
}

TEST_CASE("rdma: a chunk rejected on both NICs fails the send with the status named",
          "[verbs][fault][reject]") {
  REQUIRE_TESTBED();
  StreamRun r = rejectRun(size_t(1) << 20, "rail 0 reject\nrail 1 reject\n", 4);
  INFO("sender log:\n" << r.senderLog);
  INFO("receiver log:\n" << r.receiverLog);
  CHECK_FALSE(r.ok);
  CHECK(r.outcome.sender != 0);
  CHECK(r.result.corrupt == 0);
  CHECK(r.senderLog.find("it had rejected the same chunk before") != std::string::npos);
}

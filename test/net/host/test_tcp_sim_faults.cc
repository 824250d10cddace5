// Rail faults simulated by the plugin itself (NCCL_AUTOPILOT_FAULT_FILE), over loopback rails:
// no privileges needed. A simulated `down` stops all traffic on a rail without any error, as
// a dead link does; `rate` paces it. The real-fault versions (veth rails in network
// namespaces) are in test_tcp_netns_faults.cc.
#include <unistd.h>

#include <string>

#include <catch2/catch.hpp>

#include "common/host/log_capture.h"
#include "bench/net/pair.h"

using namespace autopilot;
using namespace autopilot::bench;

namespace {

struct SimRun {
  StreamResult stream;
  int receiver = -1, sender = -1;
  double railShare[8] = {};  // fraction of the bytes each rail carried (sender's summary)
};

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
      double v = std::atof(rec.message.c_str() + num);
      bool mib = rec.message.find("MiB", num) < rec.message.find(',', num);
      bytes[r] = mib ? v * 1048576 : v;
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
  o.env = {{"NCCL_AUTOPILOT_NET_ADDRS", loopbackRails(rails)},
           {"NCCL_AUTOPILOT_FAULT_FILE", plan}};
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
        double fractions[8] = {};
        sharesFromLog(fractions, rails);
        shares[1].send(fractions, sizeof(fractions));
        return 0;
      },
      [&](Channel& toReceiver, Channel& toSender) {
        if (!toReceiver.expect("connected", 30000)) return;
        script(plan);
        toSender.sendLine("stop");
      });
  results[0].recv(&run.stream, sizeof(run.stream), 1000);
  shares[0].recv(run.railShare, sizeof(run.railShare), 1000);
  run.receiver = out.receiver;
  run.sender = out.sender;
  unlink(plan.c_str());
  return run;
}

void sleepMs(int ms) { usleep(useconds_t(ms) * 1000); }

}  // namespace

TEST_CASE("simulated: a rail going down mid-transfer loses nothing, and re-joins when up",
          "[net][tcp][simfault]") {
  SimRun run = simulated(
      2, 1 << 20, "rail 0 rate 400\nrail 1 rate 400\n",
      [](const std::string& plan) {
        sleepMs(500);
        writeFaultPlan(plan, "rail 0 rate 400\nrail 1 rate 400\nrail 1 down\n");
        sleepMs(1000);
        writeFaultPlan(plan, "rail 0 rate 400\nrail 1 rate 400\n");
        sleepMs(1500);
      },
      {"send rail 1 (lo/127.0.0.2): healthy -> failed|send rail 1 (lo/127.0.0.2): degraded -> failed",
       "re-sending",
       "send rail 1 (lo/127.0.0.2): failed -> probing", "SIMULATED fault: rail 1"});
  CHECK(run.receiver == 0);
  CHECK(run.sender == 0);
  CHECK(run.stream.messages > 50);
  CHECK(run.stream.corrupt == 0);
  INFO("longest stall " << run.stream.maxGapSec * 1000 << " ms");
  CHECK(run.stream.maxGapSec < 2.0);
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
      {"send rail 1 (lo/127.0.0.2): healthy -> failed|send rail 1 (lo/127.0.0.2): degraded -> failed"});
  CHECK(run.receiver == 0);
  CHECK(run.sender == 0);
  CHECK(run.stream.messages > 50);
  CHECK(run.stream.corrupt == 0);
}

TEST_CASE("simulated: a rate-limited rail is marked degraded and carries a small share",
          "[net][tcp][simfault]") {
  SimRun run = simulated(
      2, 1 << 20, "rail 0 rate 800\nrail 1 rate 40\n", [](const std::string&) { sleepMs(1500); },
      {"send rail 1 (lo/127.0.0.2): healthy -> degraded"},
      {"send rail 1 (lo/127.0.0.2): healthy -> failed"});
  CHECK(run.receiver == 0);
  CHECK(run.sender == 0);
  CHECK(run.stream.corrupt == 0);
  // An equal split would give each rail half the bytes (and run at 2 x 40 Mbit/s).
  INFO("share of the slow rail " << run.railShare[1]);
  CHECK(run.railShare[1] > 0.0);
  CHECK(run.railShare[1] < 0.15);
}

TEST_CASE("simulated: a degraded rail that heals is re-admitted to a full share",
          "[net][tcp][simfault]") {
  SimRun run = simulated(
      2, 1 << 20, "rail 0 rate 800\nrail 1 rate 40\n",
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

TEST_CASE("simulated: a standby rail carries nothing until the active one dies",
          "[net][tcp][simfault]") {
  SimRun idle = simulated(2, 1 << 20, "rail 0 rate 400\nrail 1 rate 400\n",
                          [](const std::string&) { sleepMs(800); }, {}, {},
                          {{"NCCL_AUTOPILOT_NET_STANDBY", "lo/127.0.0.2"}});
  CHECK(idle.receiver == 0);
  CHECK(idle.sender == 0);
  CHECK(idle.stream.corrupt == 0);
  CHECK(idle.railShare[1] == 0.0);

  SimRun takeover = simulated(
      2, 1 << 20, "rail 0 rate 400\nrail 1 rate 400\n",
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

TEST_CASE("simulated: with failover off a dead rail stalls the connection",
          "[net][tcp][simfault]") {
  SimRun run = simulated(
      2, 256 << 10, "rail 0 rate 400\nrail 1 rate 400\n",
      [](const std::string& plan) {
        sleepMs(400);
        writeFaultPlan(plan, "rail 0 rate 400\nrail 1 rate 400\nrail 1 down\n");
        sleepMs(1500);
      },
      {}, {"re-sending", "healthy -> failed"}, {{"NCCL_AUTOPILOT_NET_FAILOVER", "0"}}, 5000);
  // The baseline mode: no migration; the transfer stops at the fault (the endpoints never
  // finish their streams), as it would without failover.
  CHECK((run.receiver != 0 || run.sender != 0));
  CHECK(run.stream.corrupt == 0);
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
      {Message{size_t(1) << 20, size_t(1) << 20}, Message{(size_t(16) << 20) + 3, (size_t(16) << 20) + 3}},
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

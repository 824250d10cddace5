// NCCL's net contract (docs/net-contract.md) on the TCP transport, through every table version
// we export; the same scenarios run on Soft-RoCE in the VM (test/verbs/vm).
#include <catch2/catch.hpp>
#include <functional>

#include "test/net/conformance.h"

using namespace autopilot;
using namespace autopilot::bench;

namespace {

// Runs `scenario` over two loopback rails through every net table version we export.
void everyVersion(const std::function<PairOutcome(const PairOptions&)>& scenario) {
  for (int v : {8, 9, 10, 11}) {
    INFO("net v" << v);
    PairOptions o = tcpPair(2);
    o.maxNetVersion = v;
    PairOutcome out = scenario(o);
    CHECK(out.receiver == 0);
    CHECK(out.sender == 0);
  }
}

}  // namespace

TEST_CASE("contract: sends in any tag order get NULL until their receive is next in line",
          "[net][tcp][contract]") {
  everyVersion(test::tagOrder);
}

TEST_CASE("contract: one listen comm accepts several connections, which outlive it",
          "[net][tcp][contract]") {
  everyVersion([](const PairOptions& o) { return test::manyConnectionsPerListen(o, 3); });
}

TEST_CASE("contract: the receiver closes with sends in flight; isend and closeSend succeed",
          "[net][tcp][contract]") {
  everyVersion(test::receiverClosesWhileSending);
}

TEST_CASE("contract: the sender closes with receives in flight; irecv and closeRecv succeed",
          "[net][tcp][contract]") {
  everyVersion(test::senderClosesWhileReceiving);
}

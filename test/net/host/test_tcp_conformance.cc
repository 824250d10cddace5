// NCCL's net contract (docs/net-contract.md) on the TCP transport, through every table version
// we export; the same scenarios run on Soft-RoCE in the VM (test/verbs/vm).
#include <catch2/catch.hpp>

#include "test/net/conformance.h"

using namespace autopilot;
using namespace autopilot::bench;

namespace {

PairOptions withVersion(int version) {
  PairOptions o = tcpPair(2);
  o.maxNetVersion = version;
  return o;
}

}  // namespace

TEST_CASE("contract: sends in any tag order get NULL until their receive is next in line",
          "[net][tcp][contract]") {
  for (int v : {8, 9, 10, 11}) {
    INFO("net v" << v);
    PairOutcome out = test::tagOrder(withVersion(v));
    CHECK(out.receiver == 0);
    CHECK(out.sender == 0);
  }
}

TEST_CASE("contract: one listen comm accepts several connections, which outlive it",
          "[net][tcp][contract]") {
  for (int v : {8, 9, 10, 11}) {
    INFO("net v" << v);
    PairOutcome out = test::manyConnectionsPerListen(withVersion(v), 3);
    CHECK(out.receiver == 0);
    CHECK(out.sender == 0);
  }
}

TEST_CASE("contract: the receiver closes with sends in flight; isend and closeSend succeed",
          "[net][tcp][contract]") {
  for (int v : {8, 9, 10, 11}) {
    INFO("net v" << v);
    PairOutcome out = test::receiverClosesWhileSending(withVersion(v));
    CHECK(out.receiver == 0);
    CHECK(out.sender == 0);
  }
}

TEST_CASE("contract: the sender closes with receives in flight; irecv and closeRecv succeed",
          "[net][tcp][contract]") {
  for (int v : {8, 9, 10, 11}) {
    INFO("net v" << v);
    PairOutcome out = test::senderClosesWhileReceiving(withVersion(v));
    CHECK(out.receiver == 0);
    CHECK(out.sender == 0);
  }
}

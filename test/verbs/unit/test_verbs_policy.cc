// Pure policies of the verbs transport: completion statuses, GID choice, port speed, HCA lists.
#include <catch2/catch.hpp>
#include <cstring>

#include "net_plugin/core/fault_plan.h"
#include "net_plugin/core/rail_selection.h"
#include "net_plugin/transport/ibverbs/completion.h"
#include "net_plugin/transport/ibverbs/port_attributes.h"

using namespace autopilot::net;
using namespace autopilot::net::ib;

TEST_CASE("verbs: completion statuses: path failures migrate, rejections replay, local errors fail",
          "[verbs][unit]") {
  CHECK(classifyCompletion(IBV_WC_SUCCESS) == CompletionClass::kSuccess);
  for (ibv_wc_status s : {IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_WR_FLUSH_ERR,
                          IBV_WC_REM_ABORT_ERR, IBV_WC_RESP_TIMEOUT_ERR, IBV_WC_FATAL_ERR,
                          IBV_WC_REM_OP_ERR, IBV_WC_BAD_RESP_ERR, IBV_WC_GENERAL_ERR}) {
    INFO(statusName(s));
    CHECK(classifyCompletion(s) == CompletionClass::kPathFailed);
  }
  // The responder's NAKs: replayed once per chunk by the transport, never forever.
  for (ibv_wc_status s :
       {IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_INV_RD_REQ_ERR}) {
    INFO(statusName(s));
    CHECK(classifyCompletion(s) == CompletionClass::kRejected);
  }
  for (ibv_wc_status s :
       {IBV_WC_LOC_LEN_ERR, IBV_WC_LOC_PROT_ERR, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOC_ACCESS_ERR,
        IBV_WC_MW_BIND_ERR, IBV_WC_LOC_EEC_OP_ERR, IBV_WC_LOC_RDD_VIOL_ERR}) {
    INFO(statusName(s));
    CHECK(classifyCompletion(s) == CompletionClass::kLocalError);
  }
  // A status this code does not know must not be replayed (it could loop forever).
  CHECK(classifyCompletion(ibv_wc_status(200)) == CompletionClass::kLocalError);
  CHECK(std::strcmp(statusName(IBV_WC_RETRY_EXC_ERR), "IBV_WC_RETRY_EXC_ERR") == 0);
  CHECK(std::strcmp(statusName(ibv_wc_status(200)), "IBV_WC_(unknown)") == 0);
}

namespace {
GidEntry gid(int index, GidType type, std::initializer_list<uint8_t> tail, bool v4 = false) {
  GidEntry e;
  e.index = index;
  e.type = type;
  if (v4) {
    e.raw[10] = 0xff;
    e.raw[11] = 0xff;
  } else {
    e.raw[0] = 0xfe;
    e.raw[1] = 0x80;
  }
  int i = 16 - int(tail.size());
  for (uint8_t b : tail) e.raw[i++] = b;
  return e;
}
}  // namespace

TEST_CASE("verbs: RoCE v2 with an IPv4-mapped address is the default GID", "[verbs][unit]") {
  // What rxe shows: [0] fe80::... (MAC-derived), [1] ::ffff:<IPv4> (the VM wires use addresses
  // private to the guest; any IPv4 serves here), both RoCE v2.
  std::vector<GidEntry> rxe = {gid(0, GidType::kRoceV2, {1, 2, 3}),
                               gid(1, GidType::kRoceV2, {127, 0, 0, 1}, true)};
  CHECK(chooseGidIndex(rxe, -1) == 1);
  CHECK(chooseGidIndex(rxe, 0) == 0);  // configured and present
  CHECK(chooseGidIndex(rxe, 7) == 1);  // configured but absent: the default rule

  // A typical mlx5 table: v1 and v2 entries for a link-local and an IPv4 address.
  std::vector<GidEntry> mlx = {gid(0, GidType::kRoceV1, {1}), gid(1, GidType::kRoceV2, {1}),
                               gid(2, GidType::kRoceV1, {127, 0, 1, 5}, true),
                               gid(3, GidType::kRoceV2, {127, 0, 1, 5}, true)};
  CHECK(chooseGidIndex(mlx, -1) == 3);
  // Only v1: the first non-zero entry.
  std::vector<GidEntry> v1 = {gid(0, GidType::kRoceV1, {1}), gid(1, GidType::kRoceV1, {9}, true)};
  CHECK(chooseGidIndex(v1, -1) == 0);
  // Types unknown (old provider): the first non-zero entry of unknown type.
  std::vector<GidEntry> unknown = {gid(4, GidType::kUnknown, {7})};
  CHECK(chooseGidIndex(unknown, -1) == 4);
  // A zero GID is never chosen, even when configured.
  GidEntry zero;
  zero.index = 0;
  CHECK(chooseGidIndex({zero}, 0) == -1);
  CHECK(chooseGidIndex({}, -1) == -1);
}

TEST_CASE("verbs: port speed from the IB speed and width codes", "[verbs][unit]") {
  CHECK(portSpeedMbps(32, 2) == 100000);   // EDR 4x
  CHECK(portSpeedMbps(64, 2) == 200000);   // HDR 4x
  CHECK(portSpeedMbps(128, 2) == 400000);  // NDR 4x
  CHECK(portSpeedMbps(1, 1) == 2500);
  CHECK(portSpeedMbps(0, 2) == 0);
  CHECK(portSpeedMbps(32, 3) == 0);
}

TEST_CASE("verbs: NCCL_IB_HCA lists: prefixes, exclusion, exact names, ports", "[verbs][unit]") {
  core::InterfaceFilter f;
  std::string error;
  REQUIRE(core::parseInterfaceFilter("mlx5_0:1,mlx5_1", &f, &error));
  CHECK(core::interfaceMatches(f, "mlx5_0", 1));
  CHECK_FALSE(core::interfaceMatches(f, "mlx5_0", 2));
  CHECK(core::interfaceMatches(f, "mlx5_1", 2));
  CHECK(core::interfaceMatches(f, "mlx5_10", 1));  // prefix
  CHECK_FALSE(core::interfaceMatches(f, "rxe0", 1));
  CHECK(core::interfaceMatches(f, "mlx5_0"));  // port-agnostic: any port of a listed device

  REQUIRE(core::parseInterfaceFilter("^mlx5_2:1", &f, &error));
  CHECK_FALSE(core::interfaceMatches(f, "mlx5_2", 1));
  CHECK(core::interfaceMatches(f, "mlx5_2", 2));
  CHECK(core::interfaceMatches(f, "mlx5_0", 1));

  REQUIRE(core::parseInterfaceFilter("=rxe0,rxe2:1", &f, &error));
  CHECK(core::interfaceMatches(f, "rxe0", 1));
  CHECK_FALSE(core::interfaceMatches(f, "rxe01", 1));
  CHECK(core::interfaceMatches(f, "rxe2", 1));
  CHECK_FALSE(core::interfaceMatches(f, "rxe2", 2));

  CHECK_FALSE(core::parseInterfaceFilter("mlx5_0:x", &f, &error));
  CHECK_FALSE(core::parseInterfaceFilter("mlx5_0:", &f, &error));
  CHECK_FALSE(core::parseInterfaceFilter("mlx5_0:99999", &f, &error));
  CHECK_FALSE(core::parseInterfaceFilter("=", &f, &error));
}

TEST_CASE("verbs: the simulated-fault plan's qp-reset and reject rules", "[verbs][unit]") {
  const char* text =
      "rail rxe1:1 qp-reset 3\nrail 0 qp-reset x\nrail 2 qp-reset\nrail 1 reject\n"
      "rail 1 reject 2\n";
  core::FaultPlan plan = core::parseFaultPlan(text, std::strlen(text));
  REQUIRE(plan.rules.size() == 2);
  CHECK(plan.rules[0].rail == "rxe1:1");
  CHECK(plan.rules[0].action == core::FaultRule::Action::kQpReset);
  CHECK(plan.rules[0].resetSequence == 3);
  CHECK(plan.rules[1].index == 1);
  CHECK(plan.rules[1].action == core::FaultRule::Action::kReject);
  CHECK(plan.errors.size() == 3);
}

// Rail selection (NCCL_SOCKET_IFNAME syntax), grouping, the device table, the fault-plan
// parser and the pacer.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "net_plugin/core/device_table.h"
#include "net_plugin/core/fault_injector.h"
#include "net_plugin/core/fault_plan.h"
#include "net_plugin/core/pacer.h"
#include "net_plugin/core/rail_selection.h"

using namespace autopilot::net::core;

namespace {
InterfaceFilter filter(const char* text) {
  InterfaceFilter f;
  std::string err;
  REQUIRE(parseInterfaceFilter(text, &f, &err));
  return f;
}
FaultPlan parse(const std::string& s) { return parseFaultPlan(s.data(), s.size()); }
}  // namespace

TEST_CASE("interface lists: prefixes, exclusion, exact names", "[net][config]") {
  InterfaceFilter f = filter("eth,ib");
  CHECK(interfaceMatches(f, "eth0"));
  CHECK(interfaceMatches(f, "ib1"));
  CHECK_FALSE(interfaceMatches(f, "veth0"));
  f = filter("^docker,lo");
  CHECK(interfaceMatches(f, "eth0"));
  CHECK_FALSE(interfaceMatches(f, "docker0"));
  CHECK_FALSE(interfaceMatches(f, "lo"));
  f = filter("=eth0");
  CHECK(interfaceMatches(f, "eth0"));
  CHECK_FALSE(interfaceMatches(f, "eth01"));
  f = filter("^=eth0, eth1 ");
  CHECK_FALSE(interfaceMatches(f, "eth0"));
  CHECK_FALSE(interfaceMatches(f, "eth1"));
  CHECK(interfaceMatches(f, "eth10"));
  f = filter("eth0:5000");
  CHECK(interfaceMatches(f, "eth0"));
  InterfaceFilter bad;
  std::string err;
  for (const char* text : {"eth0:abc", "=", " , ", "eth 0", "eth0:"}) {
    INFO(text);
    CHECK_FALSE(parseInterfaceFilter(text, &bad, &err));
    CHECK_FALSE(err.empty());
  }
  CHECK(filter("").empty());
  CHECK(isDefaultExcluded("lo"));
  CHECK(isDefaultExcluded("docker0"));
  CHECK(isDefaultExcluded("virbr0"));
  CHECK_FALSE(isDefaultExcluded("eth0"));
}

TEST_CASE("groups: all-in-one, per-rail, explicit", "[net][config]") {
  std::vector<std::string> rails = {"a0", "a1", "a2", "a3"};
  GroupSpec spec;
  std::string err;
  std::vector<std::vector<int>> devices;
  std::vector<std::string> unused;
  REQUIRE(parseGroupSpec("", &spec, &err));
  REQUIRE(resolveGroups(spec, rails, &devices, &unused, &err));
  CHECK(devices == std::vector<std::vector<int>>{{0, 1, 2, 3}});
  REQUIRE(parseGroupSpec("per-rail", &spec, &err));
  REQUIRE(resolveGroups(spec, rails, &devices, &unused, &err));
  CHECK(devices.size() == 4);
  REQUIRE(parseGroupSpec("a0,a1; a3", &spec, &err));
  REQUIRE(resolveGroups(spec, rails, &devices, &unused, &err));
  CHECK(devices == std::vector<std::vector<int>>{{0, 1}, {3}});
  CHECK(unused == std::vector<std::string>{"a2"});
  REQUIRE(parseGroupSpec("a0;a9", &spec, &err));
  CHECK_FALSE(resolveGroups(spec, rails, &devices, &unused, &err));
  CHECK(err.find("a9") != std::string::npos);
  REQUIRE(parseGroupSpec("a0;a0", &spec, &err));
  CHECK_FALSE(resolveGroups(spec, rails, &devices, &unused, &err));
  CHECK_FALSE(parseGroupSpec("a0;;a1", &spec, &err));
  CHECK_FALSE(parseGroupSpec(";", &spec, &err));
  REQUIRE(parseGroupSpec("a0;a1;", &spec, &err));
  CHECK(spec.groups.size() == 2);
  CHECK(splitList(" x, ,y ,") == std::vector<std::string>{"x", "y"});
}

TEST_CASE("device table: unique names, aggregate speed, virtual devices", "[net][config]") {
  DeviceTable t;
  t.build({{"a0", 1000, ""}, {"a1", 0, ""}, {"a2", 25000, "/sys/x"}}, {{0, 1}, {2}, {}}, 10000);
  REQUIRE(t.count() == 2);
  const NetDevice* d0 = t.device(0);
  CHECK(d0->name == "a0+a1");
  CHECK(d0->speedMbps == 11000);  // unknown speed counts as the default
  CHECK(t.device(1)->pciPath == "/sys/x");
  CHECK(d0->guid != t.device(1)->guid);
  CHECK(t.device(2) == nullptr);
  CHECK(t.device(-1) == nullptr);
  int devs[] = {0, 1};
  std::string err;
  int v = t.makeVirtual(devs, 2, &err);
  REQUIRE(v == 2);
  const NetDevice* vd = t.device(v);
  CHECK(vd->isVirtual);
  CHECK(vd->rails == std::vector<int>{0, 1, 2});
  CHECK(vd->name == "a0+a1+a2");
  CHECK(vd->speedMbps == 36000);
  CHECK(t.physicalCount() == 2);
  // A second identical merge gets a distinct name; names stay valid.
  int v2 = t.makeVirtual(devs, 2, &err);
  REQUIRE(v2 == 3);
  CHECK(t.device(v2)->name == "a0+a1+a2#2");
  CHECK(vd->name == "a0+a1+a2");
  int bad1[] = {0, 0};
  CHECK(t.makeVirtual(bad1, 2, &err) == -1);
  int bad2[] = {2};
  CHECK(t.makeVirtual(bad2, 1, &err) == -1);  // virtual devices cannot be merged
  CHECK(t.makeVirtual(devs, 0, &err) == -1);
  int nine[9] = {0, 1, 0, 1, 0, 1, 0, 1, 0};  // more than the 8 a v12 vNIC may list
  CHECK(t.makeVirtual(nine, 9, &err) == -1);
  CHECK(err.find("1 to 8 devices") != std::string::npos);
}

TEST_CASE("fault plan: valid rules, comments, blank lines", "[net][fault]") {
  FaultPlan p = parse(
      "# simulated faults\n\nrail a1 down\nrail 2 rate 250  # shaped\n"
      "  rail lo/127.0.0.2 up\r\nrail 0 rate 0.5\n");
  CHECK(p.errors.empty());
  REQUIRE(p.rules.size() == 4);
  CHECK(p.rules[0].rail == "a1");
  CHECK(p.rules[0].index == -1);
  CHECK(p.rules[0].action == FaultRule::Action::kDown);
  CHECK(p.rules[1].index == 2);
  CHECK(p.rules[1].action == FaultRule::Action::kRate);
  CHECK(p.rules[1].rateMbps == 250);
  CHECK(p.rules[1].line == 4);
  CHECK(p.rules[2].rail == "lo/127.0.0.2");
  CHECK(p.rules[2].action == FaultRule::Action::kUp);
  CHECK(p.rules[3].rateMbps == 0.5);
}

TEST_CASE("fault plan: bad lines are reported and ignored, good ones still apply", "[net][fault]") {
  FaultPlan p = parse(
      "rail\nrail a1\nrail a1 sideways\nlink a1 down\nrail a1 down now\nrail a1 rate\n"
      "rail a1 rate -5\nrail a1 rate 1e3\nrail a1 rate fast\nrail a1 rate 99999999\n"
      "rail a2 down\n");
  CHECK(p.errors.size() == 10);
  REQUIRE(p.rules.size() == 1);
  CHECK(p.rules[0].rail == "a2");
  CHECK(p.errors[0].rfind("line 1:", 0) == 0);
  std::string binary("rail a\0 down\n", 13);
  CHECK(parse(binary).errors.size() == 1);
  std::string longLine(1000, 'x');
  CHECK(parse(longLine + "\nrail 1 down\n").rules.size() == 1);
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "rail 1 down\n";
  FaultPlan big = parse(many);
  CHECK(big.rules.size() == kMaxFaultLines);
  CHECK(big.errors.size() == 1);
  CHECK(parse("").rules.empty());
}

TEST_CASE("fault view: a comm sees its own rails' faults by its own rail index", "[net][fault]") {
  char path[] = "/tmp/ap-fault-view-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const char plan[] = "rail b down\nrail 2 deaf\nrail c rate 80\nrail b reject\n";
  REQUIRE(write(fd, plan, sizeof(plan) - 1) == ssize_t(sizeof(plan) - 1));
  close(fd);
  FaultInjector injector;  // a private one: the process's instance() is not touched
  injector.configure({"a", "b", "c"}, path);
  injector.refresh(1);
  unlink(path);
  // The comm's rail 0 is the process's rail c (index 2), its rail 1 is b (index 1).
  const int globals[] = {2, 1};
  FaultView view(&injector, globals, 2);
  CHECK(!view.down(0));
  CHECK(view.down(1));
  CHECK(view.deaf(0));
  CHECK(!view.deaf(1));
  CHECK(!view.reject(0));
  CHECK(view.reject(1));
  CHECK(view.rateBytesPerSec(0) == Approx(80e6 / 8));
  CHECK(view.rateBytesPerSec(1) == 0);
  CHECK(view.pacer(0) == injector.pacer(2));
  // Beyond the comm's rails: nothing, never another rail's state.
  CHECK(!view.down(2));
  CHECK(!view.reject(2));
  CHECK(view.pacer(-1) == nullptr);
  // A comm built without an injector sees no faults.
  FaultView none;
  none.refresh(1);
  CHECK(!none.down(0));
  CHECK(none.rateBytesPerSec(0) == 0);
  CHECK(none.pacer(0) == nullptr);
}

TEST_CASE("pacer: bursts, then the configured rate", "[net][fault]") {
  Pacer p;
  const double rate = 1e6;  // 1 MB/s
  CHECK(p.allowance(0, rate, 64 << 10) == (64 << 10));
  p.consume(64 << 10, 0, rate);
  CHECK(p.allowance(0, rate, 64 << 10) == 0);
  // 10 ms later, 10 KB more.
  CHECK(p.allowance(10'000'000, rate, 64 << 10) == Approx(10000).margin(2));
  uint64_t sent = 0;
  for (uint64_t t = 0; t <= 1'000'000'000; t += 1'000'000) {
    uint64_t a = p.allowance(t, rate, 64 << 10);
    p.consume(a, t, rate);
    sent += a;
  }
  CHECK(double(sent) == Approx(1e6).epsilon(0.02));
  CHECK(p.allowance(0, 0, 1) == 0);
}

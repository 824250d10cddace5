// The harness loads our library the way NCCL does, under every exported version, and the
// three plugin names resolve to one loaded instance.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <regex>
#include <set>

#include "common/host/log_capture.h"
#include "common/host/plugin_host.h"
#include "test/host/host_test_util.h"

using namespace autopilot;
using namespace autopilot::host;

namespace {

PluginHost::Options autopilotEverywhere() {
  PluginHost::Options o;
  o.netPlugin = "autopilot";
  o.tunerPlugin = "autopilot";
  o.profilerPlugin = "autopilot";
  return o;
}

std::set<std::string> instanceIdsLogged() {
  static const std::regex kInstance("instance (0x[0-9a-f]+)");
  std::set<std::string> ids;
  for (const auto& r : LogCapture::records()) {
    std::smatch m;
    if (std::regex_search(r.message, m, kInstance)) ids.insert(m[1]);
  }
  return ids;
}

}  // namespace

TEST_CASE("candidate names follow NCCL's resolution rules", "[loader]") {
  using V = std::vector<std::string>;
  CHECK(candidateNames(PluginKind::kNet, "") == V{"libnccl-net.so"});
  CHECK(candidateNames(PluginKind::kTuner, "autopilot") ==
        V{"autopilot", "libnccl-tuner-autopilot.so"});
  CHECK(candidateNames(PluginKind::kProfiler, "autopilot") ==
        V{"autopilot", "libnccl-profiler-autopilot.so"});
  CHECK(candidateNames(PluginKind::kNet, "libfoo.so") == V{"libfoo.so"});
  CHECK(candidateNames(PluginKind::kNet, "/abs/path/x.so") == V{"/abs/path/x.so"});
  CHECK(candidateNames(PluginKind::kNet, "libfoo") == V{"libfoo", "libnccl-net-libfoo.so"});
}

TEST_CASE("the three names resolve to one loaded instance", "[loader]") {
  LogCapture::clear();
  PluginHost host(autopilotEverywhere());
  REQUIRE(host.loadNet());
  REQUIRE(host.loadProfiler());
  REQUIRE(host.loadTuner());
  CHECK(host.net()->version() == 12);
  CHECK(host.tuner()->version() == 7);
  CHECK(host.profiler()->version() == 7);
  CHECK(std::string(host.net()->name()) == "autopilot");
  // Each plugin opened its own file name; the loader returned one handle for the one file.
  CHECK(host.tuner()->library().requested == "libnccl-tuner-autopilot.so");
  CHECK(host.profiler()->library().requested == "libnccl-profiler-autopilot.so");
  CHECK_FALSE(host.tuner()->library().viaNetLibrary);
  CHECK(host.net()->library().handle == host.tuner()->library().handle);
  CHECK(host.net()->library().handle == host.profiler()->library().handle);

  // And the plugin code agrees: every init reports the same instance.
  CommSession session(host, {});
  REQUIRE(session.init() == abi::kSuccess);
  std::set<std::string> ids = instanceIdsLogged();
  CHECK(ids.size() == 1);
  CHECK(LogCapture::count(abi::kLogInfo, "net v12 ready") == 1);
  CHECK(LogCapture::count(abi::kLogInfo, "tuner v7 ready") == 1);
  CHECK(LogCapture::count(abi::kLogInfo, "profiler v7 ready") == 1);
}

TEST_CASE("every exported net version loads and is driven through its adapter", "[loader][net]") {
  for (int v = 8; v <= 12; ++v) {
    DYNAMIC_SECTION("net v" << v) {
      PluginHost::Options o = autopilotEverywhere();
      o.maxNetVersion = v;
      PluginHost host(o);
      REQUIRE(host.loadNet());
      CHECK(host.net()->version() == v);
      CHECK(host.net()->hasMakeVDevice() == (v >= 9));
      CommSession session(host, {});
      REQUIRE(session.init() == abi::kSuccess);
      // A device the plugin never reported is rejected, through every adapter.
      int ndev = session.netDevices();
      abi::NetPropertiesV11 props;
      CHECK(host.net()->getProperties(ndev, &props) == abi::kInvalidArgument);
      char handle[abi::kNetHandleMaxSize] = {};
      void* listenComm = reinterpret_cast<void*>(0xdead);
      void* ctx = nullptr;
      REQUIRE(host.net()->init(&ctx, 7, nullptr, LogCapture::logger(), nullptr) == abi::kSuccess);
      CHECK(host.net()->listen(ctx, ndev, handle, &listenComm) == abi::kInvalidArgument);
      CHECK(listenComm == nullptr);
      CHECK(host.net()->finalize(ctx) == abi::kSuccess);
    }
  }
}

TEST_CASE("every exported tuner version loads and leaves the cost table alone", "[loader][tuner]") {
  for (int v = 3; v <= 7; ++v) {
    DYNAMIC_SECTION("tuner v" << v) {
      PluginHost::Options o = autopilotEverywhere();
      o.maxTunerVersion = v;
      PluginHost host(o);
      REQUIRE(host.loadTuner());
      CHECK(host.tuner()->version() == v);
      CommSession session(host, {});
      REQUIRE(session.init() == abi::kSuccess);
      REQUIRE(session.tunerContext() != nullptr);
      float table[abi::kNumAlgorithms][abi::kNumProtocols];
      for (int a = 0; a < abi::kNumAlgorithms; ++a)
        for (int p = 0; p < abi::kNumProtocols; ++p) table[a][p] = a == 1 ? 10.0f + p : -1.0f;
      float before[abi::kNumAlgorithms][abi::kNumProtocols];
      std::memcpy(before, table, sizeof(table));
      int nChannels = 0;
      CHECK(host.tuner()->getCollInfo(session.tunerContext(), abi::kFuncAllReduce, 1 << 20, 1,
                                      reinterpret_cast<float**>(table), abi::kNumAlgorithms,
                                      abi::kNumProtocols, 0, &nChannels) == abi::kSuccess);
      CHECK(std::memcmp(before, table, sizeof(table)) == 0);
      CHECK(nChannels == 0);
    }
  }
}

TEST_CASE("every exported profiler version loads", "[loader][profiler]") {
  for (int v = 4; v <= 7; ++v) {
    DYNAMIC_SECTION("profiler v" << v) {
      PluginHost::Options o = autopilotEverywhere();
      o.maxProfilerVersion = v;
      PluginHost host(o);
      REQUIRE(host.loadProfiler());
      CHECK(host.profiler()->version() == v);
      CommSession session(host, {});
      REQUIRE(session.init() == abi::kSuccess);
      REQUIRE(session.profilerContext() != nullptr);
      abi::ProfilerEventDescrV5 d{};
      d.type = abi::event::kColl;
      d.coll.func = "AllReduce";
      void* handle = reinterpret_cast<void*>(0x1);
      CHECK(host.profiler()->startEvent(session.profilerContext(), &handle, &d) == abi::kSuccess);
      CHECK(handle != reinterpret_cast<void*>(0x1));  // always written (NULL: not tracked)
      CHECK(host.profiler()->stopEvent(handle) == abi::kSuccess);
    }
  }
}

TEST_CASE("tuner and profiler fall back to the net library", "[loader]") {
  PluginHost::Options o;
  o.netPlugin = "autopilot";
  o.tunerPlugin = "no-such-tuner";
  o.profilerPlugin = "no-such-profiler";
  PluginHost host(o);
  REQUIRE(host.loadNet());
  REQUIRE(host.loadTuner());
  REQUIRE(host.loadProfiler());
  CHECK(host.tuner()->library().viaNetLibrary);
  CHECK(host.profiler()->library().viaNetLibrary);
  CHECK(host.tuner()->library().handle == host.net()->library().handle);
  bool triedSuffix = false;
  for (const auto& d : host.diagnostics()) {
    triedSuffix |= d.find("libnccl-tuner-no-such-tuner.so") != std::string::npos;
  }
  CHECK(triedSuffix);
}

TEST_CASE("'none' disables a plugin and a foreign library is unsupported", "[loader]") {
  PluginHost::Options o;
  o.netPlugin = "none";
  o.tunerPlugin = "none";
  o.profilerPlugin = "none";
  PluginHost host(o);
  CHECK_FALSE(host.loadNet());
  CHECK_FALSE(host.loadTuner());
  CHECK_FALSE(host.loadProfiler());

  PluginHost::Options foreign;
  foreign.netPlugin = "libm.so.6";
  PluginHost host2(foreign);
  CHECK_FALSE(host2.loadNet());
  REQUIRE_FALSE(host2.diagnostics().empty());
  CHECK(host2.diagnostics().back().find("unsupported") != std::string::npos);
}

TEST_CASE("the absolute path and the NCCL_NET_PLUGIN list form both work", "[loader]") {
  PluginHost::Options o;
  o.netPlugin = "missing-one," + autopilot::test::libDir() + "/libnccl-net-autopilot.so";
  PluginHost host(o);
  REQUIRE(host.loadNet());
  CHECK(host.net()->version() == 12);
}

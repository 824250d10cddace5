// Load/unload/reload cycles (NCCL may dlclose and reopen the net library between
// communicators), boundary behaviour on bad input, and bad parameter values.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>

#include "common/host/log_capture.h"
#include "common/host/plugin_host.h"
#include "test/host/host_test_util.h"

using namespace autopilot;
using namespace autopilot::host;

namespace {

PluginHost::Options everywhere() {
  PluginHost::Options o;
  o.netPlugin = "autopilot";
  o.tunerPlugin = "autopilot";
  o.profilerPlugin = "autopilot";
  return o;
}

using test::libraryMapped;

void oneCycle(int comms) {
  PluginHost host(everywhere());
  REQUIRE(host.loadNet());
  REQUIRE(host.loadProfiler());
  REQUIRE(host.loadTuner());
  for (int c = 0; c < comms; ++c) {
    CommSession::Config cfg;
    cfg.commId = 0x100 + c;
    CommSession session(host, cfg);
    REQUIRE(session.init() == abi::kSuccess);
  }
  host.unloadAll();
}

}  // namespace

TEST_CASE("load/unload/reload cycles release everything and keep working", "[lifecycle]") {
  REQUIRE_FALSE(libraryMapped());
  oneCycle(2);  // warm-up: first-use allocations of libc/libstdc++ happen once
  REQUIRE_FALSE(libraryMapped());
  int fds = test::openFds();
  int threads = test::threadCount();
  long rss = test::rssKb();
  for (int i = 0; i < 200; ++i) {
    LogCapture::clear();
    oneCycle(3);
    // The library really went away (no NODELETE, no leaked reference) ...
    REQUIRE_FALSE(libraryMapped());
    // ... and every load was a fresh one: parameters are logged again by the new copy.
    REQUIRE(LogCapture::count(abi::kLogInfo, "NCCL_AUTOPILOT_NET_ENABLE=") == 1);
  }
  CHECK(test::openFds() == fds);
  CHECK(test::threadCount() == threads);
  long growth = test::rssKb() - rss;
  INFO("RSS growth over 200 cycles: " << growth << " KiB");
#if defined(__SANITIZE_ADDRESS__)
  // ASan's quarantine and shadow memory grow RSS by design; LeakSanitizer checks leaks here.
  (void)growth;
#else
  CHECK(growth < 4096);
#endif
}

TEST_CASE("a bad NCCL_AUTOPILOT_* value warns and falls back to the default", "[lifecycle]") {
  setenv("NCCL_AUTOPILOT_TUNER_ENABLE", "banana", 1);
  LogCapture::clear();
  {
    PluginHost host(everywhere());
    REQUIRE(host.loadNet());
    REQUIRE(host.loadTuner());
    CommSession session(host, {});
    CHECK(session.init() == abi::kSuccess);
    CHECK(session.tunerContext() != nullptr);
  }
  unsetenv("NCCL_AUTOPILOT_TUNER_ENABLE");
  CHECK(LogCapture::count(abi::kLogWarn, "NCCL_AUTOPILOT_TUNER_ENABLE='banana' ignored") == 1);
  CHECK(LogCapture::count(abi::kLogInfo,
                          "NCCL_AUTOPILOT_TUNER_ENABLE=1 (default (environment value rejected))") ==
        1);
}

TEST_CASE("a good NCCL_AUTOPILOT_* value is used and its source logged", "[lifecycle]") {
  setenv("NCCL_AUTOPILOT_TUNER_ENABLE", "0", 1);
  LogCapture::clear();
  {
    PluginHost host(everywhere());
    REQUIRE(host.loadTuner());
    CommSession session(host, {});
    CHECK(session.init() == abi::kSuccess);
  }
  unsetenv("NCCL_AUTOPILOT_TUNER_ENABLE");
  CHECK(LogCapture::count(abi::kLogInfo, "NCCL_AUTOPILOT_TUNER_ENABLE=0 (environment)") == 1);
  CHECK(LogCapture::count(abi::kLogInfo, "disabled by NCCL_AUTOPILOT_TUNER_ENABLE=0") == 1);
}

TEST_CASE("entry points reject bad pointers with a result code, never a crash", "[boundary]") {
  PluginHost host(everywhere());
  REQUIRE(host.loadNet());
  REQUIRE(host.loadTuner());
  REQUIRE(host.loadProfiler());
  CommSession session(host, {});
  REQUIRE(session.init() == abi::kSuccess);

  // Tuner: getCollInfo never returns an error, whatever it is given.
  float table[abi::kNumAlgorithms][abi::kNumProtocols] = {};
  int nChannels = 0;
  HostTuner* t = host.tuner();
  CHECK(t->getCollInfo(session.tunerContext(), 99, 1 << 20, 1, reinterpret_cast<float**>(table),
                       abi::kNumAlgorithms, abi::kNumProtocols, 0, &nChannels) == abi::kSuccess);
  CHECK(t->getCollInfo(nullptr, abi::kFuncAllReduce, 1, 1, nullptr, 0, 0, 0, nullptr) ==
        abi::kSuccess);
  CHECK(t->getCollInfo(session.tunerContext(), -1, 0, -5, reinterpret_cast<float**>(table), 0, 0, 1,
                       &nChannels) == abi::kSuccess);
  // Finalizing a NULL context (after a failed init) is fine.
  CHECK(t->finalize(nullptr) == abi::kSuccess);

  // Profiler: NULL handles, NULL state args, NULL context.
  HostProfiler* p = host.profiler();
  CHECK(p->stopEvent(nullptr) == abi::kSuccess);
  CHECK(p->recordEventState(nullptr, abi::state::kProxyStepSendWait, nullptr) == abi::kSuccess);
  void* h = reinterpret_cast<void*>(0x42);
  abi::ProfilerEventDescrV5 d{};
  d.type = abi::event::kProxyOp;
  CHECK(p->startEvent(nullptr, &h, &d) == abi::kSuccess);
  CHECK(h == nullptr);
  CHECK(p->finalize(nullptr) == abi::kSuccess);

  // Net: NULL out-pointers are rejected, finalize(NULL) is tolerated (NCCL calls it after a
  // failed init).
  HostNet* n = host.net();
  CHECK(n->devices(nullptr) == abi::kInvalidArgument);
  CHECK(n->getProperties(-1, nullptr) != abi::kSuccess);
  CHECK(n->finalize(nullptr) == abi::kSuccess);
  int done = 1;
  CHECK(n->test(nullptr, &done, nullptr) == abi::kInvalidArgument);
}

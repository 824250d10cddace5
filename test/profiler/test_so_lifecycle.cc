// Lifecycle of the real library under NCCL's habits (run under AddressSanitizer in CI):
// communicators finalized with collectives in flight, late proxy-thread events after finalize
// and after the context was reused, NULL contexts, several communicators, and the library
// unloaded and reloaded many times. What NCCL Inspector users reported as use-after-free at
// teardown must not happen here; memory, threads and descriptors must come back.
#include <dlfcn.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <vector>

#include "bench/profiler/nccl_replay.h"
#include "common/host/log_capture.h"
#include "common/host/plugin_host.h"
#include "test/host/host_test_util.h"

using namespace autopilot;

namespace {

using test::libraryMapped;

void oneCycle(bool exports) {
  host::PluginHost::Options o;
  o.profilerPlugin = "autopilot";
  host::PluginHost h(o);
  REQUIRE(h.loadProfiler());
  host::HostProfiler* hp = h.profiler();
  std::vector<std::unique_ptr<host::CommSession>> sessions;
  for (int c = 0; c < 3; ++c) {
    host::CommSession::Config cfg;
    cfg.commId = 0x7000 + uint64_t(c);
    cfg.rank = c;
    cfg.nRanks = 3;
    sessions.push_back(std::make_unique<host::CommSession>(h, cfg));
    REQUIRE(sessions.back()->init() == abi::kSuccess);
  }
  replay::CollSpec spec;
  spec.nChannels = 8;
  // Completed collectives on every communicator.
  for (auto& s : sessions) {
    replay::Replayer r(hp, s->profilerContext(), h.activationMask());
    for (int i = 0; i < 20; ++i) r.collective(spec, 1000, 5000);
  }
  // Communicator 0 is finalized with a collective half done; its last channels stop later,
  // as a proxy thread could still report them.
  replay::Replayer r0(hp, sessions[0]->profilerContext(), h.activationMask());
  replay::Enqueued inFlight = r0.enqueue(spec);
  std::vector<void*> channels;
  for (int ch = 0; ch < 8; ++ch) {
    abi::ProfilerEventDescrV5 d{};
    d.type = abi::event::kKernelCh;
    d.parentObj = inFlight.coll;
    d.kernelCh.channelId = uint8_t(ch);
    d.kernelCh.pTimer = 10;
    void* k = nullptr;
    hp->startEvent(sessions[0]->profilerContext(), &k, &d);
    channels.push_back(k);
  }
  for (int ch = 0; ch < 4; ++ch) hp->stopEvent(channels[size_t(ch)]);
  sessions[0]->finalize();
  for (int ch = 4; ch < 8; ++ch) {
    abi::ProfilerEventStateArgsV5 a{};
    a.kernelCh.pTimer = 20;
    hp->recordEventState(channels[size_t(ch)], abi::state::kKernelChStop, &a);
    hp->stopEvent(channels[size_t(ch)]);
  }
  // A new communicator reuses the retired context; stale handles of the old one still point to
  // valid memory. NULL context (a failed init) is harmless.
  host::CommSession::Config cfg;
  cfg.commId = 0x7100;
  host::CommSession reuse(h, cfg);
  REQUIRE(reuse.init() == abi::kSuccess);
  hp->stopEvent(channels[0]);
  hp->stopEvent(inFlight.coll);
  void* nothing = reinterpret_cast<void*>(0x1);
  abi::ProfilerEventDescrV5 d{};
  d.type = abi::event::kColl;
  hp->startEvent(nullptr, &nothing, &d);
  CHECK(nothing == nullptr);
  // Communicator 1 keeps a collective that never completes (its kernel never reports) when the
  // library goes away: finalize and unload must still release everything.
  replay::Replayer r1(hp, sessions[1]->profilerContext(), h.activationMask());
  r1.enqueue(spec);
  (void)exports;
  reuse.finalize();
  sessions.clear();
  h.unloadAll();
}

}  // namespace

TEST_CASE("load / use / finalize with events in flight / unload cycles", "[lifecycle]") {
  std::string dir = "/tmp/ap-prof-lifecycle-" + std::to_string(getpid());
  setenv("NCCL_AUTOPILOT_TRACE_FILE", (dir + "-trace-%c.json").c_str(), 1);
  setenv("NCCL_AUTOPILOT_PROM_FILE", (dir + ".prom").c_str(), 1);
  setenv("NCCL_AUTOPILOT_PROFILER_INTERVAL_MS", "1", 1);
  REQUIRE_FALSE(libraryMapped());
  oneCycle(true);  // warm-up: first-use allocations of libc/libstdc++ happen once
  REQUIRE_FALSE(libraryMapped());
  int fds = test::openFds();
  int threads = test::threadCount();
  long rss = test::rssKb();
  for (int i = 0; i < 40; ++i) {
    host::LogCapture::clear();
    oneCycle(true);
    REQUIRE_FALSE(libraryMapped());
    // Each load logs its summaries: 3 communicators + the reused one.
    CHECK(host::LogCapture::count(abi::kLogInfo, "profiler summary: comm") == 4);
  }
  CHECK(test::openFds() == fds);
  CHECK(test::threadCount() == threads);
  long growth = test::rssKb() - rss;
  INFO("RSS growth over 40 cycles: " << growth << " KiB");
#if defined(__SANITIZE_ADDRESS__)
  (void)growth;  // ASan's quarantine grows RSS by design; LeakSanitizer checks leaks
#else
  CHECK(growth < 8192);
#endif
  unsetenv("NCCL_AUTOPILOT_TRACE_FILE");
  unsetenv("NCCL_AUTOPILOT_PROM_FILE");
  unsetenv("NCCL_AUTOPILOT_PROFILER_INTERVAL_MS");
  for (uint64_t c : {0x7000, 0x7001, 0x7002, 0x7100}) {
    char path[256];
    std::snprintf(path, sizeof(path), "%s-trace-%llx.json", dir.c_str(),
                  static_cast<unsigned long long>(c));
    unlink(path);
  }
  unlink((dir + ".prom").c_str());
}

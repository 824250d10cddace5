// Every NCCL release we claim, reproduced by the harness: which symbol it picks from our
// library (the newest it knows, for 2.28 .. 2.32) and one full call sequence per plugin in its
// dialect (load, init, the calls that release makes, teardown). The full suites elsewhere drive
// the newest dialect (2.32); these smoke runs keep the older ones covered at little CI cost.
#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

#include "common/host/log_capture.h"
#include "common/host/nccl_releases.h"
#include "common/host/plugin_host.h"

using namespace autopilot;
using namespace autopilot::host;

namespace {

PluginHost::Options forRelease(const NcclRelease& r) {
  PluginHost::Options o;
  o.nccl = r.label();
  o.netPlugin = "autopilot";
  o.tunerPlugin = "autopilot";
  o.profilerPlugin = "autopilot";
  return o;
}

// The first version in the release's order that our library exports.
int expectedPick(const std::vector<int>& order, int oldest, int newest) {
  for (int v : order) {
    if (v >= oldest && v <= newest) return v;
  }
  return 0;
}

bool atLeast(const NcclRelease& r, int minor) { return r.major > 2 || r.minor >= minor; }

}  // namespace

TEST_CASE("each NCCL release picks the newest symbol it knows that we export", "[dialect]") {
  for (const NcclRelease& r : ncclReleases()) {
    DYNAMIC_SECTION("NCCL " << r.label()) {
      PluginHost host(forRelease(r));
      // Claims (README): net from 2.20 (v8), tuner from 2.22 (v3), profiler from 2.27 (v4).
      CHECK(host.loadNet() == atLeast(r, 20));
      CHECK(host.loadTuner() == atLeast(r, 22));
      CHECK(host.loadProfiler() == atLeast(r, 27));
      if (host.net()) CHECK(host.net()->version() == expectedPick(r.net, 8, 12));
      if (host.tuner()) CHECK(host.tuner()->version() == expectedPick(r.tuner, 3, 7));
      if (host.profiler()) CHECK(host.profiler()->version() == expectedPick(r.profiler, 4, 7));
      // From 2.28 on, every plugin speaks the release's own (newest) dialect.
      if (atLeast(r, 28)) {
        CHECK(host.net()->version() == r.net.front());
        CHECK(host.tuner()->version() == r.tuner.front());
        CHECK(host.profiler()->version() == r.profiler.front());
      }
    }
  }
}

TEST_CASE("one full call sequence per plugin in each dialect from 2.28 to 2.32", "[dialect]") {
  for (const char* label : {"2.28", "2.29", "2.30", "2.31", "2.32"}) {
    DYNAMIC_SECTION("NCCL " << label) {
      const NcclRelease& r = *findNcclRelease(label);
      LogCapture::clear();
      PluginHost host(forRelease(r));
      REQUIRE(host.loadNet());
      REQUIRE(host.loadProfiler());
      REQUIRE(host.loadTuner());
      CommSession::Config cfg;
      cfg.commId = 0xd1a1ec7;
      CommSession session(host, cfg);
      REQUIRE(session.init() == abi::kSuccess);
      REQUIRE(session.netUsable());

      // net: properties in the newest shape; v12 names our rail grouping.
      abi::NetPropertiesV12 props;
      REQUIRE(host.net()->getPropertiesV12(0, &props) == abi::kSuccess);
      CHECK(std::string(props.name).size() > 0);
      CHECK(props.vProps.ndevs == 1);
      CHECK(props.planeId == abi::kNetIdUndef);
      CHECK(props.railId == (host.net()->version() >= 12 ? 0 : abi::kNetIdUndef));

      // tuner: questions about the function ids a release may pass (2.29's new ones, among them
      // AllGather as 2.30's broadcast path asks, and ids out of range leave the table as it
      // was), and a chunk-size query per scheduled task. 2.30's symmetric-kernel check, which
      // asks twice about one task, runs through the learning loop in
      // test/tuner/host/test_profiler_feeds_tuner.cc.
      float table[abi::kNumAlgorithms][abi::kNumProtocols];
      for (int a = 0; a < abi::kNumAlgorithms; ++a)
        for (int p = 0; p < abi::kNumProtocols; ++p) table[a][p] = a == 1 ? 10.0f + p : -1.0f;
      float before[abi::kNumAlgorithms][abi::kNumProtocols];
      std::memcpy(before, table, sizeof(table));
      int nChannels = 0;
      std::vector<int> funcs = {abi::kFuncBroadcast, abi::kFuncAllGather, abi::kFuncAllReduce};
      if (atLeast(r, 29)) {
        funcs.insert(funcs.end(), {abi::kFuncAllGatherV, abi::kFuncPutSignal, abi::kFuncWaitSignal,
                                   15, 1000, -1});
      }
      for (int f : funcs) {
        CHECK(host.tuner()->getCollInfo(session.tunerContext(), f, 1 << 20, 1,
                                        reinterpret_cast<float**>(table), abi::kNumAlgorithms,
                                        abi::kNumProtocols, 0, &nChannels) == abi::kSuccess);
      }
      CHECK(std::memcmp(before, table, sizeof(table)) == 0);
      CHECK(host.tuner()->hasGetChunkSize() == atLeast(r, 30));
      for (int f : funcs) {
        size_t chunk = 131072;
        CHECK(host.tuner()->getChunkSize(session.tunerContext(), f, 1 << 20, abi::kAlgoRing,
                                         abi::kProtoSimple, 8, &chunk) == abi::kSuccess);
        CHECK(chunk == 131072);  // NCCL's value passes through
      }
      CHECK(host.tuner()->getChunkSize(session.tunerContext(), abi::kFuncAllReduce, 1, 99, -5, 0,
                                       nullptr) == abi::kSuccess);

      // profiler: one all-reduce whose kernel-channel events arrive from another thread (NCCL
      // 2.31 delivers them from its own profiler thread), and one copy-engine all-gather.
      HostProfiler* p = host.profiler();
      void* ctx = session.profilerContext();
      REQUIRE(ctx != nullptr);
      abi::ProfilerEventDescrV7 d{};
      d.type = abi::event::kColl;
      d.coll.func = "AllReduce";
      d.coll.datatype = "ncclFloat32";
      d.coll.count = 1024;
      d.coll.nChannels = 2;
      d.coll.algo = "RING";  // NCCL's Coll descriptor spelling
      d.coll.proto = "SIMPLE";
      d.coll.userTag = 7;
      void* coll = nullptr;
      REQUIRE(p->startEvent(ctx, &coll, &d) == abi::kSuccess);
      REQUIRE(coll != nullptr);
      CHECK(p->stopEvent(coll) == abi::kSuccess);
      std::thread profilerThread([&] {
        for (int c = 0; c < 2; ++c) {
          abi::ProfilerEventDescrV7 k{};
          k.type = abi::event::kKernelCh;
          k.parentObj = coll;
          k.kernelCh.channelId = uint8_t(c);
          k.kernelCh.pTimer = 1000;
          void* ch = nullptr;
          p->startEvent(ctx, &ch, &k);
          abi::ProfilerEventStateArgsV7 a{};
          a.kernelCh.pTimer = 5000;
          p->recordEventState(ch, abi::state::kKernelChStop, &a);
          p->stopEvent(ch);
        }
      });
      profilerThread.join();
      abi::ProfilerEventDescrV7 ce{};
      ce.type = abi::event::kCeColl;
      ce.ceColl.func = "AllGather";
      ce.ceColl.datatype = "ncclInt8";
      ce.ceColl.count = 64;
      void* ceHandle = reinterpret_cast<void*>(0x1);
      CHECK(p->startEvent(ctx, &ceHandle, &ce) == abi::kSuccess);
      CHECK((ceHandle != nullptr) == atLeast(r, 29));
      CHECK(p->stopEvent(ceHandle) == abi::kSuccess);

      session.finalize();
      host.unloadAll();
      CHECK(LogCapture::count(abi::kLogWarn, "internal error") == 0);
    }
  }
}

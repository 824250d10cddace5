// The real library under NCCL 2.29-2.32's profiler dialects (v6, v7), loaded through the
// harness: per-call user tags, kernel variants and kernel phases reach the trace and the
// Inspector lines, copy-engine collectives are counted and exported, and event types or states
// a newer NCCL may add are ignored.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "common/host/log_capture.h"
#include "common/host/plugin_host.h"

using namespace autopilot;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t countOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }
  const char* name_;
};

// One kernel collective with NCCL 2.31's v7 fields, two channels, three phases each (none with
// withPhases false, as from a kernel that reports none).
void taggedCollective(host::HostProfiler* p, void* ctx, uint64_t seq, uint64_t gpu,
                      bool withPhases = true) {
  abi::ProfilerEventDescrV7 d{};
  d.type = abi::event::kColl;
  d.coll.seqNumber = seq;
  d.coll.func = "AllReduce";
  d.coll.count = 1 << 18;
  d.coll.datatype = "ncclFloat32";
  d.coll.nChannels = 2;
  d.coll.algo = "Ring";
  d.coll.proto = "Simple";
  d.coll.kernelVariant = "RING_SIMPLE_SUM_F32";
  d.coll.isSymColl = true;
  d.coll.userTag = 0xfeed;
  void* coll = nullptr;
  REQUIRE(p->startEvent(ctx, &coll, &d) == abi::kSuccess);
  REQUIRE(coll != nullptr);
  p->stopEvent(coll);
  for (int c = 0; c < 2; ++c) {
    abi::ProfilerEventDescrV7 k{};
    k.type = abi::event::kKernelCh;
    k.parentObj = coll;
    k.kernelCh.channelId = uint8_t(c);
    k.kernelCh.pTimer = gpu;
    void* ch = nullptr;
    p->startEvent(ctx, &ch, &k);
    REQUIRE(ch != nullptr);
    // Phases: 10 us initial sync, 60 us compute, 10 us final sync.
    const uint64_t bounds[4] = {gpu, gpu + 10000, gpu + 70000, gpu + 80000};
    for (int ph = 0; ph < (withPhases ? 3 : 0); ++ph) {
      abi::ProfilerEventDescrV7 e{};
      e.type = abi::event::kKernelPhase;
      e.parentObj = ch;
      e.kernelPhase.channelId = uint8_t(c);
      e.kernelPhase.phaseId = uint8_t(ph);
      e.kernelPhase.phaseName = "phase";
      e.kernelPhase.pTimer = bounds[ph];
      void* h = nullptr;
      p->startEvent(ctx, &h, &e);
      if (p->version() < 7) {  // NCCL before 2.31 has no phases
        CHECK(h == nullptr);
        continue;
      }
      REQUIRE(h != nullptr);
      abi::ProfilerEventStateArgsV7 a{};
      a.kernelCh.pTimer = bounds[ph + 1];
      p->recordEventState(h, abi::state::kKernelPhaseStop, &a);
      p->stopEvent(h);
    }
    abi::ProfilerEventStateArgsV7 a{};
    a.kernelCh.pTimer = gpu + 80000;
    p->recordEventState(ch, abi::state::kKernelChStop, &a);
    p->stopEvent(ch);
  }
}

void copyEngineCollective(host::HostProfiler* p, void* ctx, uint64_t seq) {
  abi::ProfilerEventDescrV7 d{};
  d.type = abi::event::kCeColl;
  d.ceColl.seqNumber = seq;
  d.ceColl.func = "AllGather";
  d.ceColl.count = 4096;
  d.ceColl.datatype = "ncclInt8";
  d.ceColl.syncStrategy = "UC";
  d.ceColl.userTag = 0xce;
  void* ce = nullptr;
  REQUIRE(p->startEvent(ctx, &ce, &d) == abi::kSuccess);
  if (p->version() < 6) {
    CHECK(ce == nullptr);  // NCCL's v5 adapter discards CE events
    return;
  }
  REQUIRE(ce != nullptr);
  // Children NCCL emits under it: not measured, never a crash.
  abi::ProfilerEventDescrV7 child{};
  child.type = abi::event::kCeSync;
  child.parentObj = ce;
  child.ceCollSync.nRanks = 4;
  void* h = reinterpret_cast<void*>(0x1);
  p->startEvent(ctx, &h, &child);
  CHECK(h == nullptr);
  child.type = abi::event::kCeBatch;
  child.ceCollBatch.numOps = 3;
  h = reinterpret_cast<void*>(0x1);
  p->startEvent(ctx, &h, &child);
  CHECK(h == nullptr);
  p->recordEventState(ce, abi::state::kCeCollComplete, nullptr);
  p->stopEvent(ce);
}

}  // namespace

TEST_CASE("profiler v7: user tags, kernel variants and phases reach the exports",
          "[profiler][v7]") {
  std::string dir = "/tmp/ap-prof-v7-" + std::to_string(getpid());
  REQUIRE(mkdir(dir.c_str(), 0755) == 0);
  std::string tracePath = dir + "/trace.json";
  std::string inspectorPath = dir + "/inspector.jsonl";
  {
    ScopedEnv trace("NCCL_AUTOPILOT_TRACE_FILE", tracePath);
    ScopedEnv inspector("NCCL_AUTOPILOT_INSPECTOR_FILE", inspectorPath);
    host::PluginHost::Options o;
    o.nccl = "2.31";
    o.profilerPlugin = "autopilot";
    host::PluginHost h(o);
    REQUIRE(h.loadProfiler());
    REQUIRE(h.profiler()->version() == 7);
    host::CommSession s(h, {});
    REQUIRE(s.init() == abi::kSuccess);
    // Default mask Coll|KernelCh|CeColl, plus KernelPhase because a trace is written.
    CHECK((*h.activationMask() & int(abi::event::kCeColl)) != 0);
    CHECK((*h.activationMask() & int(abi::event::kKernelPhase)) != 0);
    host::HostProfiler* p = h.profiler();
    void* ctx = s.profilerContext();
    for (int i = 0; i < 5; ++i)
      taggedCollective(p, ctx, uint64_t(i), 1000000 + uint64_t(i) * 1000000);
    // Then collectives without phases, enough to reuse every record the first five used: none
    // may show their phases.
    for (int i = 5; i < 5 + 3 * 64; ++i)
      taggedCollective(p, ctx, uint64_t(i), 1000000 + uint64_t(i) * 1000000, false);
    copyEngineCollective(p, ctx, 0);
    // What a newer NCCL might send: an event type and a state nobody defined yet.
    abi::ProfilerEventDescrV7 unknown{};
    unknown.type = uint64_t(1) << 20;
    void* handle = reinterpret_cast<void*>(0x1);
    CHECK(p->startEvent(ctx, &handle, &unknown) == abi::kSuccess);
    CHECK(handle == nullptr);
    s.finalize();
  }
  std::string trace = readFile(tracePath);
  INFO(trace.substr(0, 4000));
  CHECK(countOf(trace, "\"user_tag\":65261") >= 5);
  CHECK(countOf(trace, "\"kernel_variant\":\"RING_SIMPLE_SUM_F32\"") == 5 + 3 * 64);
  CHECK(countOf(trace, "\"symmetric\":true") == 5 + 3 * 64);
  CHECK(countOf(trace, "\"phase_sync_us\"") == 5);
  // Two channels x 3 phases x 5 collectives; 2 x 20 us of sync and 2 x 60 us of compute each.
  CHECK(countOf(trace, "\"cat\":\"kernel_phase\"") == 30);
  CHECK(countOf(trace, "\"phase_sync_us\":40.000,\"phase_compute_us\":120.000") == 5);
  CHECK(countOf(trace, "\"name\":\"compute\"") == 10);
  CHECK(countOf(trace, "\"name\":\"AllGather (copy engine)\"") == 1);
  CHECK(countOf(trace, "\"user_tag\":206,\"engine\":\"copy\"") == 1);
  std::string lines = readFile(inspectorPath);
  INFO(lines);
  CHECK(countOf(lines, "\"user_tag\":65261,\"engine\":\"kernel\"") == 5 + 3 * 64);
  CHECK(countOf(lines, "\"user_tag\":206,\"engine\":\"copy\"") == 1);
  unlink(tracePath.c_str());
  unlink(inspectorPath.c_str());
  CHECK(rmdir(dir.c_str()) == 0);
}

TEST_CASE("older profiler dialects never see what their version cannot describe",
          "[profiler][v7]") {
  for (const char* nccl : {"2.28", "2.29", "2.30"}) {
    DYNAMIC_SECTION("NCCL " << nccl) {
      host::LogCapture::clear();
      host::PluginHost::Options o;
      o.nccl = nccl;
      o.profilerPlugin = "autopilot";
      host::PluginHost h(o);
      REQUIRE(h.loadProfiler());
      int expected = std::string(nccl) == "2.28" ? 5 : 6;
      REQUIRE(h.profiler()->version() == expected);
      host::CommSession s(h, {});
      REQUIRE(s.init() == abi::kSuccess);
      // The requested mask stays within the version's event bits.
      uint64_t known = expected == 5 ? abi::event::kAllV5 : abi::event::kAllV6;
      CHECK((uint64_t(*h.activationMask()) & ~known) == 0);
      CHECK(((*h.activationMask() & int(abi::event::kCeColl)) != 0) == (expected >= 6));
      taggedCollective(h.profiler(), s.profilerContext(), 1, 5000000);
      copyEngineCollective(h.profiler(), s.profilerContext(), 1);
      s.finalize();
      CHECK(host::LogCapture::count(abi::kLogInfo,
                                    "profiler v" + std::to_string(expected) + " ready") == 1);
    }
  }
}

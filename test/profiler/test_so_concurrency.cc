// NCCL's threads against the real library at once: per communicator an application thread
// (Coll start, hand-off to the proxy, Coll stop, racing the proxy's first events) and a proxy
// thread (kernel channels, proxy ops, net transfers), two communicators, and the service thread
// exporting every millisecond. Run under ThreadSanitizer in CI (scripts/ap.sh test): any data
// race fails it; everywhere, every collective must complete exactly once.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "bench/profiler/nccl_replay.h"
#include "common/host/log_capture.h"
#include "common/host/plugin_host.h"

using namespace autopilot;

namespace {

// NCCL hands work to its proxy thread through its own synchronised, bounded queues (the
// application blocks when too much is in flight); so does this test.
class HandOff {
 public:
  void push(void* coll) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return q_.size() < kMaxInFlight; });
      q_.push_back(coll);
    }
    cv_.notify_all();
  }
  void* pop() {
    void* c;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return !q_.empty(); });
      c = q_.front();
      q_.pop_front();
    }
    cv_.notify_all();
    return c;
  }
  static constexpr size_t kMaxInFlight = 64;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<void*> q_;
};

constexpr int kCollectives = 3000;
constexpr int kChannels = 4;

void application(host::HostProfiler* hp, void* ctx, HandOff* toProxy) {
  for (int i = 0; i < kCollectives; ++i) {
    abi::ProfilerEventDescrV5 d{};
    d.type = abi::event::kColl;
    d.coll.seqNumber = uint64_t(i);
    d.coll.func = "AllReduce";
    d.coll.datatype = "ncclFloat32";
    d.coll.count = 1024;
    d.coll.algo = i % 2 ? "RING" : "TREE";  // NCCL's Coll descriptor spelling
    d.coll.proto = "SIMPLE";
    d.coll.nChannels = kChannels;
    void* coll = nullptr;
    hp->startEvent(ctx, &coll, &d);
    toProxy->push(coll);  // posted before NCCL stops the task events: the stop races the proxy
    if (coll) hp->stopEvent(coll);
  }
  toProxy->push(reinterpret_cast<void*>(0x1));  // done
}

void proxy(host::HostProfiler* hp, void* ctx, HandOff* fromApp) {
  uint64_t gpu = 1000;
  for (;;) {
    void* coll = fromApp->pop();
    if (coll == reinterpret_cast<void*>(0x1)) return;
    if (coll == nullptr) continue;
    abi::ProfilerEventDescrV5 d{};
    d.type = abi::event::kProxyOp;
    d.parentObj = coll;
    d.proxyOp.pid = getpid();
    d.proxyOp.isSend = 1;
    void* op = nullptr;
    hp->startEvent(ctx, &op, &d);
    abi::ProfilerNetSockDescrV1 sock{};
    sock.type = 1;
    sock.sock.fd = 5;
    sock.sock.length = 4096;
    d = {};
    d.type = abi::event::kNetPlugin;
    d.netPlugin.id = abi::net_event::kTypeSocket | 1;
    d.netPlugin.data = &sock;
    void* net = nullptr;
    hp->startEvent(ctx, &net, &d);
    for (int c = 0; c < kChannels; ++c) {
      d = {};
      d.type = abi::event::kKernelCh;
      d.parentObj = coll;
      d.kernelCh.channelId = uint8_t(c);
      d.kernelCh.pTimer = gpu;
      void* k = nullptr;
      hp->startEvent(ctx, &k, &d);
      if (k == nullptr) continue;
      abi::ProfilerEventStateArgsV5 a{};
      a.kernelCh.pTimer = gpu + 500;
      hp->recordEventState(k, abi::state::kKernelChStop, &a);
      hp->stopEvent(k);
    }
    if (net) hp->stopEvent(net);
    if (op) hp->stopEvent(op);
    gpu += 1000;
  }
}

}  // namespace

TEST_CASE("application and proxy threads of two communicators, service thread exporting",
          "[concurrency]") {
  std::string base = "/tmp/ap-prof-conc-" + std::to_string(getpid());
  setenv("NCCL_AUTOPILOT_PROFILER_EVENTS", "202", 1);  // Coll|ProxyOp|KernelCh|NetPlugin
  setenv("NCCL_AUTOPILOT_PROFILER_INTERVAL_MS", "1", 1);
  setenv("NCCL_AUTOPILOT_PROM_INTERVAL_MS", "100", 1);
  setenv("NCCL_AUTOPILOT_TRACE_FILE", (base + "-%c.json").c_str(), 1);
  setenv("NCCL_AUTOPILOT_PROM_FILE", (base + ".prom").c_str(), 1);
  host::LogCapture::clear();
  {
    host::PluginHost::Options o;
    o.profilerPlugin = "autopilot";
    host::PluginHost h(o);
    REQUIRE(h.loadProfiler());
    host::CommSession::Config ca, cb;
    ca.commId = 0xc0a;
    cb.commId = 0xc0b;
    host::CommSession a(h, ca), b(h, cb);
    REQUIRE(a.init() == abi::kSuccess);
    REQUIRE(b.init() == abi::kSuccess);
    HandOff qa, qb;
    std::thread appA(application, h.profiler(), a.profilerContext(), &qa);
    std::thread proxyA(proxy, h.profiler(), a.profilerContext(), &qa);
    std::thread appB(application, h.profiler(), b.profilerContext(), &qb);
    std::thread proxyB(proxy, h.profiler(), b.profilerContext(), &qb);
    appA.join();
    appB.join();
    proxyA.join();
    proxyB.join();
    a.finalize();
    b.finalize();
  }
  for (const char* v : {"NCCL_AUTOPILOT_PROFILER_EVENTS", "NCCL_AUTOPILOT_PROFILER_INTERVAL_MS",
                        "NCCL_AUTOPILOT_PROM_INTERVAL_MS", "NCCL_AUTOPILOT_TRACE_FILE",
                        "NCCL_AUTOPILOT_PROM_FILE"}) {
    unsetenv(v);
  }
  unlink((base + "-c0a.json").c_str());
  unlink((base + "-c0b.json").c_str());
  unlink((base + ".prom").c_str());
  // Every collective completed exactly once on each communicator, none dropped.
  std::string summaries;
  for (const auto& rec : host::LogCapture::records()) {
    if (rec.message.find("summary: comm") != std::string::npos) summaries += rec.message + "\n";
  }
  INFO(summaries);
  CHECK(host::LogCapture::count(abi::kLogInfo,
                                "comm 0xc0a '' rank 0/2: 3000 collectives completed") == 1);
  CHECK(host::LogCapture::count(abi::kLogInfo,
                                "comm 0xc0b '' rank 0/2: 3000 collectives completed") == 1);
  // (No tuner drains the bus here: its ring fills and later samples are counted as bus-full.)
  CHECK(host::LogCapture::count(abi::kLogInfo, "dropped: 0 pool-full, 0 queue-full") == 2);
  CHECK(host::LogCapture::count(abi::kLogInfo, "0 other-clock, 0 reclaimed") == 2);
}

// NCCL's profiler event sequences (docs/nccl-plugin-abi.md §3), replayed through the
// harness with known GPU timers: what reaches the measurement bus, in which clock, with which
// size and arm, and how the plugin copes with NCCL's odd orders and NULLs.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "common/comm_registry.h"
#include "common/event_journal.h"
#include "common/rail_telemetry.h"
#include "profiler_plugin/nccl_net_rails.h"
#include "profiler_plugin/service.h"
#include "test/profiler/replay_fixture.h"

using namespace autopilot;
using autopilot::test::drainBus;
using autopilot::test::InProcessProfiler;
using replay::CollSpec;

TEST_CASE("a blocking all-reduce on 16 channels yields one GPU-timed bus sample", "[replay]") {
  for (int version : {5, 4}) {
    DYNAMIC_SECTION("profiler v" << version) {
      InProcessProfiler p(version);
      REQUIRE(p.loaded);
      auto& s = p.open(0xA11, 2, 8, "replay");
      REQUIRE(s.profilerContext() != nullptr);
      // Default mask: Coll | KernelCh, ORed into NCCL's global mask.
      CHECK((*p.host->activationMask() & (abi::event::kColl | abi::event::kKernelCh)) ==
            int(abi::event::kColl | abi::event::kKernelCh));
      CHECK(bus::MeasurementBus::instance().attached(0xA11));
      comms::CommInfo info;
      REQUIRE(comms::lookup(0xA11, &info));
      CHECK(info.rank == 2);

      auto r = p.replayer(s);
      CollSpec spec;
      spec.count = 262144;  // 1 MiB of float32
      spec.seqNumber = 41;
      // Channel c runs [1e9 + 10c, 1e9 + 50000 - 10c]: the collective spans exactly 50 us.
      r.collective(spec, 1000000000ull, 50000, 10);
      auto samples = drainBus(0xA11);
      REQUIRE(samples.size() == 1);
      const bus::CollectiveSample& x = samples[0];
      CHECK(x.commId == 0xA11);
      CHECK(x.seqNumber == 41);
      CHECK(x.func == abi::kFuncAllReduce);
      CHECK(x.algo == abi::kAlgoRing);
      CHECK(x.proto == abi::kProtoSimple);
      CHECK(x.nChannels == 16);
      CHECK(x.nBytes == 262144 * 4);
      CHECK(x.clock == bus::DurationClock::kGpu);
      CHECK(x.durationNs == 50000);
      CHECK(x.completedAtNs > 0);
    }
  }
}

TEST_CASE("bus sizes follow the tuner's nBytes rules and every NCCL name maps", "[replay]") {
  InProcessProfiler p;
  auto& s = p.open(0xB22, 0, 4);
  auto r = p.replayer(s);
  struct Case {
    const char* func;
    const char* datatype;
    size_t count;
    uint64_t bytes;
  } cases[] = {
      {"AllReduce", "ncclFloat16", 1000, 2000},
      {"AllGather", "ncclInt8", 4096, 4096 * 4},         // count in bytes, times nRanks
      {"ReduceScatter", "ncclFloat32", 10, 10 * 4 * 4},  // times nRanks
      {"Broadcast", "ncclInt8", 777, 777},
      {"Reduce", "ncclFloat64", 3, 24},
      {"AllReduce", "ncclBfloat16", 5, 10},
  };
  const char* algos[] = {"Tree",     "Ring", "CollNetDirect", "CollNetChain", "NVLS",
                         "NVLSTree", "PAT"};
  const char* protos[] = {"LL", "LL128", "Simple"};
  uint64_t seq = 0;
  for (const Case& c : cases) {
    for (int a = 0; a < 7; ++a) {
      CollSpec spec;
      spec.func = c.func;
      spec.datatype = c.datatype;
      spec.count = c.count;
      spec.algo = algos[a];
      spec.proto = protos[a % 3];
      spec.nChannels = 1 + a;
      spec.seqNumber = seq++;
      r.collective(spec, 5000, 1000);
      auto samples = drainBus(0xB22);
      REQUIRE(samples.size() == 1);
      CHECK(samples[0].nBytes == c.bytes);
      CHECK(samples[0].algo == a);
      CHECK(samples[0].proto == a % 3);
      CHECK(samples[0].nChannels == 1 + a);
      CHECK(samples[0].durationNs == 1000);
    }
  }
  // Unknown names are -1, never a crash.
  CollSpec odd;
  odd.func = "FutureColl";
  odd.algo = "Quantum";
  odd.proto = nullptr;
  odd.datatype = "ncclFloat4";
  r.collective(odd, 5000, 1000);
  auto samples = drainBus(0xB22);
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].func == -1);
  CHECK(samples[0].algo == -1);
  CHECK(samples[0].proto == -1);
  CHECK(samples[0].nBytes == 0);
}

TEST_CASE("odd orders: completion is the last child's stop, whatever the order", "[replay]") {
  InProcessProfiler p;
  auto& s = p.open(0xC33);
  auto r = p.replayer(s);
  CollSpec spec;
  spec.nChannels = 4;
  host::HostProfiler* hp = p.host->profiler();

  SECTION("all channels start before any stops; stops in reverse order") {
    auto e = r.enqueue(spec);
    void* h[4];
    for (int c = 0; c < 4; ++c) {
      abi::ProfilerEventDescrV5 d{};
      d.type = abi::event::kKernelCh;
      d.parentObj = e.coll;
      d.kernelCh.channelId = uint8_t(c);
      d.kernelCh.pTimer = 100 + c;
      h[c] = nullptr;
      hp->startEvent(s.profilerContext(), &h[c], &d);
      REQUIRE(h[c] != nullptr);
    }
    for (int c = 3; c >= 0; --c) {
      CHECK(drainBus(0xC33).empty());  // not complete while a channel is running
      abi::ProfilerEventStateArgsV5 a{};
      a.kernelCh.pTimer = 10100 + c;
      hp->recordEventState(h[c], abi::state::kKernelChStop, &a);
      hp->stopEvent(h[c]);
    }
    auto samples = drainBus(0xC33);
    REQUIRE(samples.size() == 1);
    CHECK(samples[0].durationNs == 10003);  // 10103 - 100
  }

  SECTION("channels on non-contiguous ids (3, 17, 40, 63) are all awaited") {
    auto e = r.enqueue(spec);
    int ids[] = {3, 17, 40, 63};
    for (int i = 0; i < 4; ++i) {
      CHECK(drainBus(0xC33).empty());
      r.kernelChannel(e, ids[i], 1000 + i, 2000 + 100 * i);
    }
    auto samples = drainBus(0xC33);
    REQUIRE(samples.size() == 1);
    CHECK(samples[0].durationNs == 1300);  // 2300 - 1000
  }

  SECTION("children finish before NCCL stops the Coll event") {
    // Build the Coll by hand so its stop can come last.
    abi::ProfilerEventDescrV5 d{};
    d.type = abi::event::kColl;
    d.coll.func = "AllReduce";
    d.coll.datatype = "ncclInt32";
    d.coll.count = 16;
    d.coll.algo = "TREE";
    d.coll.proto = "LL";
    d.coll.nChannels = 2;
    void* coll = nullptr;
    hp->startEvent(s.profilerContext(), &coll, &d);
    REQUIRE(coll != nullptr);
    replay::Enqueued e;
    e.coll = coll;
    e.mask = r.mask();
    r.kernelChannel(e, 0, 500, 900);
    r.kernelChannel(e, 1, 510, 950);
    CHECK(drainBus(0xC33).empty());  // NCCL still holds the Coll handle
    hp->stopEvent(coll);
    auto samples = drainBus(0xC33);
    REQUIRE(samples.size() == 1);
    CHECK(samples[0].durationNs == 450);
    CHECK(samples[0].nBytes == 64);
  }

  SECTION("two collectives in flight complete independently, interleaved") {
    auto a = r.enqueue(spec);
    auto b = r.enqueue(spec);
    for (int c = 0; c < 4; ++c) {
      r.kernelChannel(b, c, 7000, 7500);
      r.kernelChannel(a, c, 1000, 3000);
    }
    auto samples = drainBus(0xC33);
    REQUIRE(samples.size() == 2);
    CHECK(samples[0].durationNs + samples[1].durationNs == 2500);
  }
}

TEST_CASE("host clock: durations without GPU timers, never mixed with GPU ones", "[replay]") {
  SECTION("a communicator whose first sample has no GPU timers publishes host durations") {
    InProcessProfiler p;
    auto& s = p.open(0xD44);
    auto r = p.replayer(s);
    CollSpec spec;
    spec.nChannels = 2;
    // The plugin's host clock runs from Coll start (inside enqueue) to the last channel's stop;
    // bracket both ends with the test's own readings of the same monotonic clock, so the bounds
    // hold however long the scheduler keeps this thread away.
    auto beforeEnqueue = std::chrono::steady_clock::now();
    auto e = r.enqueue(spec);
    auto afterEnqueue = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    r.kernelChannel(e, 0, 0, 0);  // no GPU timer values
    auto beforeLastStop = std::chrono::steady_clock::now();
    r.kernelChannel(e, 1, 0, 0);
    auto afterLastStop = std::chrono::steady_clock::now();
    auto ns = [](auto d) {
      return double(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
    };
    auto samples = drainBus(0xD44);
    REQUIRE(samples.size() == 1);
    CHECK(samples[0].clock == bus::DurationClock::kHost);
    INFO("host duration " << samples[0].durationNs << " ns");
    CHECK(double(samples[0].durationNs) >= ns(beforeLastStop - afterEnqueue));
    CHECK(double(samples[0].durationNs) <= ns(afterLastStop - beforeEnqueue));
    // A later GPU-timed sample is not published: this communicator's clock is the host's.
    r.collective(spec, 1000, 2000);
    CHECK(drainBus(0xD44).empty());
    CHECK(InProcessProfiler::context(s)->counters.otherClock.load() == 1);
  }
  SECTION("a GPU-timed communicator does not publish a sample that lacks timers") {
    InProcessProfiler p;
    auto& s = p.open(0xD45);
    auto r = p.replayer(s);
    CollSpec spec;
    spec.nChannels = 2;
    r.collective(spec, 1000, 2000);
    auto e = r.enqueue(spec);
    r.kernelChannel(e, 0, 1000, 500);  // stop before start: not a valid GPU span
    r.kernelChannel(e, 1, 1000, 2000);
    auto samples = drainBus(0xD45);
    REQUIRE(samples.size() == 1);
    CHECK(samples[0].clock == bus::DurationClock::kGpu);
  }
}

TEST_CASE("NULL contexts, NULL handles, NULL state args and events after finalize", "[replay]") {
  InProcessProfiler p;
  host::HostProfiler* hp = p.host->profiler();
  abi::ProfilerEventDescrV5 d{};
  d.type = abi::event::kColl;
  d.coll.func = "AllReduce";
  d.coll.nChannels = 1;
  void* h = reinterpret_cast<void*>(0x1);
  // After a failed init NCCL keeps calling with a NULL context.
  CHECK(hp->startEvent(nullptr, &h, &d) == abi::kSuccess);
  CHECK(h == nullptr);
  CHECK(hp->stopEvent(nullptr) == abi::kSuccess);
  CHECK(hp->recordEventState(nullptr, abi::state::kKernelChStop, nullptr) == abi::kSuccess);
  CHECK(hp->finalize(nullptr) == abi::kSuccess);

  auto& s = p.open(0xE55);
  auto r = p.replayer(s);
  CollSpec spec;
  spec.nChannels = 1;
  auto e = r.enqueue(spec);
  REQUIRE(e.coll != nullptr);
  // GroupApi states are recorded with NULL args; a KernelChStop may come without args.
  abi::ProfilerEventDescrV5 k{};
  k.type = abi::event::kKernelCh;
  k.parentObj = e.coll;
  k.kernelCh.pTimer = 10;
  void* kh = nullptr;
  hp->startEvent(s.profilerContext(), &kh, &k);
  REQUIRE(kh != nullptr);
  CHECK(hp->recordEventState(kh, abi::state::kKernelChStop, nullptr) == abi::kSuccess);
  // A KernelCh whose parent is NULL (a P2p we do not track) or not ours is not tracked.
  k.parentObj = nullptr;
  void* orphan = reinterpret_cast<void*>(0x1);
  hp->startEvent(s.profilerContext(), &orphan, &k);
  CHECK(orphan == nullptr);

  // Finalize with the kernel channel still running, then let it finish: no crash, no sample
  // (the communicator is gone from the bus), and new events are not tracked.
  s.finalize();
  CHECK_FALSE(bus::MeasurementBus::instance().attached(0xE55));
  CHECK(hp->stopEvent(kh) == abi::kSuccess);
  CHECK(hp->stopEvent(e.coll) == abi::kSuccess);  // a second stop of the Coll is ignored
  void* late = reinterpret_cast<void*>(0x1);
  CHECK(hp->startEvent(s.profilerContext(), &late, &d) == abi::kSuccess);
  CHECK(late == nullptr);
}

TEST_CASE("parents stopped before children, children after completion, PXN ops", "[replay]") {
  autopilot::test::ScopedParam mask("NCCL_AUTOPILOT_PROFILER_EVENTS", "74");  // + ProxyOp
  InProcessProfiler p;
  auto& s = p.open(0xF66);
  auto r = p.replayer(s);
  CHECK((*p.host->activationMask() & abi::event::kProxyOp) != 0);
  CollSpec spec;
  spec.nChannels = 2;
  auto e = r.enqueue(spec);
  // Proxy ops keep the collective alive past its kernel channels.
  void* send = r.proxyOpStart(e, 0, 1, true, getpid());
  void* foreign = r.proxyOpStart(e, 1, 3, false, getpid() + 1);  // PXN: another process's op
  REQUIRE(send != nullptr);
  REQUIRE(foreign != nullptr);
  r.kernelChannel(e, 0, 100, 400);
  r.kernelChannel(e, 1, 100, 500);
  CHECK(drainBus(0xF66).empty());  // the send op still runs
  r.stop(send);
  auto samples = drainBus(0xF66);
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].durationNs == 400);
  r.stop(foreign);  // never attached to the collective: stopping it changes nothing
  // A child arriving after completion does not resurrect the collective.
  r.kernelChannel(e, 5, 1, 2);
  CHECK(drainBus(0xF66).empty());
  auto* ctx = InProcessProfiler::context(s);
  CHECK(ctx->counters.untrackedChildren.load() >= 1);
  CHECK(ctx->counters.unbalanced.load() == 0);
}

TEST_CASE("a full pool drops and counts, then recovers", "[replay]") {
  autopilot::test::ScopedParam pool("NCCL_AUTOPILOT_PROFILER_POOL", "16");
  InProcessProfiler p;
  auto& s = p.open(0x1077);
  auto r = p.replayer(s);
  CollSpec spec;
  spec.nChannels = 1;
  std::vector<replay::Enqueued> inFlight;
  for (int i = 0; i < 40; ++i) inFlight.push_back(r.enqueue(spec));
  auto* ctx = InProcessProfiler::context(s);
  CHECK(ctx->counters.collStarted.load() == 16);
  CHECK(ctx->counters.collPoolFull.load() == 24);
  for (auto& e : inFlight) r.kernelChannel(e, 0, 10, 20);
  CHECK(drainBus(0x1077).size() == 16);
  for (int i = 0; i < 100; ++i) r.collective(spec, 10, 20);  // slots are reused
  CHECK(drainBus(0x1077).size() == 100);
  CHECK(ctx->colls.inUse() == 0);
}

TEST_CASE("several communicators are measured separately", "[replay]") {
  InProcessProfiler p;
  auto& a = p.open(0x2001, 0, 2, "a");
  auto& b = p.open(0x2002, 1, 2, "b");
  auto ra = p.replayer(a);
  auto rb = p.replayer(b);
  CollSpec spec;
  spec.nChannels = 2;
  for (int i = 0; i < 10; ++i) {
    ra.collective(spec, 0 + 1, 1000);
    rb.collective(spec, 0 + 1, 3000);
  }
  auto sa = drainBus(0x2001);
  auto sb = drainBus(0x2002);
  REQUIRE(sa.size() == 10);
  REQUIRE(sb.size() == 10);
  for (auto& x : sa) CHECK(x.durationNs == 1000);
  for (auto& x : sb) CHECK(x.durationNs == 3000);
  a.finalize();
  CHECK_FALSE(bus::MeasurementBus::instance().attached(0x2001));
  CHECK(bus::MeasurementBus::instance().attached(0x2002));
  rb.collective(spec, 1, 3000);
  CHECK(drainBus(0x2002).size() == 1);
}

TEST_CASE("profiler disabled: no events requested, rank still registered", "[replay]") {
  autopilot::test::ScopedParam off("NCCL_AUTOPILOT_PROFILER_ENABLE", "0");
  InProcessProfiler p;
  auto& s = p.open(0x3003, 5, 8);
  CHECK(*p.host->activationMask() == 0);
  comms::CommInfo info;
  REQUIRE(comms::lookup(0x3003, &info));
  CHECK(info.rank == 5);
  CHECK_FALSE(bus::MeasurementBus::instance().attached(0x3003));
  auto r = p.replayer(s);
  r.collective(CollSpec{}, 1, 2);  // mask 0: NCCL would start nothing
  CHECK(drainBus(0x3003).empty());
}

TEST_CASE("a persistent latency jump is announced on the bus and journalled", "[replay][shift]") {
  InProcessProfiler p;
  auto& s = p.open(0x4004, 1, 4, "shifty");
  auto r = p.replayer(s);
  CollSpec spec;
  spec.count = 1 << 18;  // 1 MiB
  uint64_t gpu = 1000000;
  // Mildly noisy 100 us, then 230 us: the service thread (run here synchronously) sees it.
  for (int i = 0; i < 200; ++i) {
    r.collective(spec, gpu, 100000 + uint64_t((i * 7919) % 5000));
    gpu += 1000000;
  }
  profiler::ProfilerService::instance().runOnce();
  CHECK(bus::MeasurementBus::instance().shiftsReported(0x4004) == 0);
  for (int i = 0; i < 20; ++i) {
    r.collective(spec, gpu, 230000 + uint64_t((i * 7919) % 5000));
    gpu += 1000000;
  }
  profiler::ProfilerService::instance().runOnce();
  CHECK(bus::MeasurementBus::instance().shiftsReported(0x4004) == 1);
  bus::ShiftNotice n;
  REQUIRE(bus::MeasurementBus::instance().drainShifts(0x4004, &n, 1) == 1);
  CHECK(n.func == abi::kFuncAllReduce);
  CHECK(n.algo == abi::kAlgoRing);
  CHECK(n.proto == abi::kProtoSimple);
  CHECK(n.nBytes == (1u << 20));
  CHECK(n.rail == -1);
  CHECK(n.ratio == Approx(2.3).epsilon(0.1));
  uint64_t cursor = 0;
  journal::Event ev[journal::EventJournal::kCapacity / 8];
  bool found = false;
  size_t got;
  while ((got = journal::EventJournal::instance().readSince(&cursor, ev, std::size(ev))) > 0) {
    for (size_t i = 0; i < got; ++i) {
      if (ev[i].commId == 0x4004 && std::string(ev[i].kind) == "latency_shift") found = true;
    }
  }
  CHECK(found);
  drainBus(0x4004);
}

TEST_CASE("NCCL's own IB and socket net events become rails with bytes", "[replay][rails]") {
  autopilot::test::ScopedParam mask("NCCL_AUTOPILOT_PROFILER_EVENTS", "194");  // + NetPlugin
  auto& rails = telemetry::RailRegistry::instance();
  rails.resetForTesting();
  profiler::resetNcclNetRailsForTesting();
  InProcessProfiler p;
  auto& s = p.open(0x5005);
  host::HostProfiler* hp = p.host->profiler();
  CHECK((*p.host->activationMask() & abi::event::kNetPlugin) != 0);

  auto netEvent = [&](int64_t id, void* data) {
    abi::ProfilerEventDescrV5 d{};
    d.type = abi::event::kNetPlugin;
    d.parentObj = nullptr;  // a ProxyStep we do not track
    d.netPlugin.id = id;
    d.netPlugin.data = data;
    void* h = reinterpret_cast<void*>(0x1);
    hp->startEvent(s.profilerContext(), &h, &d);
    return h;
  };
  std::vector<void*> handles;
  for (int i = 0; i < 3; ++i) {
    abi::ProfilerNetIbDescrV1 ib{};
    ib.type = 1;
    ib.qp.device = 1;
    ib.qp.opcode = 2;  // IBV_WR_SEND
    ib.qp.qpNum = 100 + i;
    ib.qp.length = 1 << 20;
    handles.push_back(netEvent(abi::net_event::kTypeIb | 1, &ib));
    ib.qp.length = 7;  // the payload lives on the caller's stack: it must have been copied
  }
  abi::ProfilerNetSockDescrV1 sock{};
  sock.type = 1;
  sock.sock.fd = 37;
  sock.sock.op = 1;  // receive
  sock.sock.length = 65536;
  void* sh = netEvent(abi::net_event::kTypeSocket | 1, &sock);
  handles.push_back(sh);
  abi::ProfilerEventStateArgsV5 upd{};
  upd.netPlugin.data = &sock;
  hp->recordEventState(sh, abi::state::kNetPluginUpdate, &upd);
  for (void* h : handles) {
    REQUIRE(h != nullptr);
    hp->stopEvent(h);
  }
  // Payloads of another plugin's type, another version or none at all: not tracked.
  CHECK(netEvent(0x30000 | 1, &sock) == nullptr);
  CHECK(netEvent(abi::net_event::kTypeIb | 2, &sock) == nullptr);
  CHECK(netEvent(abi::net_event::kTypeIb | 1, nullptr) == nullptr);

  telemetry::RailSnapshot snap[telemetry::kMaxRails];
  size_t n = rails.snapshot(snap, telemetry::kMaxRails, 0);
  REQUIRE(n == 2);
  CHECK(std::string(snap[0].identity.name) == "nccl-ib1");
  CHECK(std::string(snap[0].identity.transport) == "ib");
  CHECK(snap[0].bytesSent == 3u << 20);
  CHECK(snap[0].chunksSent == 3);
  CHECK(snap[0].bandwidthBytesPerSec > 0);
  CHECK(std::string(snap[1].identity.name) == "nccl-sock-fd37");
  CHECK(std::string(snap[1].identity.transport) == "sock");
  CHECK(snap[1].bytesReceived == 65536);
  s.finalize();
  rails.resetForTesting();
  profiler::resetNcclNetRailsForTesting();
}

TEST_CASE("a rail's bandwidth drop is announced to every communicator", "[replay][rails]") {
  auto& rails = telemetry::RailRegistry::instance();
  rails.resetForTesting();
  telemetry::RailIdentity id{"veth-test1", "tcp", 0, 1, 10000};
  int rail = rails.registerRail(id);
  REQUIRE(rail == 0);
  InProcessProfiler p;
  p.open(0x6006);
  p.open(0x6007);
  telemetry::RailCounters* c = rails.counters(rail);
  auto round = [&](uint64_t bandwidth) {
    c->bytesSent += 64 << 20;
    c->bandwidthBytesPerSec = bandwidth;
    profiler::ProfilerService::instance().runOnce();
  };
  for (int i = 0; i < 60; ++i) round(1000000000ull + uint64_t(i % 7) * 10000000ull);
  CHECK(bus::MeasurementBus::instance().shiftsReported(0x6006) == 0);
  for (int i = 0; i < 10; ++i) round(350000000ull);
  for (uint64_t comm : {0x6006ull, 0x6007ull}) {
    bus::ShiftNotice n;
    REQUIRE(bus::MeasurementBus::instance().drainShifts(comm, &n, 1) == 1);
    CHECK(n.rail == rail);
    CHECK(n.func == -1);
    CHECK(n.ratio == Approx(0.35).epsilon(0.1));
  }
  // Idle intervals (no bytes) are not samples: no further shift however long.
  for (int i = 0; i < 100; ++i) profiler::ProfilerService::instance().runOnce();
  CHECK(bus::MeasurementBus::instance().shiftsReported(0x6006) == 1);
  p.sessions.clear();
  rails.resetForTesting();
}

TEST_CASE("without KernelCh events collectives are counted, never timed", "[replay]") {
  autopilot::test::ScopedParam mask("NCCL_AUTOPILOT_PROFILER_EVENTS", "10");  // Coll | ProxyOp
  InProcessProfiler p;
  auto& s = p.open(0x8008);
  auto r = p.replayer(s);
  CollSpec spec;
  auto e = r.enqueue(spec);  // the Coll stop is the only reference: "completes" at enqueue
  void* op = r.proxyOpStart(e, 0, 1, true, getpid());
  r.stop(op);
  CHECK(drainBus(0x8008).empty());  // an enqueue time is not a duration
  CHECK(InProcessProfiler::context(s)->counters.collCompleted.load() == 1);
}

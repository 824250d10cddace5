// Rail telemetry, the event journal and the measurement bus: the in-process channels between
// the three plugins.
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "common/event_journal.h"
#include "common/measurement_bus.h"
#include "common/rail_telemetry.h"

using namespace autopilot;

TEST_CASE("rail registry: idempotent registration, counters, timed state changes", "[telemetry]") {
  auto& reg = telemetry::RailRegistry::instance();
  reg.resetForTesting();
  telemetry::RailIdentity a{"veth0", "tcp", 0, 0, 1000};
  telemetry::RailIdentity b{"veth1", "tcp", 0, 1, 1000};
  int ia = reg.registerRail(a);
  int ib = reg.registerRail(b);
  CHECK(ia == 0);
  CHECK(ib == 1);
  CHECK(reg.registerRail(a) == ia);
  reg.counters(ia)->bytesSent += 100;
  CHECK(reg.setState(ia, telemetry::RailState::kFailed, 1000));
  CHECK_FALSE(reg.setState(ia, telemetry::RailState::kFailed, 1500));
  CHECK(reg.setState(ia, telemetry::RailState::kHealthy, 3000));
  telemetry::RailSnapshot snap[4];
  size_t n = reg.snapshot(snap, 4, 4000);
  REQUIRE(n == 2);
  CHECK(snap[0].bytesSent == 100);
  CHECK(snap[0].failovers == 1);
  CHECK(snap[0].recoveries == 1);
  CHECK(snap[0].stateChanges == 2);
  CHECK(snap[0].timeInStateNs[int(telemetry::RailState::kFailed)] == 2000);
  CHECK(snap[0].timeInStateNs[int(telemetry::RailState::kHealthy)] >= 1000);
  CHECK(reg.counters(99) == nullptr);
  for (int i = 2; i < telemetry::kMaxRails; ++i) {
    telemetry::RailIdentity r{};
    std::snprintf(r.name, sizeof(r.name), "r%d", i);
    std::snprintf(r.transport, sizeof(r.transport), "tcp");
    CHECK(reg.registerRail(r) == i);
  }
  telemetry::RailIdentity extra{"one-too-many", "tcp", 0, 0, 0};
  CHECK(reg.registerRail(extra) == -1);
  reg.resetForTesting();
}

TEST_CASE("event journal keeps the newest events and reports the gap", "[journal]") {
  auto& j = journal::EventJournal::instance();
  j.resetForTesting();
  j.record(journal::Source::kNet, 7, 1, "rail_failed", "rail %d down", 1);
  uint64_t cursor = 0;
  journal::Event ev[8];
  REQUIRE(j.readSince(&cursor, ev, 8) == 1);
  CHECK(std::string(ev[0].kind) == "rail_failed");
  CHECK(std::string(ev[0].detail) == "rail 1 down");
  CHECK(cursor == 1);
  for (size_t i = 0; i < journal::EventJournal::kCapacity + 10; ++i) {
    j.record(journal::Source::kTuner, 7, -1, "x", "%zu", i);
  }
  CHECK(j.overwritten() == 11);
  size_t n = j.readSince(&cursor, ev, 8);
  CHECK(n == 8);
  CHECK(ev[0].seq == j.lastSeq() - journal::EventJournal::kCapacity + 1);
  j.resetForTesting();
}

TEST_CASE("measurement bus: per-communicator rings, drops when full, shifts", "[bus]") {
  auto& bus = bus::MeasurementBus::instance();
  bus.resetForTesting();
  REQUIRE(bus.attach(11));
  REQUIRE(bus.attach(22));
  bus::CollectiveSample s;
  s.commId = 11;
  s.durationNs = 5;
  CHECK(bus.publish(s));
  s.commId = 33;  // unknown communicator
  CHECK_FALSE(bus.publish(s));
  bus::CollectiveSample out[16];
  CHECK(bus.drain(22, out, 16) == 0);
  REQUIRE(bus.drain(11, out, 16) == 1);
  CHECK(out[0].durationNs == 5);

  s.commId = 22;
  for (size_t i = 0; i < bus::MeasurementBus::kRingCapacity + 5; ++i) bus.publish(s);
  CHECK(bus.dropped(22) == 5);
  size_t total = 0;
  while (size_t n = bus.drain(22, out, 16)) total += n;
  CHECK(total == bus::MeasurementBus::kRingCapacity);

  // Notices queue up and are drained one by one, in order; a full queue counts the drop.
  bus::ShiftNotice got[4];
  CHECK(bus.drainShifts(11, got, 4) == 0);
  bus::ShiftNotice notice;
  notice.func = 4;
  notice.ratio = 2.5;
  CHECK(bus.reportShift(11, notice));
  notice.ratio = 0.5;
  CHECK(bus.reportShift(11, notice));
  CHECK(bus.shiftsReported(11) == 2);
  REQUIRE(bus.drainShifts(11, got, 4) == 2);
  CHECK(got[0].ratio == 2.5);
  CHECK(got[1].ratio == 0.5);
  CHECK(got[0].commId == 11);
  CHECK(bus.drainShifts(11, got, 4) == 0);
  for (size_t i = 0; i < bus::MeasurementBus::kShiftCapacity; ++i) {
    CHECK(bus.reportShift(11, notice));
  }
  CHECK_FALSE(bus.reportShift(11, notice));
  CHECK(bus.shiftsDropped(11) == 1);
  CHECK_FALSE(bus.reportShift(999, notice));  // not attached
  size_t drained = 0;
  while (size_t n = bus.drainShifts(11, got, 4)) drained += n;
  CHECK(drained == bus::MeasurementBus::kShiftCapacity);

  bus.detach(11);
  bus.detach(22);
  CHECK_FALSE(bus.attached(11));
}

TEST_CASE("measurement bus: concurrent producers lose nothing below capacity", "[bus]") {
  auto& bus = bus::MeasurementBus::instance();
  bus.resetForTesting();
  REQUIRE(bus.attach(44));
  constexpr int kThreads = 4, kPerThread = 200;  // 800 < capacity
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([t, &bus] {
      bus::CollectiveSample s;
      s.commId = 44;
      for (int i = 0; i < kPerThread; ++i) {
        s.seqNumber = uint64_t(t) * 1000 + i;
        bus.publish(s);
      }
    });
  }
  for (auto& p : producers) p.join();
  std::vector<int> seen(kThreads * 1000, 0);
  bus::CollectiveSample out[64];
  size_t total = 0;
  while (size_t n = bus.drain(44, out, 64)) {
    for (size_t i = 0; i < n; ++i) seen[out[i].seqNumber]++;
    total += n;
  }
  CHECK(total == size_t(kThreads * kPerThread));
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kPerThread; ++i) CHECK(seen[t * 1000 + i] == 1);
  bus.detach(44);
}

#include "common/comm_registry.h"

TEST_CASE("comm registry merges what each plugin knows and counts references", "[comms]") {
  comms::CommInfo fromProfiler;
  fromProfiler.commId = 99;
  fromProfiler.rank = 3;
  fromProfiler.nRanks = 8;
  fromProfiler.name = "dp";
  comms::registerComm(fromProfiler);
  comms::CommInfo fromTuner;
  fromTuner.commId = 99;
  fromTuner.nNodes = 2;
  comms::registerComm(fromTuner);
  comms::CommInfo got;
  REQUIRE(comms::lookup(99, &got));
  CHECK(got.rank == 3);
  CHECK(got.nRanks == 8);
  CHECK(got.nNodes == 2);
  CHECK(got.name == "dp");
  comms::releaseComm(99);
  CHECK(comms::lookup(99, &got));
  comms::releaseComm(99);
  CHECK_FALSE(comms::lookup(99, &got));
}

// `autopilot top`'s pure parts: the exposition reader (valid text as the profiler writes it,
// and every malformed form skipped and counted, never fatal) and the model (rates over one
// rewrite interval per file, rails merged across processes, losses shown).
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "bench/top/prom_text.h"
#include "bench/top/top_model.h"

using namespace autopilot::top;

TEST_CASE("exposition reader: labels, escapes, special values, timestamps", "[top]") {
  Exposition e = parseExposition(
      "# HELP a_total x\n# TYPE a_total counter\n"
      "a_total{comm=\"tp \\\"g\\\"\\n1\",rank=\"3\",} 12\n"
      "b 1.5e3 1700000000000\n"
      "c{x=\"a\\\\b\"} NaN\n"
      "d +Inf\n"
      "  \n"
      "e{} -2\r\n");
  REQUIRE(e.badLines == 0);
  REQUIRE(e.samples.size() == 5);
  CHECK(e.samples[0].name == "a_total");
  REQUIRE(e.samples[0].label("comm") != nullptr);
  CHECK(*e.samples[0].label("comm") == "tp \"g\"\n1");
  CHECK(*e.samples[0].label("rank") == "3");
  CHECK(e.samples[0].label("none") == nullptr);
  CHECK(e.samples[0].value == 12);
  CHECK(e.samples[1].value == 1500);
  CHECK(*e.samples[2].label("x") == "a\\b");
  CHECK(std::isnan(e.samples[2].value));
  CHECK(std::isinf(e.samples[3].value));
  CHECK(e.samples[4].value == -2);
  CHECK(e.samples[0].seriesKey() != e.samples[1].seriesKey());
}

TEST_CASE("exposition reader: malformed lines are skipped and counted", "[top]") {
  const char* bad[] = {
      "1abc 1",
      "a{b=\"1\" 1",
      "a{b=1} 1",
      "a{b=\"1\",b=\"2\"} 1",
      "a{b=\"x\\q\"} 1",
      "a{=\"1\"} 1",
      "a",
      "a nan",
      "a 0x10",
      "a 1 12ab",
      "a{b=\"unterminated} 1",
      "a{b=\"1\"}1",
      "a{b=\"\\",
      "a inf",
  };
  for (const char* line : bad) {
    INFO(line);
    Exposition e = parseExposition(std::string("ok 1\n") + line + "\nok2 2\n");
    CHECK(e.badLines == 1);
    CHECK(e.samples.size() == 2);
    CHECK(e.firstError.rfind("line 2: ", 0) == 0);
  }
  Exposition capped = parseExposition("a 1\nb 2\nc 3\n", 2);
  CHECK(capped.samples.size() == 2);
  CHECK(capped.badLines == 1);
}

namespace {

FileVersion file(const std::string& path, double mtime, const std::string& text) {
  FileVersion f;
  f.path = path;
  f.mtime = mtime;
  f.data = parseExposition(text);
  return f;
}

std::string process(int rank, double count, double bytes, double timeS, double failovers,
                    const char* state, double dropped = 0) {
  std::string r = std::to_string(rank);
  auto n = [](double v) { return std::to_string(v); };
  std::string arm = "{comm=\"dp\",rank=\"" + r +
                    "\",n_ranks=\"2\",collective=\"AllReduce\",size_bucket=\"1048576\","
                    "algo=\"Ring\",proto=\"Simple\"} ";
  std::string rail = "{process_rank=\"" + r + "\",rail=\"eth1\",transport=\"tcp\",device=\"0\"";
  return "nccl_autopilot_process_info{process_rank=\"" + r +
         "\",hostname=\"node-a\",version=\"1\"} 1\n"
         "nccl_autopilot_collective_count_total" +
         arm + n(count) + "\nnccl_autopilot_collective_bytes_total" + arm + n(bytes) +
         "\nnccl_autopilot_collective_exec_time_seconds_total" + arm + n(timeS) +
         "\nnccl_autopilot_rail_failovers_total" + rail + "} " + n(failovers) +
         "\nnccl_autopilot_rail_share_ratio" + rail + "} 0.5" + "\nnccl_autopilot_rail_state" +
         rail + ",state=\"healthy\"} " + (std::string(state) == "healthy" ? "1" : "0") +
         "\nnccl_autopilot_rail_state" + rail + ",state=\"failed\"} " +
         (std::string(state) == "failed" ? "1" : "0") +
         "\nnccl_autopilot_plugin_events_total{process_rank=\"" + r +
         "\",source=\"net\",kind=\"rail_failed\"} " + n(failovers) +
         "\nnccl_autopilot_profiler_events_dropped_total{comm=\"dp\",rank=\"" + r +
         "\",n_ranks=\"2\",reason=\"coll_pool_full\"} " + n(dropped) + "\n";
}

}  // namespace

TEST_CASE("top model: rates over each file's rewrite interval, rails merged", "[top]") {
  TopModel m;
  m.update({file("/p/r0.prom", 100, process(0, 1000, 1e9, 10, 0, "healthy")),
            file("/p/r1.prom", 100.5, process(1, 1000, 1e9, 12, 0, "healthy"))});
  Frame first = m.frame(101, 30);
  REQUIRE(first.comms.size() == 1);
  CHECK_FALSE(first.comms[0].hasRates);  // one version of each file: no rate yet
  CHECK(first.comms[0].collectives == 2000);
  CHECK(first.comms[0].busiestArm == "AllReduce 1.0 MiB Ring/Simple");

  // Rank 0 rewritten 2 s later: 200 collectives, 0.2 GB, 4 s of execution; rank 1 not yet.
  m.update({file("/p/r0.prom", 102, process(0, 1200, 1.2e9, 14, 1, "failed", 3)),
            file("/p/r1.prom", 100.5, process(1, 1000, 1e9, 12, 0, "healthy"))});
  Frame f = m.frame(102.5, 30);
  REQUIRE(f.comms.size() == 1);
  const CommRow& c = f.comms[0];
  CHECK(c.hasRates);
  CHECK(c.ranksSeen == 2);
  CHECK(c.nRanks == 2);
  CHECK(c.collPerSec == Approx(100));  // rank 0 only: the one with two versions
  CHECK(c.bytesPerSec == Approx(1e8));
  CHECK(c.meanTimeS == Approx(0.02));
  REQUIRE(f.rails.size() == 1);
  CHECK(f.rails[0].host == "node-a");
  CHECK(f.rails[0].states.at("failed") == 1);
  CHECK(f.rails[0].states.at("healthy") == 1);
  CHECK(f.rails[0].failovers == 1);
  CHECK(f.rails[0].share == Approx(0.5));
  CHECK(f.events.at("net/rail_failed") == 1);
  CHECK(f.eventsDelta.at("net/rail_failed") == 1);
  CHECK(f.losses.at("profiler coll_pool_full") == 3);
  CHECK(f.staleFiles == 0);
  CHECK(m.frame(140, 30).staleFiles == 2);

  // A refresh that finds the same versions keeps the rates; a removed file is forgotten.
  m.update({file("/p/r0.prom", 102, process(0, 1200, 1.2e9, 14, 1, "failed", 3))});
  Frame later = m.frame(103, 30);
  CHECK(later.processes == 1);
  CHECK(later.comms[0].collPerSec == Approx(100));

  std::string text = renderText(f, "/p");
  INFO(text);
  CHECK(text.find("2 processes on 1 host (node-a)") != std::string::npos);
  CHECK(text.find("dp") != std::string::npos);
  CHECK(text.find("failed 1 healthy 1") != std::string::npos);
  CHECK(text.find("lost: profiler coll_pool_full 3") != std::string::npos);
  CHECK(text.find("net/rail_failed 1 (+1)") != std::string::npos);
  std::string json = renderJson(f);
  CHECK(json.find("\"collectives_per_s\":100,") != std::string::npos);
  CHECK(json.find("\"lost\":{\"profiler coll_pool_full\":3}") != std::string::npos);
}

TEST_CASE("top model: a rail's re-sent and probe-copy bytes are summed over its processes",
          "[top]") {
  auto rail = [](int rank, double resent, double probed) {
    std::string labels = "{process_rank=\"" + std::to_string(rank) +
                         "\",rail=\"eth1\",transport=\"tcp\",device=\"0\"} ";
    return "nccl_autopilot_process_info{process_rank=\"" + std::to_string(rank) +
           "\",hostname=\"node-a\",version=\"1\"} 1\n"
           "nccl_autopilot_rail_retransmitted_bytes_total" +
           labels + std::to_string(resent) + "\nnccl_autopilot_rail_probe_copy_bytes_total" +
           labels + std::to_string(probed) + "\n";
  };
  TopModel m;
  m.update({file("/p/r0.prom", 100, rail(0, 1 << 20, 64 << 10)),
            file("/p/r1.prom", 100, rail(1, 2 << 20, 128 << 10))});
  Frame f = m.frame(101, 30);
  REQUIRE(f.rails.size() == 1);
  CHECK(f.rails[0].resentBytes == 3 << 20);
  CHECK(f.rails[0].probeCopyBytes == 192 << 10);
  std::string text = renderText(f, "/p");
  INFO(text);
  CHECK(text.find("RE-SENT     PROBED") != std::string::npos);
  CHECK(text.find("3.0 MiB  192.0 KiB") != std::string::npos);
  CHECK(renderJson(f).find("\"resent_bytes\":3145728,\"probe_copy_bytes\":196608}") !=
        std::string::npos);
}

TEST_CASE("top model: a malformed file is shown, not fatal", "[top]") {
  TopModel m;
  m.update({file("/p/bad.prom", 1, "nccl_autopilot_rail_state{rail=\"x\" 1\ngarbage\n")});
  Frame f = m.frame(2, 30);
  CHECK(f.processes == 1);
  CHECK(f.badLines == 2);
  CHECK(f.firstBad.rfind("/p/bad.prom: line 1: ", 0) == 0);
  CHECK(renderText(f, "/p").find("2 malformed line(s) skipped") != std::string::npos);
}

TEST_CASE("top model: the rank that spends least time in collectives is named late", "[top]") {
  // Four ranks; rank 2 arrives 20 ms late, so it spends 20 ms less per collective than the
  // others (they wait for it). 100 collectives over 2 s in each file.
  TopModel m;
  std::vector<FileVersion> a;
  for (int r = 0; r < 4; ++r) {
    a.push_back(
        file("/p/r" + std::to_string(r) + ".prom", 0, process(r, 100, 1e8, 0, 0, "healthy")));
  }
  m.update(a);
  // Interval: 100 collectives; ranks 0, 1, 3 spent 2.5 s (25 ms each), rank 2 0.5 s (5 ms).
  std::vector<FileVersion> b;
  for (int r = 0; r < 4; ++r) {
    b.push_back(file("/p/r" + std::to_string(r) + ".prom", 2,
                     process(r, 200, 2e8, r == 2 ? 0.5 : 2.5, 0, "healthy")));
  }
  m.update(b);
  // Late in one frame is not enough (a rank held up once): named from the second on.
  CHECK(m.frame(10, 30).stragglers.empty());
  Frame f = m.frame(11, 30);
  REQUIRE(f.stragglers.size() == 1);
  CHECK(f.stragglers[0].rank == "2");
  CHECK(f.stragglers[0].host == "node-a");
  CHECK(f.stragglers[0].lagS == Approx(0.020));
  CHECK(f.stragglers[0].medianS == Approx(0.025));
  CHECK(f.stragglers[0].sinceS == 10);
  CHECK(m.frame(12, 30).stragglers.at(0).sinceS == 10);  // still named: the streak goes on
  CHECK(renderText(f, "/p").find("dp rank 2 on node-a: late by 20.0 ms") != std::string::npos);
  CHECK(renderJson(f).find("\"stragglers\":[{\"comm\":\"dp\",\"host\":\"node-a\",\"rank\":\"2\"") !=
        std::string::npos);

  // Equal times (within the 25% / 1 ms margin): nobody is named, and the streak ends.
  std::vector<FileVersion> c;
  for (int r = 0; r < 4; ++r) {
    c.push_back(
        file("/p/r" + std::to_string(r) + ".prom", 4,
             process(r, 300, 3e8, (r == 2 ? 0.5 : 2.5) + (r == 2 ? 1.9 : 2.0), 0, "healthy")));
  }
  m.update(c);
  Frame g = m.frame(13, 30);
  CHECK(g.stragglers.empty());
  CHECK(renderText(g, "/p").find("stragglers: none") != std::string::npos);
}

TEST_CASE("top model: rank 0's arrival exchange replaces the estimate from durations", "[top]") {
  // Equal durations (the duration estimate would name nobody), but rank 0's file says rank 3
  // is a straggler. Rank 1's file holds the same report (NCCL_AUTOPILOT_STRAGGLER_REPORT=all)
  // with a stale verdict: the lowest reporter's is shown, once.
  auto arrivals = [](int reporter, int named) {
    std::string out;
    for (int r = 0; r < 4; ++r) {
      std::string l = "{comm=\"dp\",n_ranks=\"4\",reporter=\"" + std::to_string(reporter) +
                      "\",rank=\"" + std::to_string(r) + "\"} ";
      out += "nccl_autopilot_straggler" + l + (r == named ? "1" : "0") + "\n";
      out += "nccl_autopilot_arrival_lag_seconds" + l + (r == named ? "0.025" : "0.0001") + "\n";
      out += "nccl_autopilot_arrival_late_ratio" + l + (r == named ? "0.9" : "0") + "\n";
      out += "nccl_autopilot_straggler_since_seconds" + l + (r == named ? "100" : "0") + "\n";
    }
    return out;
  };
  TopModel m;
  for (double t : {100.0, 102.0}) {
    std::vector<FileVersion> files;
    for (int r = 0; r < 4; ++r) {
      std::string text = process(r, t, t * 1e6, t / 40, 0, "healthy");
      if (r == 0) text += arrivals(0, 3);
      if (r == 1) text += arrivals(1, 2);
      text += "nccl_autopilot_arrival_records_dropped_total{comm=\"dp\",rank=\"" +
              std::to_string(r) + "\",n_ranks=\"4\",reason=\"buffer_full\"} " +
              (r == 2 ? "7" : "0") + "\n";
      files.push_back(file("/p/r" + std::to_string(r) + ".prom", t, text));
    }
    m.update(files);
  }
  Frame f = m.frame(110, 30);  // named on the first frame: rank 0 already waited two windows
  REQUIRE(f.stragglers.size() == 1);
  CHECK(f.stragglers[0].rank == "3");
  CHECK(f.stragglers[0].fromArrivals);
  CHECK(f.stragglers[0].lagS == Approx(0.025));
  CHECK(f.stragglers[0].lateRatio == Approx(0.9));
  CHECK(f.stragglers[0].host == "node-a");
  CHECK(renderText(f, "/p").find("dp rank 3 on node-a: late by 25.0 ms at arrival, in 90%") !=
        std::string::npos);
  CHECK(renderJson(f).find("\"source\":\"arrivals\"") != std::string::npos);
  CHECK(f.losses.at("arrival records buffer_full") == 7);
}

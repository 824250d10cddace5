// The tuner through the real library, one process: what it never does to NCCL's table (raise an
// IGNORE cell, touch nChannels without a learned count, act when the user set
// NCCL_ALGO/NCCL_PROTO or below the size threshold), that it learns from measurements (cells
// and channel counts), and that a second job starts from the tuning file the first one saved. A
// one-rank communicator leads itself, so no second process is needed.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <random>
#include <set>
#include <thread>

#include "common/host/log_capture.h"
#include "common/host/plugin_host.h"
#include "model/cost_model.h"

using namespace autopilot;
using namespace autopilot::host;

namespace {

constexpr int kTreeLL128 = abi::kAlgoTree * abi::kNumProtocols + abi::kProtoLL128;
constexpr int kRingSimple = abi::kAlgoRing * abi::kNumProtocols + abi::kProtoSimple;
constexpr uint64_t kMiB = 1 << 20;

std::string tempDir() {
  char tmpl[] = "/tmp/ap-tuner-host-XXXXXX";
  char* d = mkdtemp(tmpl);
  return d ? d : "/tmp";
}

// Sets environment variables for the lifetime of one test and restores them.
class Env {
 public:
  void set(const char* name, const std::string& value) {
    names_.push_back(name);
    setenv(name, value.c_str(), 1);
  }
  ~Env() {
    for (const char* n : names_) unsetenv(n);
  }

 private:
  std::vector<const char*> names_;
};

PluginHost::Options options() {
  PluginHost::Options o;
  o.netPlugin = "none";
  o.tunerPlugin = "autopilot";
  o.profilerPlugin = "autopilot";
  return o;
}

void fillTable(float table[abi::kNumAlgorithms][abi::kNumProtocols]) {
  for (int a = 0; a < abi::kNumAlgorithms; ++a) {
    for (int p = 0; p < abi::kNumProtocols; ++p) table[a][p] = abi::kAlgoProtoIgnore;
  }
  table[abi::kAlgoTree][abi::kProtoLL128] = 100.0f;  // NCCL's choice
  table[abi::kAlgoRing][abi::kProtoSimple] = 120.0f;
}

// Calls until the cell NCCL would run is `want` (with `wantChannels` as the tuner's channel
// count, when >= 0) on `streak` calls in a row (a probe alone does not count: exploration plays
// every other call at most), or the time is up; returns the calls made, or -1. Every channel
// count the tuner set is added to `channelsSeen` when given.
long callUntil(HostTuner* t, void* ctx, int want, int seconds, int streak = 8,
               int wantChannels = -1, std::set<int>* channelsSeen = nullptr) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  long n = 0;
  int run = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    float table[abi::kNumAlgorithms][abi::kNumProtocols];
    fillTable(table);
    int nChannels = 0;
    t->getCollInfo(ctx, abi::kFuncAllReduce, kMiB, 1, reinterpret_cast<float**>(table),
                   abi::kNumAlgorithms, abi::kNumProtocols, 0, &nChannels);
    ++n;
    if (channelsSeen != nullptr) channelsSeen->insert(nChannels);
    const bool hit = tuner::model::ncclChoice(&table[0][0]) == want &&
                     (wantChannels < 0 || nChannels == wantChannels);
    run = hit ? run + 1 : 0;
    if (run >= streak) return n;
    if (n % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return -1;
}

CommSession::Config oneRank(uint64_t commId) {
  CommSession::Config cfg;
  cfg.commId = commId;
  cfg.nRanks = 1;
  cfg.nNodes = 1;
  cfg.rank = 0;
  cfg.nvlDomain = {1, 1, 1};
  return cfg;
}

}  // namespace

TEST_CASE("the tuner learns from measurements and never raises an IGNORE cell", "[tuner_host]") {
  Env env;
  env.set("NCCL_AUTOPILOT_COORDINATOR_DIR", tempDir());
  // The ring is really 40% faster than NCCL's table says: learning must find it.
  env.set("NCCL_AUTOPILOT_TUNER_SYNTHETIC", "seed=3,noise=0.03,scale=5:0.6");
  env.set("NCCL_AUTOPILOT_TUNER_UPDATE_MS", "1");
  PluginHost host(options());
  REQUIRE(host.loadProfiler());
  REQUIRE(host.loadTuner());
  CommSession session(host, oneRank(0x7001));
  REQUIRE(session.init() == abi::kSuccess);
  HostTuner* t = host.tuner();
  long n = callUntil(t, session.tunerContext(), kRingSimple, 20);
  INFO("calls until the learned choice took effect: " << n);
  if (n <= 0) {
    // The tuner's own account (its summary at finalize): where the loop stopped.
    session.finalize();
    for (const auto& rec : LogCapture::records()) {
      if (rec.message.find("tuner") != std::string::npos) UNSCOPED_INFO(rec.message);
    }
  }
  CHECK(n > 0);

  // Random tables, most cells IGNORE: no IGNORE cell ever comes back non-negative, nChannels is
  // never touched, and the call never fails.
  std::mt19937 rng(1);
  for (int i = 0; i < 20000; ++i) {
    float table[abi::kNumAlgorithms][abi::kNumProtocols],
        before[abi::kNumAlgorithms][abi::kNumProtocols];
    for (auto& row : table) {
      for (float& v : row) v = rng() % 3 == 0 ? float(1 + rng() % 1000) : abi::kAlgoProtoIgnore;
    }
    std::memcpy(before, table, sizeof(table));
    int nChannels = 0;
    int func = int(rng() % 6) - 1;
    uint64_t bytes = uint64_t(1) << (rng() % 34);
    REQUIRE(t->getCollInfo(session.tunerContext(), func, bytes, 1 + int(rng() % 3),
                           reinterpret_cast<float**>(table), abi::kNumAlgorithms,
                           abi::kNumProtocols, int(rng() % 2), &nChannels) == abi::kSuccess);
    CHECK(nChannels == 0);
    for (int c = 0; c < abi::kNumAlgorithms * abi::kNumProtocols; ++c) {
      if ((&before[0][0])[c] < 0) CHECK((&table[0][0])[c] == (&before[0][0])[c]);
    }
  }
}

TEST_CASE("a cell faster at fewer channels is learned: half NCCL's count, kept in the file",
          "[tuner_host][channels]") {
  std::string dir = tempDir();
  std::string file = dir + "/tuning.txt";
  {
    Env env;
    env.set("NCCL_AUTOPILOT_COORDINATOR_DIR", dir);
    // NCCL runs every cell on 8 channels (what the profiler reports); NCCL's own choice, Tree/
    // LL128, is really 40% faster on fewer.
    env.set("NCCL_AUTOPILOT_TUNER_SYNTHETIC",
            "seed=7,noise=0.03,channels=8,halved=" + std::to_string(kTreeLL128) + ":0.6");
    env.set("NCCL_AUTOPILOT_TUNER_UPDATE_MS", "1");
    env.set("NCCL_AUTOPILOT_TUNING_FILE", file);
    LogCapture::clear();
    PluginHost host(options());
    REQUIRE(host.loadProfiler());
    REQUIRE(host.loadTuner());
    CommSession session(host, oneRank(0x7011));
    REQUIRE(session.init() == abi::kSuccess);
    std::set<int> seen;
    long n = callUntil(host.tuner(), session.tunerContext(), kTreeLL128, 20, 8, 4, &seen);
    INFO("calls until Tree/LL128 on 4 channels took effect: " << n);
    CHECK(n > 0);
    // Only ever NCCL's count (0) or half of it: never raised, never anything else.
    CHECK(seen == std::set<int>{0, 4});
    session.finalize();
    CHECK(LogCapture::count(abi::kLogInfo, "cells offered at half their channels") == 1);
    CHECK(LogCapture::count(abi::kLogInfo, "; 0 cells offered at half their channels") == 0);
  }
  {
    // The next job, no measurements and no probes: the file alone brings back the count.
    Env env;
    env.set("NCCL_AUTOPILOT_COORDINATOR_DIR", dir);
    env.set("NCCL_AUTOPILOT_TUNER_UPDATE_MS", "1");
    env.set("NCCL_AUTOPILOT_TUNER_EXPLORE", "0");
    env.set("NCCL_AUTOPILOT_TUNING_FILE", file);
    PluginHost host(options());
    REQUIRE(host.loadProfiler());
    REQUIRE(host.loadTuner());
    CommSession session(host, oneRank(0x7012));
    REQUIRE(session.init() == abi::kSuccess);
    CHECK(callUntil(host.tuner(), session.tunerContext(), kTreeLL128, 10, 8, 4) > 0);
  }
  {
    // NCCL_AUTOPILOT_TUNER_CHANNELS=0: the same truth, NCCL's counts always (the file's halved
    // arm is not an arm either).
    Env env;
    env.set("NCCL_AUTOPILOT_COORDINATOR_DIR", dir);
    env.set("NCCL_AUTOPILOT_TUNER_SYNTHETIC",
            "seed=7,noise=0.03,channels=8,halved=" + std::to_string(kTreeLL128) + ":0.6");
    env.set("NCCL_AUTOPILOT_TUNER_UPDATE_MS", "1");
    env.set("NCCL_AUTOPILOT_TUNER_CHANNELS", "0");
    env.set("NCCL_AUTOPILOT_TUNING_FILE", file);
    PluginHost host(options());
    REQUIRE(host.loadProfiler());
    REQUIRE(host.loadTuner());
    CommSession session(host, oneRank(0x7013));
    REQUIRE(session.init() == abi::kSuccess);
    std::set<int> seen;
    CHECK(callUntil(host.tuner(), session.tunerContext(), kTreeLL128, 2, 1 << 30, 4, &seen) == -1);
    CHECK(seen == std::set<int>{0});
  }
}

TEST_CASE("NCCL_ALGO / NCCL_PROTO set: the tuner leaves every table untouched", "[tuner_host]") {
  Env env;
  env.set("NCCL_AUTOPILOT_COORDINATOR_DIR", tempDir());
  env.set("NCCL_AUTOPILOT_TUNER_SYNTHETIC", "seed=3,noise=0.03,scale=5:0.3");
  env.set("NCCL_AUTOPILOT_TUNER_UPDATE_MS", "1");
  env.set("NCCL_PROTO", "^LL");
  PluginHost host(options());
  REQUIRE(host.loadProfiler());
  REQUIRE(host.loadTuner());
  CommSession session(host, oneRank(0x7002));
  REQUIRE(session.init() == abi::kSuccess);
  // Three times what learning needed above, yet NCCL's choice stays.
  CHECK(callUntil(host.tuner(), session.tunerContext(), kRingSimple, 2) == -1);
}

TEST_CASE("sizes below NCCL_AUTOPILOT_TUNER_MIN_BYTES keep NCCL's choice", "[tuner_host]") {
  Env env;
  env.set("NCCL_AUTOPILOT_COORDINATOR_DIR", tempDir());
  env.set("NCCL_AUTOPILOT_TUNER_SYNTHETIC", "seed=3,noise=0.03,scale=5:0.3");
  env.set("NCCL_AUTOPILOT_TUNER_UPDATE_MS", "1");
  env.set("NCCL_AUTOPILOT_TUNER_MIN_BYTES", "2M");
  PluginHost host(options());
  REQUIRE(host.loadProfiler());
  REQUIRE(host.loadTuner());
  CommSession session(host, oneRank(0x7003));
  REQUIRE(session.init() == abi::kSuccess);
  CHECK(callUntil(host.tuner(), session.tunerContext(), kRingSimple, 2) == -1);  // 1 MiB < 2 MiB
}

TEST_CASE("a second job starts from the tuning file the first one saved", "[tuner_host]") {
  std::string dir = tempDir();
  std::string file = dir + "/tuning.txt";
  {
    Env env;
    env.set("NCCL_AUTOPILOT_COORDINATOR_DIR", dir);
    env.set("NCCL_AUTOPILOT_TUNER_SYNTHETIC", "seed=5,noise=0.03,scale=5:0.6");
    env.set("NCCL_AUTOPILOT_TUNER_UPDATE_MS", "1");
    env.set("NCCL_AUTOPILOT_TUNING_FILE", file);
    PluginHost host(options());
    REQUIRE(host.loadProfiler());
    REQUIRE(host.loadTuner());
    CommSession session(host, oneRank(0x7004));
    REQUIRE(session.init() == abi::kSuccess);
    REQUIRE(callUntil(host.tuner(), session.tunerContext(), kRingSimple, 20) > 0);
  }
  std::ifstream saved(file);
  REQUIRE(saved.good());
  {
    // No measurements at all and no probes: only the file can make the ring the choice.
    Env env;
    env.set("NCCL_AUTOPILOT_COORDINATOR_DIR", dir);
    env.set("NCCL_AUTOPILOT_TUNER_UPDATE_MS", "1");
    env.set("NCCL_AUTOPILOT_TUNER_EXPLORE", "0");
    env.set("NCCL_AUTOPILOT_TUNING_FILE", file);
    LogCapture::clear();
    PluginHost host(options());
    REQUIRE(host.loadProfiler());
    REQUIRE(host.loadTuner());
    CommSession session(host, oneRank(0x7005));
    REQUIRE(session.init() == abi::kSuccess);
    CHECK(LogCapture::count(abi::kLogInfo, "loaded 1 learned contexts") == 1);
    long n = callUntil(host.tuner(), session.tunerContext(), kRingSimple, 10);
    CHECK(n > 0);
    CHECK(n < 100000);  // a few milliseconds of the leader's first rounds
  }
  {
    // Another scale of the same system (two ranks): the file's results seed its priors (logged
    // at load; the rank waits for a peer that never comes, so it never proposes anything).
    Env env;
    env.set("NCCL_AUTOPILOT_COORDINATOR_DIR", dir);
    env.set("NCCL_AUTOPILOT_TUNER_JOIN_TIMEOUT_MS", "200");
    env.set("NCCL_AUTOPILOT_TUNING_FILE", file);
    LogCapture::clear();
    PluginHost host(options());
    REQUIRE(host.loadProfiler());
    REQUIRE(host.loadTuner());
    CommSession::Config cfg = oneRank(0x7007);
    cfg.nRanks = 2;
    cfg.nvlDomain = {1, 2, 2};
    CommSession session(host, cfg);
    REQUIRE(session.init() == abi::kSuccess);
    CHECK(LogCapture::count(abi::kLogInfo, "learned at nRanks 1 nNodes 1") == 1);
    CHECK(LogCapture::count(abi::kLogInfo, "no results of this scale") == 1);
    CHECK(LogCapture::count(abi::kLogWarn, "tuning file ignored") == 0);
  }
  {
    // A garbled file: a warning, and NCCL's choices.
    std::ofstream(file) << "nccl-autopilot tuning 1\nsection zz\nctx 1 2 3\nend 00\n";
    Env env;
    env.set("NCCL_AUTOPILOT_COORDINATOR_DIR", dir);
    env.set("NCCL_AUTOPILOT_TUNER_EXPLORE", "0");
    env.set("NCCL_AUTOPILOT_TUNING_FILE", file);
    LogCapture::clear();
    PluginHost host(options());
    REQUIRE(host.loadProfiler());
    REQUIRE(host.loadTuner());
    CommSession session(host, oneRank(0x7006));
    REQUIRE(session.init() == abi::kSuccess);
    CHECK(LogCapture::count(abi::kLogWarn, "tuning file ignored") == 1);
    CHECK(callUntil(host.tuner(), session.tunerContext(), kRingSimple, 1) == -1);
  }
}

TEST_CASE("a configured secret file that cannot serve as a secret turns learning off",
          "[tuner_host][security]") {
  std::string dir = tempDir();
  auto write = [&](const std::string& name, const std::string& text, mode_t mode) {
    std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  };
  struct Case {
    std::string path;
    const char* problem;  // nullptr: a good secret
  };
  std::vector<Case> cases = {
      {dir + "/missing", "cannot open"},
      {write("empty", "", 0600), "it is empty"},
      {write("shared", "s3cret", 0644), "readable or writable by group or others (mode 644)"},
      {dir, "not a regular file"},
      {write("good", "s3cret", 0600), nullptr},
  };
  for (const Case& c : cases) {
    INFO(c.path);
    Env env;
    env.set("NCCL_AUTOPILOT_COORDINATOR_DIR", tempDir());
    env.set("NCCL_AUTOPILOT_COORDINATOR_SECRET_FILE", c.path);
    LogCapture::clear();
    PluginHost host(options());
    REQUIRE(host.loadProfiler());
    REQUIRE(host.loadTuner());
    for (uint64_t comm : {0x7301, 0x7302}) {
      CommSession session(host, oneRank(comm));
      REQUIRE(session.init() == abi::kSuccess);
    }
    if (c.problem != nullptr) {
      // One warning per process, naming the file, the problem and the fix; both communicators
      // keep NCCL's choices.
      CHECK(LogCapture::count(abi::kLogWarn, "NCCL_AUTOPILOT_COORDINATOR_SECRET_FILE=" + c.path) ==
            1);
      CHECK(LogCapture::count(abi::kLogWarn, c.problem) == 1);
      CHECK(LogCapture::count(abi::kLogWarn, "chmod 600") == 1);
      CHECK(LogCapture::count(abi::kLogInfo, "NCCL's choices stand") == 2);
    } else {
      CHECK(LogCapture::count(abi::kLogWarn, "SECRET_FILE") == 0);
      CHECK(LogCapture::count(abi::kLogInfo, "NCCL's choices stand") == 0);
    }
  }
}

// Loads the profiler and the tuner, then initializes and finalizes each of `comms` as `rank`
// of 2 ranks on 2 nodes.
void initTwoNodeComms(int rank, std::initializer_list<uint64_t> comms) {
  PluginHost host(options());
  REQUIRE(host.loadProfiler());
  REQUIRE(host.loadTuner());
  for (uint64_t comm : comms) {
    CommSession::Config cfg = oneRank(comm);
    cfg.nRanks = 2;
    cfg.nNodes = 2;
    cfg.rank = rank;
    CommSession session(host, cfg);
    REQUIRE(session.init() == abi::kSuccess);
  }
}

// Seen on an H200 with NCCL 2.28.9 under a launcher that set no MASTER_ADDR: the tuner loaded,
// learned nothing, and said so only at INFO, which NCCL's default level never shows.
TEST_CASE("ranks on several nodes with nowhere to meet: WARN once on rank 0, INFO elsewhere",
          "[tuner_host]") {
  for (int rank : {0, 1}) {
    Env env;
    env.set("NCCL_AUTOPILOT_COORDINATOR", "");
    env.set("MASTER_ADDR", "");
    LogCapture::clear();
    initTwoNodeComms(rank, {0x7501, 0x7502});
    INFO("rank " << rank);
    const std::string why = "nor MASTER_ADDR is set; NCCL's choices stand";
    CHECK(LogCapture::count(abi::kLogWarn, why) == (rank == 0 ? 1 : 0));
    CHECK(LogCapture::count(abi::kLogInfo, why) == (rank == 0 ? 1 : 2));
  }
}

TEST_CASE("a TCP rendezvous without a secret is reported once: WARN on rank 0, INFO elsewhere",
          "[tuner_host][security]") {
  for (int rank : {0, 1}) {
    Env env;
    // A port nobody listens on: the rendezvous never completes, which does not matter here.
    env.set("NCCL_AUTOPILOT_COORDINATOR",
            "127.0.0.1:" + std::to_string(21000 + getpid() % 500 * 8));
    LogCapture::clear();
    initTwoNodeComms(rank, {0x7401, 0x7402});
    INFO("rank " << rank);
    CHECK(LogCapture::count(rank == 0 ? abi::kLogWarn : abi::kLogInfo, "is not authenticated") ==
          1);
    CHECK(LogCapture::count(rank == 0 ? abi::kLogInfo : abi::kLogWarn, "is not authenticated") ==
          0);
  }
}

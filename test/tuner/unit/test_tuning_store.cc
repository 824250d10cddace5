// Persistence: round trip, sections of other systems kept and ignored, and a parser that treats
// corrupt or hostile files as "no results" without crashing.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "tuner_plugin/tuning_store.h"

using namespace autopilot;
using namespace autopilot::tuner;

namespace {

std::string tempFile() {
  char tmpl[] = "/tmp/ap-store-XXXXXX";
  int fd = mkstemp(tmpl);
  close(fd);
  unlink(tmpl);
  return tmpl;
}

TuningKey key(int nRanks) {
  TuningKey k;
  k.nRanks = nRanks;
  k.nNodes = 1;
  k.nvlDomain = {1, nRanks, nRanks};
  k.haveConstants = true;
  k.constants.baseLatencies[0][0] = 6.8;
  return k;
}

std::vector<BanditPolicy::ContextRecord> records() {
  std::vector<BanditPolicy::ContextRecord> out(2);
  for (int i = 0; i < 2; ++i) {
    auto& r = out[i];
    r.ctx = 100 + i;
    r.incumbent = 5;
    for (int c = 0; c < kNumCells; ++c) r.prior[c] = c % 3 ? -1.0f : 10.5f + c + i;
    r.arms[5] = {12.0, 3.25, 0.0004};
    r.arms[3] = {64.0, -1.5, 1e-9};
  }
  // The second context also ran cell 3 at half its channels (arm kNumCells + 3, 6 channels).
  out[1].halvedChannels[3] = 6;
  out[1].prior[kNumCells + 3] = out[1].prior[3];
  out[1].arms[kNumCells + 3] = {5.0, -1.75, 0.002};
  // ... and Ring/Simple (cell 5) at half NCCL's chunk size.
  out[1].prior[5] = 20.0f;
  out[1].prior[halvedChunkArm(5)] = 20.0f;
  out[1].arms[halvedChunkArm(5)] = {4.0, 2.5, 0.001};
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("tuning file round trip; other keys are kept and ignored", "[store]") {
  std::string path = tempFile();
  std::string why;
  REQUIRE(saveTuningFile(path, key(8), records(), &why));
  REQUIRE(saveTuningFile(path, key(16), {records()[0]}, &why));
  std::vector<BanditPolicy::ContextRecord> got;
  REQUIRE(loadTuningFile(path, key(8), &got, &why));
  REQUIRE(got.size() == 2);
  CHECK(got[1].ctx == 101);
  CHECK(got[1].incumbent == 5);
  CHECK(got[1].prior[0] == 11.5f);
  CHECK(got[1].prior[1] == -1.0f);
  CHECK(got[1].arms[5].n == 12.0);
  CHECK(got[1].arms[5].mean == 3.25);
  CHECK(got[1].arms[3].var == 1e-9);
  CHECK(got[1].arms[0].n == 0);
  CHECK(got[1].halvedChannels[3] == 6);
  CHECK(got[1].prior[kNumCells + 3] == got[1].prior[3]);
  CHECK(got[1].arms[kNumCells + 3].mean == -1.75);
  CHECK(got[1].prior[kNumCells] == -1.0f);  // not offered: no arm
  CHECK(got[0].halvedChannels[3] == 0);
  CHECK(got[1].prior[halvedChunkArm(5)] == 20.0f);
  CHECK(got[1].arms[halvedChunkArm(5)].mean == 2.5);
  CHECK(got[0].prior[halvedChunkArm(5)] == -1.0f);  // not offered there
  CHECK(slurp(path).find("halfchunk 5\n") != std::string::npos);
  got.clear();
  REQUIRE(loadTuningFile(path, key(16), &got, &why));
  CHECK(got.size() == 1);
  // Another system (here: other NCCL constants, i.e. another NCCL version) finds nothing.
  TuningKey other = key(8);
  other.constants.baseLatencies[0][0] = 7.0;
  CHECK_FALSE(loadTuningFile(path, other, &got, &why));
  CHECK(why.find("no results for this system") != std::string::npos);
  // Rewriting one section keeps the other.
  REQUIRE(saveTuningFile(path, key(8), {records()[1]}, &why));
  got.clear();
  REQUIRE(loadTuningFile(path, key(16), &got, &why));
  CHECK(got.size() == 1);
  got.clear();
  REQUIRE(loadTuningFile(path, key(8), &got, &why));
  CHECK(got.size() == 1);
  unlink(path.c_str());
}

TEST_CASE("another scale of the same system is found, nearest first; another system is not",
          "[store]") {
  std::string path = tempFile();
  std::string why;
  TuningKey two = key(2), four = key(4), sixteen = key(16), otherNccl = key(8);
  otherNccl.constants.baseLatencies[0][0] = 7.0;  // another NCCL version
  REQUIRE(saveTuningFile(path, sixteen, {records()[0]}, &why));
  REQUIRE(saveTuningFile(path, two, records(), &why));
  REQUIRE(saveTuningFile(path, otherNccl, records(), &why));
  std::vector<BanditPolicy::ContextRecord> got;
  std::vector<OtherScale> others;
  // No section of its own at 8 ranks: the other scales come back anyway, nearest first (16
  // ranks: a factor 2 away; 2 ranks: a factor 4).
  CHECK_FALSE(loadTuningFile(path, key(8), &got, &why, &others));
  REQUIRE(others.size() == 2);
  CHECK(others[0].nRanks == 16);
  CHECK(others[0].records.size() == 1);
  CHECK(others[1].nRanks == 2);
  CHECK(others[1].records.size() == 2);
  CHECK(others[1].records[1].arms[5].mean == 3.25);
  // With a section of its own, that one is the result and not among the others.
  others.clear();
  REQUIRE(saveTuningFile(path, four, records(), &why));
  REQUIRE(loadTuningFile(path, four, &got, &why, &others));
  CHECK(got.size() == 2);
  REQUIRE(others.size() == 2);
  CHECK(others[0].nRanks == 2);  // log2 distance 1, before 16 (distance 2)
  CHECK(others[1].nRanks == 16);
  // Another NCCL version's sections are never taken for another scale.
  for (const OtherScale& o : others) CHECK(o.nRanks != 8);
  unlink(path.c_str());
}

TEST_CASE("a tampered or truncated tuning file is ignored with a reason", "[store]") {
  std::string path = tempFile();
  std::string why;
  REQUIRE(saveTuningFile(path, key(8), records(), &why));
  std::string text = slurp(path);
  std::vector<BanditPolicy::ContextRecord> got;
  SECTION("a changed number breaks the checksum") {
    size_t pos = text.find("3.25");
    REQUIRE(pos != std::string::npos);
    text[pos] = '4';
    std::ofstream(path) << text;
    CHECK_FALSE(loadTuningFile(path, key(8), &got, &why));
    CHECK(why.find("corrupt") != std::string::npos);
  }
  SECTION("truncated") {
    std::ofstream(path) << text.substr(0, text.size() / 2);
    CHECK_FALSE(loadTuningFile(path, key(8), &got, &why));
  }
  SECTION("not a tuning file") {
    std::ofstream(path) << "hello\n";
    CHECK_FALSE(loadTuningFile(path, key(8), &got, &why));
    CHECK(why.find("bad header") != std::string::npos);
  }
  SECTION("missing") { CHECK_FALSE(loadTuningFile(path + ".none", key(8), &got, &why)); }
  CHECK(got.empty());
  unlink(path.c_str());
}

TEST_CASE("the tuning file parser survives random garbage and mutations", "[store][fuzz]") {
  std::string path = tempFile();
  std::string why;
  REQUIRE(saveTuningFile(path, key(8), records(), &why));
  const std::string good = slurp(path);
  std::mt19937 rng(42);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    if (i % 10 == 0) {
      s.resize(rng() % 4096);
      for (char& c : s) c = char(rng());
    } else {
      s = good;
      for (int e = 0, n = 1 + int(rng() % 8); e < n; ++e) {
        size_t pos = rng() % s.size();
        switch (rng() % 4) {
          case 0:
            s[pos] = char(rng());
            break;
          case 1:
            s.erase(pos, 1 + rng() % 20);
            break;
          case 2:
            s.insert(pos, std::string(1 + rng() % 3, char(rng())));
            break;
          default:
            s.insert(pos, s.substr(rng() % s.size(), 40));
            break;
        }
        if (s.empty()) s = "x";
      }
    }
    std::ofstream(path, std::ios::binary | std::ios::trunc) << s;
    std::vector<BanditPolicy::ContextRecord> got;
    if (loadTuningFile(path, key(8), &got, &why)) {
      ++accepted;  // only possible if the mutation left the checksummed section intact
      for (const auto& r : got) {
        CHECK(r.ctx >= 0);
        CHECK(r.ctx < kNumContexts);
      }
    }
  }
  CHECK(accepted < 3000);
  unlink(path.c_str());
}

// The JSON reader and the topology derivation: derived graphs reproduce the worked examples of
// docs/nccl-cost-model.md (§9, §10), explicit graphs override, and malformed documents are refused
// with a reason instead of crashing.
#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "model/topology_description.h"

using namespace autopilot;
using namespace autopilot::tuner;
using namespace autopilot::tuner::model;

TEST_CASE("JSON reader accepts valid documents and refuses malformed ones", "[json]") {
  JsonValue v;
  std::string err;
  REQUIRE(JsonValue::parse(
      R"({"a": [1, 2.5e3, -0], "b": {"c": "x\u00e9\n"}, "d": true, "e": null})", &v, &err));
  REQUIRE(v.isObject());
  CHECK(v.find("a")->array().size() == 3);
  CHECK(v.find("a")->array()[1].number() == 2500);
  CHECK(v.find("b")->find("c")->string() == "x\xc3\xa9\n");
  CHECK(v.find("d")->boolean());
  CHECK(v.find("e")->isNull());
  CHECK(v.find("zz") == nullptr);
  for (const char* bad : {"", "{", "{\"a\":}", "[1,]", "01", "1.", "\"\\x\"", "{\"a\" 1}", "tru",
                          "[1] 2", "\"\\ud800\"", "1e999", "{\"a\":1,}", "\"a\x01\""}) {
    INFO(bad);
    CHECK_FALSE(JsonValue::parse(bad, &v, &err));
    CHECK_FALSE(err.empty());
  }
  std::string deep(1000, '[');
  CHECK_FALSE(JsonValue::parse(deep, &v, &err));
  CHECK(err.find("deep") != std::string::npos);
}

TEST_CASE("JSON reader survives random garbage and mutations", "[json]") {
  std::mt19937 rng(7);
  const std::string seed = R"({"nodes": 2, "graphs": {"Ring": {"nCh": 8}}, "s": ["a", 1, null]})";
  JsonValue v;
  std::string err;
  for (int i = 0; i < 20000; ++i) {
    std::string s = seed;
    int edits = 1 + int(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % (s.size() + 1);
      switch (rng() % 3) {
        case 0:
          s.insert(pos, 1, char(rng()));
          break;
        case 1:
          if (pos < s.size()) s.erase(pos, 1);
          break;
        default:
          if (pos < s.size()) s[pos] = char(rng());
          break;
      }
    }
    (void)JsonValue::parse(s, &v, &err);  // must return, whatever it decides
    Topology t;
    (void)topologyFromJson(s, "x", &t, &err);
  }
  SUCCEED();
}

TEST_CASE("derived topology reproduces the 4 x 8 H100 worked example", "[topology]") {
  Topology t;
  std::string err;
  REQUIRE(topologyFromJson(R"({"nodes": 4, "gpus_per_node": 8, "sm": 90, "intra": "nvswitch",
      "nics_per_node": 8, "nic_gbps": 400, "pcie_gen": 5, "cpu": "intel"})",
                           "", &t, &err));
  CHECK(t.nRanks == 32);
  const GraphInfo& ring = t.graphs[abi::kAlgoRing];
  CHECK(ring.nCh == 8);
  CHECK(ring.bwIntra == 48.0);
  CHECK(ring.bwInter == 48.0);
  CHECK(t.graphs[abi::kAlgoNvls].nCh == 8);
  CHECK(t.graphs[abi::kAlgoNvls].bwIntra == 40.0);
  CHECK(t.graphs[abi::kAlgoNvls].bwInter == 48.0);
  CHECK(t.commNChannels == 16);
  CHECK(t.nvlsChannels == 16);
  CHECK(t.treePatternTree);
  CostModel m(t);
  CHECK(m.time(abi::kFuncAllReduce, abi::kAlgoTree, abi::kProtoLL128, 1 << 20) ==
        Approx(83.2).margin(0.05));
  CHECK(m.time(abi::kFuncAllReduce, abi::kAlgoNvlsTree, abi::kProtoSimple, 256u << 20) ==
        Approx(1537.4).margin(0.05));
}

TEST_CASE("derived topology reproduces the N x 1 H100 example", "[topology]") {
  Topology t;
  std::string err;
  REQUIRE(topologyFromJson(R"({"nodes": 4, "gpus_per_node": 1, "sm": 90, "pcie_gen": 5,
      "nics_per_node": 1, "nic_gbps": 400})",
                           "", &t, &err));
  CHECK(t.graphs[abi::kAlgoRing].nCh == 2);
  CHECK(t.graphs[abi::kAlgoRing].bwIntra == 24.0);
  CHECK(t.graphs[abi::kAlgoTree].bwIntra == 48.0);
  CHECK(t.graphs[abi::kAlgoTree].bwInter == 24.0);
  CHECK(t.graphs[abi::kAlgoRing].typeIntra == kPathLoc);
  CHECK(t.commNChannels == 4);
  CostModel m(t);
  // §10: N = 4, 1 MiB: Ring/LL128 100.6 wins; PAT exists for AllGather (1 MiB: 56.3).
  CHECK(m.time(abi::kFuncAllReduce, abi::kAlgoRing, abi::kProtoLL128, 1 << 20) ==
        Approx(100.6).margin(0.05));
  CHECK(m.time(abi::kFuncAllGather, abi::kAlgoPat, abi::kProtoSimple, 1 << 20) ==
        Approx(56.3).margin(0.05));
}

TEST_CASE("explicit graphs and per-system entries override the derivation", "[topology]") {
  const char* doc = R"({"nodes": 1, "gpus_per_node": 8, "sm": 90,
      "graphs": {"Ring": {"nCh": 3, "bwIntra": 11, "bwInter": 11, "typeIntra": "PXB"}},
      "systems": [{"match": "two nodes", "nodes": 2, "nics_per_node": 4},
                  {"match": "node", "gpus_per_node": 4}]})";
  Topology t;
  std::string err;
  REQUIRE(topologyFromJson(doc, "", &t, &err));
  CHECK(t.nRanks == 8);
  CHECK(t.graphs[abi::kAlgoRing].nCh == 3);
  CHECK(t.graphs[abi::kAlgoRing].typeIntra == kPathPxb);
  REQUIRE(topologyFromJson(doc, "a cluster of two nodes", &t, &err));
  CHECK(t.nNodes == 2);
  CHECK(t.nRanks == 16);
  REQUIRE(topologyFromJson(doc, "one node", &t, &err));
  CHECK(t.nNodes == 1);
  CHECK(t.nRanks == 4);
}

TEST_CASE("bad topology documents are refused with a reason", "[topology]") {
  Topology t;
  std::string err;
  CHECK_FALSE(topologyFromJson("[]", "", &t, &err));
  CHECK_FALSE(topologyFromJson(R"({"gpus_per_node": 8})", "", &t, &err));
  CHECK(err.find("nodes") != std::string::npos);
  CHECK_FALSE(topologyFromJson(R"({"nodes": 1.5, "gpus_per_node": 8})", "", &t, &err));
  CHECK_FALSE(
      topologyFromJson(R"({"nodes": 1, "gpus_per_node": 8, "intra": "wifi"})", "", &t, &err));
  CHECK(err.find("nvswitch") != std::string::npos);
  CHECK_FALSE(topologyFromJson(R"({"nodes": 1, "gpus_per_node": 8, "graphs": {"Mesh": {}}})", "",
                               &t, &err));
  CHECK_FALSE(
      topologyFromJson(R"({"nodes": 1, "gpus_per_node": 8, "systems": [{}]})", "", &t, &err));
}

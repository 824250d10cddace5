// The C++ cost model against the Python reference model (see docs/nccl-cost-model.md): every
// cell of test/tuner/cost_model_cases.txt, which gen_cost_model_cases.py generates from it, plus
// the worked example of docs/nccl-cost-model.md §9.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "model/cost_model.h"

using namespace autopilot;
using namespace autopilot::tuner::model;

namespace {

const char* kAlgoNames[abi::kNumAlgorithms] = {
    "Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};

std::map<std::string, std::string> keyValues(std::istringstream& in) {
  std::map<std::string, std::string> kv;
  std::string tok;
  while (in >> tok) {
    auto eq = tok.find('=');
    if (eq != std::string::npos) kv[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  return kv;
}

bool pyBool(const std::string& v) { return v == "True" || v == "1"; }

void applyComm(Topology& t, const std::map<std::string, std::string>& kv) {
  for (const auto& [k, v] : kv) {
    if (k == "nRanks")
      t.nRanks = std::stoi(v);
    else if (k == "nNodes")
      t.nNodes = std::stoi(v);
    else if (k == "cc")
      t.cc = std::stoi(v);
    else if (k == "cpuVendor")
      t.cpuVendor = v == "intel"   ? CpuVendor::kIntel
                    : v == "amd"   ? CpuVendor::kAmd
                    : v == "mixed" ? CpuVendor::kMixed
                                   : CpuVendor::kOther;
    else if (k == "cpuArch")
      t.cpuArch = v == "x86" ? CpuArch::kX86 : v == "power" ? CpuArch::kPower : CpuArch::kArm;
    else if (k == "netOverheadNs")
      t.netOverheadUs = std::stod(v) * 1e-3;
    else if (k == "commNChannels")
      t.commNChannels = std::stoi(v);
    else if (k == "nvlsChannels")
      t.nvlsChannels = std::stoi(v);
    else if (k == "maxTreePattern")
      t.treePatternTree = v == "TREE";
    else if (k == "collnetEnable")
      t.collnetEnable = pyBool(v);
    else if (k == "collnetAGRS")
      t.collnetAllGatherReduceScatter = pyBool(v);
    else if (k == "hasNVSwitch")
      t.hasNvSwitch = pyBool(v);
    else if (k == "homogeneousCC")
      t.homogeneousCc = pyBool(v);
    else if (k == "netDeviceHost")
      t.netDeviceHost = pyBool(v);
    else
      FAIL("unknown comm key " << k);
  }
}

void applyGraph(GraphInfo& g, const std::map<std::string, std::string>& kv) {
  for (const auto& [k, v] : kv) {
    if (k == "nCh")
      g.nCh = std::stoi(v);
    else if (k == "bwIntra")
      g.bwIntra = std::stod(v);
    else if (k == "bwInter")
      g.bwInter = std::stod(v);
    else if (k == "typeIntra")
      g.typeIntra = std::stoi(v);
    else if (k == "typeInter")
      g.typeInter = std::stoi(v);
    else if (k == "latencyInter")
      g.latencyInter = std::stod(v);
    else if (k == "sameChannels")
      g.sameChannels = std::stoi(v) != 0;
    else
      FAIL("unknown graph key " << k);
  }
}

int algoIndex(const std::string& name) {
  for (int a = 0; a < abi::kNumAlgorithms; ++a) {
    if (name == kAlgoNames[a]) return a;
  }
  return -1;
}

Topology h100x32() {
  Topology t;
  t.nRanks = 32;
  t.nNodes = 4;
  t.cc = 90;
  t.commNChannels = 16;
  t.nvlsChannels = 16;
  t.treePatternTree = true;
  GraphInfo ring{8, 48.0, 48.0, kPathNvl, kPathPix, 0, true};
  GraphInfo nvls{8, 40.0, 48.0, kPathNvl, kPathPix, 0, true};
  t.graphs[abi::kAlgoTree] = ring;
  t.graphs[abi::kAlgoRing] = ring;
  t.graphs[abi::kAlgoPat] = ring;
  t.graphs[abi::kAlgoNvls] = nvls;
  t.graphs[abi::kAlgoNvlsTree] = nvls;
  return t;
}

}  // namespace

TEST_CASE("cost model reproduces every cell of the Python reference", "[cost_model]") {
  std::string path = std::string(AUTOPILOT_TUNER_TEST_DATA) + "/cost_model_cases.txt";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::map<std::string, Topology> topos;
  std::map<std::string, std::unique_ptr<CostModel>> models;
  std::string line;
  size_t cases = 0, cells = 0, ignored = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string kind, name;
    ls >> kind >> name;
    if (kind == "topo") {
      Topology t;
      applyComm(t, keyValues(ls));
      topos[name] = t;
    } else if (kind == "graph") {
      std::string algo;
      ls >> algo;
      int a = algoIndex(algo);
      REQUIRE(a >= 0);
      applyGraph(topos[name].graphs[a], keyValues(ls));
      models.erase(name);
    } else if (kind == "case") {
      if (!models.count(name)) models[name] = std::make_unique<CostModel>(topos.at(name));
      const CostModel& m = *models[name];
      int func, pipe;
      uint64_t nBytes;
      ls >> func >> nBytes >> pipe;
      float table[abi::kNumAlgorithms][abi::kNumProtocols];
      m.fillTable(func, nBytes, pipe, table);
      for (int cell = 0; cell < abi::kNumAlgorithms * abi::kNumProtocols; ++cell) {
        std::string expected;
        ls >> expected;
        REQUIRE(!expected.empty());
        int a = cell / abi::kNumProtocols, p = cell % abi::kNumProtocols;
        double got = m.time(func, a, p, nBytes, pipe);
        INFO(name << " func " << func << " nBytes " << nBytes << " pipe " << pipe << " "
                  << kAlgoNames[a] << "/" << p);
        if (expected == "x") {
          CHECK_FALSE(m.computed(func, a, p));
          CHECK(table[a][p] == abi::kAlgoProtoIgnore);
          ++ignored;
        } else {
          double want = std::strtod(expected.c_str(), nullptr);
          CHECK(got == Approx(want).epsilon(1e-12).margin(1e-12));
          CHECK(table[a][p] == float(want < 0 ? -1.0 : want));
        }
        ++cells;
      }
      ++cases;
    }
  }
  CHECK(topos.size() >= 10);
  CHECK(cases > 3000);
  CHECK(ignored < cells);
}

TEST_CASE("cost model matches the worked example of nccl-cost-model.md section 9", "[cost_model]") {
  CostModel m(h100x32());
  using namespace abi;
  const uint64_t MiB = 1 << 20;
  CHECK(m.time(kFuncAllReduce, kAlgoTree, kProtoLL128, MiB) == Approx(83.2).margin(0.05));
  CHECK(m.time(kFuncAllReduce, kAlgoNvlsTree, kProtoSimple, MiB) == Approx(114.2).margin(0.05));
  CHECK(m.time(kFuncAllReduce, kAlgoRing, kProtoSimple, 256 * MiB) == Approx(1750.3).margin(0.05));
  CHECK(m.time(kFuncAllReduce, kAlgoNvlsTree, kProtoSimple, 256 * MiB) ==
        Approx(1537.4).margin(0.05));
  CHECK(m.latency(kFuncAllReduce, kAlgoRing, kProtoSimple) == Approx(282.8));
  CHECK(m.bandwidth(kFuncAllReduce, kAlgoTree, kProtoLL128) == Approx(98.6).margin(0.01));
  // NCCL's choice: Tree/LL128 at 1 MiB, NVLSTree/Simple at 256 MiB; NVLS alone is off.
  float table[kNumAlgorithms][kNumProtocols];
  m.fillTable(kFuncAllReduce, MiB, 1, table);
  CHECK(ncclChoice(&table[0][0]) == kAlgoTree * kNumProtocols + kProtoLL128);
  CHECK(table[kAlgoNvls][kProtoSimple] == kAlgoProtoIgnore);
  m.fillTable(kFuncAllReduce, 256 * MiB, 1, table);
  CHECK(ncclChoice(&table[0][0]) == kAlgoNvlsTree * kNumProtocols + kProtoSimple);
}

TEST_CASE("ncclChoice keeps the first strict minimum and skips negative cells", "[cost_model]") {
  float t[abi::kNumAlgorithms * abi::kNumProtocols];
  for (float& v : t) v = abi::kAlgoProtoIgnore;
  CHECK(ncclChoice(t) == -1);
  t[5] = 3.0f;
  t[4] = 3.0f;
  t[9] = 3.0f;
  CHECK(ncclChoice(t) == 4);
  t[12] = 0.0f;
  CHECK(ncclChoice(t) == 12);
  t[2] = 3.7e9f;  // beyond NCCL's bound: never chosen
  CHECK(ncclChoice(t) == 12);
}

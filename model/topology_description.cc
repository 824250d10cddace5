#include "model/topology_description.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace autopilot::tuner {
namespace {

using model::GraphInfo;
using model::Topology;

struct GraphOverride {
  bool present = false;
  GraphInfo graph;
};

// The hardware as declared; every field optional until validated.
struct Hardware {
  int nodes = 0;
  int gpusPerNode = 0;
  int sm = 90;
  std::string intra = "nvswitch";
  double nvlinkGBps = 0;  // 0 = default for the SM
  int pcieGen = 4;
  int pcieLanes = 16;
  int pciePath = model::kPathPhb;
  std::optional<bool> nvls;
  int nicsPerNode = 1;
  double nicGbps = 400;
  int nicPath = model::kPathPix;
  std::string cpu = "intel";
  bool collnet = false;
  std::optional<bool> treePatternTree;
  int commChannels = 0;
  int nvlsChannels = 0;
  GraphOverride graphs[4];  // Ring, Tree, NVLS, CollNet
};

enum { kGRing = 0, kGTree = 1, kGNvls = 2, kGCollNet = 3 };
const char* kGraphNames[4] = {"Ring", "Tree", "NVLS", "CollNet"};

bool pathType(const std::string& name, int* out) {
  static const char* kNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX",
                                 "PXB", "P2C", "PXN", "PHB", "SYS"};
  for (int i = 0; i < 10; ++i) {
    if (strcasecmp(name.c_str(), kNames[i]) == 0) {
      *out = i;
      return true;
    }
  }
  return false;
}

class Reader {
 public:
  explicit Reader(std::string* error) : error_(error) {}

  bool integer(const JsonValue& obj, const char* key, int lo, int hi, int* out) {
    const JsonValue* v = obj.find(key);
    if (v == nullptr) return true;
    if (!v->isNumber() || v->number() != std::floor(v->number()) || v->number() < lo ||
        v->number() > hi) {
      return fail(key, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    *out = int(v->number());
    return true;
  }
  bool real(const JsonValue& obj, const char* key, double lo, double hi, double* out) {
    const JsonValue* v = obj.find(key);
    if (v == nullptr) return true;
    if (!v->isNumber() || v->number() < lo || v->number() > hi) {
      return fail(key, "a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    *out = v->number();
    return true;
  }
  bool boolean(const JsonValue& obj, const char* key, bool* out) {
    const JsonValue* v = obj.find(key);
    if (v == nullptr) return true;
    if (!v->isBool()) return fail(key, "true or false");
    *out = v->boolean();
    return true;
  }
  bool optionalBool(const JsonValue& obj, const char* key, std::optional<bool>* out) {
    bool b;
    if (obj.find(key) == nullptr) return true;
    if (!boolean(obj, key, &b)) return false;
    *out = b;
    return true;
  }
  bool choice(const JsonValue& obj, const char* key, std::initializer_list<const char*> choices,
              std::string* out) {
    const JsonValue* v = obj.find(key);
    if (v == nullptr) return true;
    if (v->isString()) {
      for (const char* c : choices) {
        if (strcasecmp(v->string().c_str(), c) == 0) {
          *out = c;
          return true;
        }
      }
    }
    std::string list;
    for (const char* c : choices) list += std::string(list.empty() ? "" : " | ") + c;
    return fail(key, list);
  }
  bool path(const JsonValue& obj, const char* key, int* out) {
    const JsonValue* v = obj.find(key);
    if (v == nullptr) return true;
    if (!v->isString() || !pathType(v->string(), out)) {
      return fail(key, "a path type (LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS)");
    }
    return true;
  }
  bool fail(const char* key, const std::string& expected) {
    *error_ = std::string("\"") + key + "\" must be " + expected;
    return false;
  }

 private:
  std::string* error_;
};

bool readGraph(Reader& r, const JsonValue& obj, GraphOverride* g, std::string* error) {
  if (!obj.isObject()) {
    *error = "graphs entries must be objects";
    return false;
  }
  g->present = true;
  g->graph.typeIntra = model::kPathNvl;
  g->graph.typeInter = model::kPathPix;
  if (!r.integer(obj, "nCh", 0, 64, &g->graph.nCh) ||
      !r.real(obj, "bwIntra", 0, 1e4, &g->graph.bwIntra) ||
      !r.real(obj, "bwInter", 0, 1e4, &g->graph.bwInter) ||
      !r.path(obj, "typeIntra", &g->graph.typeIntra) ||
      !r.path(obj, "typeInter", &g->graph.typeInter) ||
      !r.real(obj, "latencyInter", 0, 1e6, &g->graph.latencyInter) ||
      !r.boolean(obj, "sameChannels", &g->graph.sameChannels)) {
    return false;
  }
  return true;
}

bool readHardware(const JsonValue& obj, Hardware* hw, std::string* error) {
  Reader r(error);
  if (!r.integer(obj, "nodes", 1, 1 << 16, &hw->nodes) ||
      !r.integer(obj, "gpus_per_node", 1, 1024, &hw->gpusPerNode) ||
      !r.integer(obj, "sm", 30, 200, &hw->sm) ||
      !r.choice(obj, "intra", {"nvswitch", "nvlink", "pcie"}, &hw->intra) ||
      !r.real(obj, "nvlink_GBps", 0, 1e5, &hw->nvlinkGBps) ||
      !r.integer(obj, "pcie_gen", 1, 7, &hw->pcieGen) ||
      !r.integer(obj, "pcie_lanes", 1, 32, &hw->pcieLanes) ||
      !r.path(obj, "pcie_path", &hw->pciePath) || !r.optionalBool(obj, "nvls", &hw->nvls) ||
      !r.integer(obj, "nics_per_node", 0, 64, &hw->nicsPerNode) ||
      !r.real(obj, "nic_gbps", 0, 1e5, &hw->nicGbps) || !r.path(obj, "nic_path", &hw->nicPath) ||
      !r.choice(obj, "cpu", {"intel", "amd", "arm", "power"}, &hw->cpu) ||
      !r.boolean(obj, "collnet", &hw->collnet) ||
      !r.integer(obj, "comm_channels", 0, 64, &hw->commChannels) ||
      !r.integer(obj, "nvls_channels", 0, 64, &hw->nvlsChannels)) {
    return false;
  }
  if (const JsonValue* tp = obj.find("tree_pattern")) {
    std::string pattern;
    if (!r.choice(obj, "tree_pattern", {"balanced", "tree"}, &pattern)) return false;
    hw->treePatternTree = pattern == "tree";
    (void)tp;
  }
  if (const JsonValue* graphs = obj.find("graphs")) {
    if (!graphs->isObject()) {
      *error = "\"graphs\" must be an object";
      return false;
    }
    for (const auto& [name, g] : graphs->members()) {
      int which = -1;
      for (int i = 0; i < 4; ++i) {
        if (strcasecmp(name.c_str(), kGraphNames[i]) == 0) which = i;
      }
      if (which < 0) {
        *error = "unknown graph \"" + name + "\" (Ring, Tree, NVLS, CollNet)";
        return false;
      }
      if (!readGraph(r, g, &hw->graphs[which], error)) return false;
    }
  }
  return true;
}

// NCCL's per-link NVLink bandwidth by SM (docs/nccl-cost-model.md §2.3) times a typical link count.
double defaultNvlinkGBps(int sm) {
  if (sm >= 100) return 18 * 40.1;
  if (sm >= 90) return 18 * 20.6;
  if (sm >= 86) return 4 * 12.0;
  if (sm >= 80) return 12 * 20.0;
  if (sm >= 70) return 6 * 20.0;
  return 4 * 18.0;
}

double pcieGBps(int gen, int lanes) {
  static const double kRate[] = {0, 25, 50, 60, 120, 240, 480, 960};  // per lane, 100 Mb/s units
  return lanes * kRate[std::clamp(gen, 1, 7)] / 80.0;
}

// The largest candidate speed not above `limit` (sm90 lists; other generations are close enough
// for a prior).
double candidateSpeed(double limit, bool inter) {
  static const double kIntra[] = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
  static const double kInter[] = {48, 45, 42, 40, 30,  24,  22,   20,  17.5,
                                  15, 12, 6,  3,  2.4, 1.2, 0.24, 0.12};
  const double* list = inter ? kInter : kIntra;
  size_t n = inter ? std::size(kInter) : std::size(kIntra);
  for (size_t i = 0; i < n; ++i) {
    if (list[i] <= limit) return list[i];
  }
  return list[n - 1];
}

void duplicateChannels(GraphInfo* g, int sm) {
  // NCCL doubles channels at half the bandwidth when bwIntra >= 25, except on sm > 80 with
  // bwIntra < 50 and more than 4 channels.
  if (g->bwIntra >= 25 && !(sm > 80 && g->bwIntra < 50 && g->nCh > 4)) {
    g->nCh *= 2;
    g->bwIntra /= 2;
    g->bwInter /= 2;
  }
}

Topology derive(const Hardware& hw) {
  Topology t;
  t.nNodes = hw.nodes;
  t.nRanks = hw.nodes * hw.gpusPerNode;
  t.cc = hw.sm;
  t.cpuVendor = hw.cpu == "amd"     ? model::CpuVendor::kAmd
                : hw.cpu == "intel" ? model::CpuVendor::kIntel
                                    : model::CpuVendor::kOther;
  t.cpuArch = hw.cpu == "power" ? model::CpuArch::kPower
              : hw.cpu == "arm" ? model::CpuArch::kArm
                                : model::CpuArch::kX86;
  t.collnetEnable = hw.collnet;
  const bool nvlinked = hw.intra != "pcie" && hw.gpusPerNode > 1;
  const bool nvswitch = hw.intra == "nvswitch" && hw.gpusPerNode > 1;
  t.hasNvSwitch = nvswitch;
  const double pcie = pcieGBps(hw.pcieGen, hw.pcieLanes);
  const double gpuIntraBw =
      nvlinked ? (hw.nvlinkGBps > 0 ? hw.nvlinkGBps : defaultNvlinkGBps(hw.sm)) : pcie;
  const int typeIntra = hw.gpusPerNode == 1 ? model::kPathLoc
                        : nvlinked          ? model::kPathNvl
                                            : hw.pciePath;

  GraphInfo ring;
  ring.typeIntra = typeIntra;
  ring.typeInter = hw.nicPath;
  if (hw.nodes == 1) {
    // One node: the ring is limited by the GPU's own links; channels pack until they cover it.
    double speed = candidateSpeed(gpuIntraBw, false);
    ring.nCh = std::clamp(int(gpuIntraBw / speed), 1, 32);
    ring.bwIntra = ring.bwInter = speed;
    ring.typeInter = typeIntra;
  } else {
    // Several nodes: one channel per NIC at the GPU<->NIC speed (PCIe and NIC bound).
    double nicGBps = hw.nicGbps / 8.0;
    double speed = candidateSpeed(std::min(pcie, nicGBps), true);
    ring.nCh = std::clamp(hw.nicsPerNode, 1, 32);
    ring.bwIntra = ring.bwInter = speed;
  }
  duplicateChannels(&ring, hw.sm);

  GraphInfo tree = ring;
  if (hw.nodes > 1 && hw.gpusPerNode == 1) tree.bwIntra = 2 * tree.bwInter;  // pass-2 raise

  GraphInfo nvls;
  bool nvlsOn = hw.nvls.value_or(nvswitch && hw.sm >= 90) && hw.gpusPerNode >= 2 && hw.sm >= 90;
  if (nvlsOn) {
    // Each NVLS head is charged twice on its switch link: 2b + (n-1)b <= link bandwidth.
    nvls.nCh = std::min(32, hw.gpusPerNode);
    nvls.bwIntra = candidateSpeed(gpuIntraBw / (hw.gpusPerNode + 1), false);
    nvls.bwInter = hw.nodes > 1 ? std::min(2 * nvls.bwIntra, ring.bwInter * (ring.nCh > 8 ? 2 : 1))
                                : nvls.bwIntra;
    nvls.typeIntra = model::kPathNvl;
    nvls.typeInter = hw.nicPath;
  }

  GraphInfo collnet;
  if (hw.collnet && hw.nodes > 1) {
    collnet = ring;
  }

  const GraphOverride* o = hw.graphs;
  if (o[kGRing].present) ring = o[kGRing].graph;
  if (o[kGTree].present) tree = o[kGTree].graph;
  if (o[kGNvls].present) nvls = o[kGNvls].graph;
  if (o[kGCollNet].present) collnet = o[kGCollNet].graph;

  t.graphs[abi::kAlgoRing] = ring;
  t.graphs[abi::kAlgoTree] = tree;
  t.graphs[abi::kAlgoPat] = tree;
  t.graphs[abi::kAlgoNvls] = nvls;
  t.graphs[abi::kAlgoNvlsTree] = nvls;
  t.graphs[abi::kAlgoCollNetDirect] = collnet;
  t.graphs[abi::kAlgoCollNetChain] = collnet;

  // Ring and tree share the smaller channel count; runtime channels are twice that (capped),
  // doubled again on sm90+ multi-node fast rings (docs/nccl-cost-model.md §2.3).
  int searchCh = std::max(1, std::min(ring.nCh, tree.nCh));
  int comm = std::min(64, 2 * searchCh);
  if (hw.sm >= 90 && hw.nodes > 1 && ring.bwIntra > 45 && comm < 16) comm *= 2;
  t.commNChannels = hw.commChannels > 0 ? hw.commChannels : comm;
  t.nvlsChannels = hw.nvlsChannels > 0 ? hw.nvlsChannels
                   : !nvlsOn           ? 0
                   : hw.sm >= 100      ? (hw.nodes > 1 ? 32 : 24)
                                       : 16;
  t.treePatternTree = hw.treePatternTree.value_or(hw.sm >= 90 && hw.nodes > 1);
  return t;
}

}  // namespace

bool topologyFromJson(const std::string& text, const std::string& systemName, model::Topology* out,
                      std::string* error) {
  JsonValue doc;
  if (!JsonValue::parse(text, &doc, error)) return false;
  if (!doc.isObject()) {
    *error = "the topology document must be a JSON object";
    return false;
  }
  Hardware hw;
  if (!readHardware(doc, &hw, error)) return false;
  if (const JsonValue* systems = doc.find("systems")) {
    if (!systems->isArray()) {
      *error = "\"systems\" must be an array";
      return false;
    }
    for (const JsonValue& s : systems->array()) {
      const JsonValue* match = s.isObject() ? s.find("match") : nullptr;
      if (match == nullptr || !match->isString()) {
        *error = "every \"systems\" entry needs a \"match\" string";
        return false;
      }
      if (!systemName.empty() && systemName.find(match->string()) != std::string::npos) {
        if (!readHardware(s, &hw, error)) return false;
        break;
      }
    }
  }
  if (hw.nodes < 1 || hw.gpusPerNode < 1) {
    *error = "\"nodes\" and \"gpus_per_node\" are required";
    return false;
  }
  *out = derive(hw);
  return true;
}

}  // namespace autopilot::tuner

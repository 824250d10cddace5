#include "bench/sim/sim_spec.h"

#include "model/json_value.h"

namespace autopilot::sim {

namespace {

bool number(const tuner::JsonValue& obj, const char* key, double lo, double hi, double* out,
            std::string* error) {
  const tuner::JsonValue* v = obj.find(key);
  if (v == nullptr) return true;
  if (!v->isNumber() || v->number() < lo || v->number() > hi) {
    *error = std::string("\"") + key + "\" must be a number in [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]";
    return false;
  }
  *out = v->number();
  return true;
}

bool integer(const tuner::JsonValue& obj, const char* key, int lo, int hi, int* out,
             std::string* error) {
  double d = *out;
  if (!number(obj, key, lo, hi, &d, error)) return false;
  if (d != double(int(d))) {
    *error = std::string("\"") + key + "\" must be an integer";
    return false;
  }
  *out = int(d);
  return true;
}

}  // namespace

bool fabricFromJson(const std::string& text, FabricSpec* out, std::string* error) {
  tuner::JsonValue doc;
  if (!tuner::JsonValue::parse(text, &doc, error)) return false;
  if (!doc.isObject()) {
    *error = "the topology must be a JSON object";
    return false;
  }
  FabricSpec f;
  f.topoText = text;
  double nicGbps = 400, nvlinkGBps = 450;
  if (!integer(doc, "nodes", 1, 65536, &f.nodes, error) ||
      !integer(doc, "gpus_per_node", 1, 64, &f.gpusPerNode, error) ||
      !integer(doc, "nics_per_node", 1, 16, &f.nicsPerNode, error) ||
      !integer(doc, "sm", 50, 200, &f.sm, error) ||
      !number(doc, "nic_gbps", 0.001, 1e5, &nicGbps, error) ||
      !number(doc, "nvlink_GBps", 0.001, 1e5, &nvlinkGBps, error)) {
    return false;
  }
  f.nicBytesPerSec = nicGbps * 1e9 / 8;
  f.nvlinkBytesPerSec = nvlinkGBps * 1e9;
  if (const tuner::JsonValue* fab = doc.find("fabric")) {
    if (!fab->isObject()) {
      *error = "\"fabric\" must be an object";
      return false;
    }
    if (const tuner::JsonValue* kind = fab->find("kind")) {
      if (!kind->isString() || (kind->string() != "rail" && kind->string() != "fat_tree")) {
        *error = "\"fabric.kind\" must be \"rail\" or \"fat_tree\"";
        return false;
      }
      f.railOptimized = kind->string() == "rail";
    }
    double nicLatUs = f.nicLatencyS * 1e6, upLatUs = f.uplinkLatencyS * 1e6, upGbps = 0;
    double nvLatUs = f.nvlinkLatencyS * 1e6;
    if (!number(*fab, "nic_latency_us", 0, 1e6, &nicLatUs, error) ||
        !number(*fab, "uplink_latency_us", 0, 1e6, &upLatUs, error) ||
        !number(*fab, "uplink_gbps", 0, 1e9, &upGbps, error) ||
        !number(*fab, "nvlink_latency_us", 0, 1e6, &nvLatUs, error) ||
        !integer(*fab, "nodes_per_leaf", 1, 65536, &f.nodesPerLeaf, error)) {
      return false;
    }
    f.nicLatencyS = nicLatUs * 1e-6;
    f.uplinkLatencyS = upLatUs * 1e-6;
    f.uplinkBytesPerSec = upGbps * 1e9 / 8;
    f.nvlinkLatencyS = nvLatUs * 1e-6;
  }
  *out = f;
  return true;
}

ModelSpec llama70b() {
  ModelSpec m;
  m.name = "llama-70b";
  m.totalParams = m.activeParams = 70e9;
  m.layers = 80;
  m.hidden = 8192;
  m.seqLen = 4096;
  m.tp = 8;
  m.pp = 4;
  m.ep = 1;
  m.microBatches = 16;
  return m;
}

// Mixtral-8x22B: 141 B parameters, 39 B active per token (2 of 8 experts), 56 layers.
ModelSpec mixtral8x22b() {
  ModelSpec m;
  m.name = "mixtral-8x22b";
  m.totalParams = 141e9;
  m.activeParams = 39e9;
  m.layers = 56;
  m.hidden = 6144;
  m.seqLen = 4096;
  m.tp = 8;
  m.pp = 4;
  m.ep = 8;
  m.topK = 2;
  m.experts = 8;
  m.microBatches = 8;
  return m;
}

const char* policyName(PolicyKind p) {
  switch (p) {
    case PolicyKind::kStatic:
      return "static";
    case PolicyKind::kNcclResilient:
      return "nccl-2.30";
    case PolicyKind::kOurs:
      return "ours";
  }
  return "?";
}

}  // namespace autopilot::sim

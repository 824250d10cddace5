// A declared topology (a small JSON document, e.g. a replay CSV's NAME.topo.json sidecar) turned
// into the cost model's inputs.
//
// The document describes the hardware the way a person knows it (GPUs per node, nodes, GPU
// generation, NVSwitch / NVLink / PCIe, NICs and their speed); deriveTopology() approximates
// what NCCL's topology search would find from that (docs/nccl-cost-model.md §2.3: candidate speeds,
// one channel per NIC, duplication, runtime channels). The approximation is good enough for a
// prior; where exact values are known (NCCL_DEBUG_SUBSYS=GRAPH prints them), a "graphs" member
// overrides the derivation per algorithm. Keys:
//
//   nodes, gpus_per_node            required, >= 1
//   sm                              SM version of the GPUs (70, 80, 86, 89, 90, 100, ...)
//   intra                           "nvswitch" | "nvlink" | "pcie"
//   nvlink_GBps                     per-GPU NVLink bandwidth in NCCL's units (default by sm)
//   pcie_gen, pcie_lanes            default 4, 16
//   pcie_path                       GPU<->GPU path type over PCIe: "PIX" | "PXB" | "PHB" | "SYS"
//   nvls                            multicast available (default: nvswitch and sm >= 90)
//   nics_per_node, nic_gbps         network (multi-node), default 1 and 400
//   nic_path                        GPU<->NIC path type, default "PIX"
//   cpu                             "intel" | "amd" | "arm" | "power" (default intel)
//   collnet                         CollNet/SHARP enabled (default false)
//   tree_pattern                    "balanced" | "tree" (default: tree on sm >= 90 multi-node)
//   comm_channels, nvls_channels    runtime channel counts (default derived)
//   graphs                          {"Ring": {"nCh", "bwIntra", "bwInter", "typeIntra",
//                                   "typeInter", "latencyInter"}, "Tree": ..., "NVLS": ...,
//                                   "CollNet": ...}: exact graph values
//   systems                         [{"match": "substring", ...overrides}]: per-system values
//                                   for files that hold several systems; the first entry whose
//                                   "match" occurs in the system name is merged over the top
//                                   level
#pragma once

#include <string>

#include "model/cost_model.h"
#include "model/json_value.h"

namespace autopilot::tuner {

// Parses a topology document for the system named `systemName` (may be empty) into a cost-model
// topology. Returns false with *error on any defect (bad JSON, missing or out-of-range keys).
bool topologyFromJson(const std::string& text, const std::string& systemName, model::Topology* out,
                      std::string* error);

}  // namespace autopilot::tuner

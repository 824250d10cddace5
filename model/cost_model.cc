#include "model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace autopilot::tuner::model {
namespace {

using namespace abi;

constexpr int kHwNvlink = 0, kHwPci = 1, kHwNet = 2;

// Hard-coded in NCCL, not part of the v5 constants (docs/nccl-cost-model.md §3).
constexpr double kNvlsEfficiency[kNumCompCaps] = {0.0, 0.0, 0.85, 0.74};
// Tree AllReduce bandwidth correction, [proto][floor(log2(nBytes/64))] for 0..22 (§6).
constexpr double kTreeCorrection[kNumProtocols][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6, .5,
     .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6, .6,
     .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
};
// NCCL_MAX_DEV_WORK_BATCH_COLLS: 1024 B of work batch / 96 B per ncclDevWorkColl on x86-64.
constexpr int kMaxDevWorkBatchColls = 10;

int log2Floor(uint64_t n) { return n == 0 ? -1 : 63 - __builtin_clzll(n); }

int compCapIndex(int cc) { return cc >= 100 ? 3 : cc >= 90 ? 2 : cc >= 80 ? 1 : 0; }

bool isCollNet(int a) { return a == kAlgoCollNetDirect || a == kAlgoCollNetChain; }
bool isAllGatherOrReduceScatter(int c) { return c == kFuncAllGather || c == kFuncReduceScatter; }

}  // namespace

abi::TunerConstantsV5 defaultConstants() {
  TunerConstantsV5 k{};
  const double base[kNumAlgorithms][kNumProtocols] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0},
                                                      {0, 0, 0},        {0, 0, 0},        {0, 0, 0},
                                                      {8.0, 8.0, 8.0}};
  const double hw[kNumHwLinks][kNumAlgorithms][kNumProtocols] = {
      // NVLINK
      {{.6, 1.25, 4.0},
       {.6, 1.9, 3.4},
       {0, 0, 3.7},
       {0, 0, 2.8},
       {0, 0, 25},
       {0, 0, 25},
       {0, 0, 4.0}},
      // PCI
      {{1.0, 1.9, 4.0},
       {1.0, 2.5, 5.7},
       {0, 0, 3.7},
       {0, 0, 2.8},
       {0, 0, 0},
       {0, 0, 0},
       {0, 0, 4.0}},
      // NET
      {{5.0, 8.5, 14},
       {2.7, 4.0, 14.0},
       {0, 0, 31},
       {0, 0, 30},
       {0, 0, 18},
       {0, 0, 20.9},
       {0, 0, 14}},
  };
  const double llMax[kNumCompCaps][kNumTuningScales] = {
      {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
  const double ringLL128[kNumCompCaps][kNumTuningScales] = {
      {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {73.4, 34.6, 73.4}};
  const double treeLL128[kNumCompCaps][kNumTuningScales] = {
      {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
  const double tree[kNumCompCaps][kNumTuningScales] = {
      {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
  const double nvlsTree[kNumCompCaps][kNumTuningScales] = {
      {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 43.8}};
  std::memcpy(k.baseLatencies, base, sizeof(base));
  std::memcpy(k.hwLatencies, hw, sizeof(hw));
  std::memcpy(k.llMaxBws, llMax, sizeof(llMax));
  std::memcpy(k.perChMaxRingLL128Bws, ringLL128, sizeof(ringLL128));
  std::memcpy(k.perChMaxTreeLL128Bws, treeLL128, sizeof(treeLL128));
  std::memcpy(k.perChMaxTreeBws, tree, sizeof(tree));
  std::memcpy(k.perChMaxNVLSTreeBws, nvlsTree, sizeof(nvlsTree));
  return k;
}

CostModel::CostModel(const Topology& topo, const abi::TunerConstantsV5& constants) : topo_(topo) {
  const int nR = std::max(topo.nRanks, 1);
  const int nN = std::max(topo.nNodes, 1);
  const int cc = topo.cc;
  const double ppn = double(nR) / nN;
  const int ppnInt = nR / nN;
  const int cci = compCapIndex(cc);
  const int scale = nN <= 2 ? nN - 1 : 2;
  // llMaxBws' first index is the CPU vendor on multi-node communicators (§3).
  const bool amdLike = topo.cpuVendor == CpuVendor::kAmd || topo.cpuVendor == CpuVendor::kMixed;
  const int llRow = nN == 1 ? cci : (amdLike ? 1 : 0);
  const double llMax = constants.llMaxBws[llRow][scale];
  const double perChTree = constants.perChMaxTreeBws[cci][scale];
  const double perChRingLL128 = constants.perChMaxRingLL128Bws[cci][scale];
  const double perChTreeLL128 = constants.perChMaxTreeLL128Bws[cci][scale];
  const double perChNvlsTree = constants.perChMaxNVLSTreeBws[cci][scale];

  double hwl[kNumHwLinks][kNumAlgorithms][kNumProtocols];
  std::memcpy(hwl, constants.hwLatencies, sizeof(hwl));
  // Power CPUs: PCI Tree Simple takes the PCI Ring Simple value, after the plugin's init.
  if (topo.cpuArch == CpuArch::kPower) {
    hwl[kHwPci][kAlgoTree][kProtoSimple] = hwl[kHwPci][kAlgoRing][kProtoSimple];
  }
  double netOverhead = 1.0;
  if (topo.netOverheadUs >= 0) {
    netOverhead = topo.netOverheadUs;
  } else if (topo.cpuArch == CpuArch::kX86 && topo.cpuVendor == CpuVendor::kAmd) {
    netOverhead = 2.0;
  }
  const bool patEnabled = cc >= 60 && nN == nR && topo.netDeviceHost;

  for (int c = 0; c < kNumTunedFuncs; ++c) {
    const int nsteps = c == kFuncAllReduce             ? 2 * (nR - 1)
                       : isAllGatherOrReduceScatter(c) ? nR - 1
                                                       : nR;
    for (int a = 0; a < kNumAlgorithms; ++a) {
      if ((c == kFuncBroadcast || c == kFuncReduce) && a != kAlgoRing) continue;
      if (isAllGatherOrReduceScatter(c) && a != kAlgoPat && a != kAlgoRing && a != kAlgoNvls &&
          a != kAlgoCollNetDirect) {
        continue;
      }
      if (c == kFuncAllReduce && a == kAlgoPat) continue;
      const GraphInfo& g = topo.graphs[a];
      const int intraHw = g.typeIntra == kPathNvl ? kHwNvlink : kHwPci;
      const int hw = nN == 1 ? intraHw : kHwNet;
      const bool nvlsFamily = a == kAlgoNvls || a == kAlgoNvlsTree;
      for (int p = 0; p < kNumProtocols; ++p) {
        if (nvlsFamily && p != kProtoSimple) continue;
        if (isAllGatherOrReduceScatter(c) && a == kAlgoPat && (p != kProtoSimple || !patEnabled)) {
          continue;
        }
        const bool collnet = isCollNet(a);
        double b = (nN <= 2 || collnet) ? g.bwIntra : g.bwInter;
        if (nvlsFamily) {
          if (g.nCh < 2) continue;
          double intra = g.bwIntra * kNvlsEfficiency[cci] * (g.nCh - 1) / g.nCh;
          intra *= c == kFuncAllReduce ? 2.0 : (ppn - 1) / ppn;
          double inter = g.bwInter * ((nN <= 2 && a == kAlgoNvlsTree) ? 2 : 1);
          b = std::min(
              {intra, inter,
               a == kAlgoNvlsTree ? perChNvlsTree : std::numeric_limits<double>::infinity()});
        }
        double bus = g.nCh * b;
        if (a == kAlgoRing && p == kProtoLL) bus = std::min(llMax, bus * .5);
        if (a == kAlgoRing && p == kProtoLL128) bus = std::min(bus * .92, g.nCh * perChRingLL128);
        if (a == kAlgoTree && c == kFuncAllReduce) bus = std::min(bus * .92, g.nCh * perChTree);
        if (a == kAlgoTree && p == kProtoLL) bus = std::min(bus / 3.8, llMax);
        if (a == kAlgoTree && p == kProtoLL128) {
          bus = std::min(bus * (nN == 1 ? 7.0 / 9.0 : 120.0 / 128.0), g.nCh * perChTreeLL128);
        }
        if (a == kAlgoTree && topo.treePatternTree) bus *= .85;
        if (a == kAlgoPat) bus *= .75;
        if (collnet && p != kProtoSimple) bus = 0;
        if (a == kAlgoCollNetDirect && p == kProtoSimple) {
          if (isAllGatherOrReduceScatter(c)) {
            bus = ppn * std::min(g.bwIntra, g.bwInter * .9);
          } else {
            if (g.nCh == 0) {
              bus = 0;
            } else {
              double f = ppn / g.nCh;
              f -= (f - 1) / 2;
              bus /= f;
            }
            if (cc >= 90) bus *= .85;
          }
        }
        if ((a == kAlgoNvls || a == kAlgoCollNetDirect) && p == kProtoSimple &&
            isAllGatherOrReduceScatter(c) && nN > 1 && !topo.collnetAllGatherReduceScatter) {
          bus = 0;
        }
        // Bus bandwidth -> algorithm bandwidth (skipped for non-Ring AllGather/ReduceScatter).
        if (!(a != kAlgoRing && isAllGatherOrReduceScatter(c))) {
          if (a == kAlgoRing || nvlsFamily) {
            bus *= nsteps > 0 ? double(nR) / nsteps : 1.0;  // nsteps 0 only for 1 rank
          } else {
            bus *= .5;
          }
        }

        double L = constants.baseLatencies[a][p];
        const double intraLat = hwl[intraHw][a][p];
        double interLat = hwl[kHwNet][nR == nN ? kAlgoTree : a][p] + g.latencyInter;
        if (p == kProtoSimple) interLat += g.latencyInter;  // the "flush"
        if (a == kAlgoRing) {
          double l = hwl[hw][kAlgoRing][p];
          if (c == kFuncReduce || c == kFuncBroadcast) {
            if (g.sameChannels) {
              L += l;
            } else {
              if (p == kProtoSimple) l = hwl[hw][kAlgoTree][p];
              L += nsteps * l;
            }
          } else {
            double overhead = nN > 1 ? netOverhead * (p == kProtoSimple ? 3 : 1) : 0.0;
            double il = std::max(intraLat, overhead);
            int nInter = nN == 1 ? 0 : (c == kFuncAllReduce ? 2 * (nN - 1) : nN - 1);
            L += (nsteps - nInter) * il + nInter * interLat;
          }
        } else if (a == kAlgoTree) {
          if (c == kFuncAllReduce) L += 2 * ((ppnInt - 1) * intraLat + log2Floor(nN) * interLat);
        } else if (a == kAlgoCollNetDirect) {
          L += 2 * (std::min(1, ppnInt - 1) * intraLat + (ppnInt - 1) * 0.4) + interLat;
        } else if (a == kAlgoCollNetChain) {
          L += 2 * (ppnInt - 1) * intraLat + interLat;
        } else if (a == kAlgoNvls) {
          L = intraLat + (nN > 1 ? interLat : 0);
        } else if (a == kAlgoNvlsTree) {
          L += intraLat + 2 * log2Floor(nN) * interLat;
        } else if (a == kAlgoPat && isAllGatherOrReduceScatter(c)) {
          L += log2Floor(nN) * (interLat / 3.5) + nR * 2.8;
        }

        // Enable/disable rules (defaults: no NCCL_ALGO / NCCL_PROTO).
        const bool disabled = (nN == 1 && a == kAlgoNvlsTree) ||
                              (!topo.collnetEnable && (collnet || (a == kAlgoNvls && nN > 1))) ||
                              (!topo.hasNvSwitch && a == kAlgoCollNetDirect);
        if (p == kProtoLL128) {
          bool ok = g.typeInter <= (cc >= 90 ? kPathPxn : kPathPxb);
          ok = ok && g.typeIntra <= kPathNvb;
          ok = ok && topo.homogeneousCc && cc >= 70;
          if (!ok) bus = 0;
        }
        if (disabled) bus = 0;
        computed_[c][a][p] = true;
        bw_[c][a][p] = bus;
        lat_[c][a][p] = L;
      }
    }
  }
}

bool CostModel::computed(int func, int algo, int proto) const {
  if (func < 0 || func >= kNumTunedFuncs || algo < 0 || algo >= kNumAlgorithms || proto < 0 ||
      proto >= kNumProtocols) {
    return false;
  }
  return computed_[func][algo][proto];
}

double CostModel::bandwidth(int func, int algo, int proto) const {
  return computed(func, algo, proto) ? bw_[func][algo][proto] : 0.0;
}

double CostModel::latency(int func, int algo, int proto) const {
  return computed(func, algo, proto) ? lat_[func][algo][proto] : 0.0;
}

double CostModel::time(int func, int algo, int proto, uint64_t nBytes, int numPipeOps) const {
  if (!computed(func, algo, proto)) return -1.0;
  double b = bw_[func][algo][proto];
  double L = lat_[func][algo][proto];
  if (b == 0) return -1.0;
  int k = log2Floor(nBytes >> 6);
  if (algo == kAlgoTree && func == kFuncAllReduce && k >= 0 && k < 23) {
    b *= kTreeCorrection[proto][k];
  }
  const Topology& t = topo_;
  if (algo == kAlgoRing && proto == kProtoSimple && t.nNodes > 1 && func == kFuncAllReduce) {
    uint64_t per = uint64_t(std::max(t.commNChannels, 1)) * uint64_t(std::max(t.nRanks, 1));
    if (nBytes / per >= 64) L *= t.cc < 80 ? 1.9 : 1.4;
  }
  int pipe = std::max(numPipeOps, 1);
  int latCount =
      algo == kAlgoRing ? pipe : (pipe + kMaxDevWorkBatchColls - 1) / kMaxDevWorkBatchColls;
  return L * latCount + double(nBytes) / (1000 * b);
}

void CostModel::fillTable(int func, uint64_t nBytes, int numPipeOps,
                          float table[kNumAlgorithms][kNumProtocols]) const {
  for (int a = 0; a < kNumAlgorithms; ++a) {
    for (int p = 0; p < kNumProtocols; ++p) {
      double t = time(func, a, p, nBytes, numPipeOps);
      table[a][p] = t < 0 ? kAlgoProtoIgnore : float(t);
    }
  }
}

}  // namespace autopilot::tuner::model

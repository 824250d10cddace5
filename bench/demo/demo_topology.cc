#include "bench/demo/demo_topology.h"

#include <initializer_list>

namespace autopilot::demo {

tuner::model::Topology modelTopology(const DeclaredTopology& t) {
  namespace m = tuner::model;
  m::Topology topo;
  topo.nRanks = t.nRanks;
  topo.nNodes = t.nRanks;  // one rank per node: every transfer crosses the network
  topo.cc = 90;
  topo.commNChannels = 2;
  topo.hasNvSwitch = false;
  topo.netDeviceHost = true;
  const double nicGBps = double(t.rails) * t.railMbit / 8000.0;  // one virtual NIC per node
  for (int algo : {abi::kAlgoRing, abi::kAlgoTree}) {
    m::GraphInfo& g = topo.graphs[algo];
    g.nCh = 2;
    const double factor = algo == abi::kAlgoTree ? t.treeBwFactor : 1.0;
    g.bwIntra = nicGBps / 2 * factor;  // per channel
    g.bwInter = nicGBps / 2 * factor;
    g.typeIntra = m::kPathPix;
    g.typeInter = m::kPathPix;
  }
  return topo;
}

}  // namespace autopilot::demo

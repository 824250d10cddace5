// The tunables of a connection, from the NCCL_AUTOPILOT_NET_* parameters, shared by every
// transport. Resolved once per load of the library (parameters are frozen after first read);
// each comm copies what it needs at creation, so the data path reads no parameter.
#pragma once

#include <cstdint>

#include "net_plugin/core/chunk_plan.h"
#include "net_plugin/core/rail_health.h"
#include "net_plugin/core/rail_striper.h"

namespace autopilot::net::core {

class FaultInjector;

// What every transport's comm is built from, before its own parts (rails, control link).
struct CommSetup {
  uint64_t commId = 0;
  uint64_t connectionId = 0;
  FaultInjector* faults = nullptr;  // simulated faults; none when null
};

struct CommConfig {
  RailStriper::Config striper;
  ChunkPolicy chunks;
  RailHealthConfig health;
  uint64_t peerTimeoutNs = 2'000'000'000;  // no rail at all for this long: error to NCCL
  uint64_t connectTimeoutNs = 30'000'000'000;
  uint64_t probeTimeoutNs = 1'000'000'000;  // one background re-connection attempt
  uint64_t stragglerNs = 500'000'000;       // connect/accept wait this long for slow rails
  double rejoinShare = 0.125;  // a re-joined rail starts at this fraction of its peers' bandwidth
  bool failover = true;        // false: the first failed rail fails the connection (a baseline)
  // A chunk may take `lateCopyFactor` times what its rail was expected to need for it when it
  // was placed (its bytes and those ahead of it at the rail's estimate then), and at least
  // `lateCopyMinNs`; one that has taken, or by its rail's current estimate will take, longer
  // is copied to the rail that delivers it first, where that saves time (0: never). See
  // SendEngine::placeLateCopies.
  double lateCopyFactor = 2;
  uint64_t lateCopyMinNs = 30'000'000;
  // A probe or check of a rail far slower than its peers (RailStriper::Config::copyProbesBelow)
  // is a copy of a chunk placed on another rail (RailStriper::pick's measureRail), where the
  // transport allows copies: the receiver keeps whichever lands first, so no message waits
  // for the measurement.
  bool probeCopies = true;
  int maxRecvs = 8;
};

const CommConfig& commConfig();

}  // namespace autopilot::net::core

// Test helper shared by the striper and engine tests: gives a rail a measured estimate.
#pragma once

#include <cstdint>

#include "net_plugin/core/rail_striper.h"

namespace autopilot::net::core::testutil {

// Gives `rail` a measured estimate of `bw` (one pipelined sample replacing the guess).
inline void measureAt(RailStriper& s, int rail, double bw, uint64_t* t) {
  s.setBandwidth(rail, bw);
  s.onAssigned(rail, 1 << 20, *t);
  s.onAssigned(rail, 1 << 20, *t);
  s.onCompleted(rail, 1 << 20, *t += uint64_t(double(1 << 20) * 1e9 / bw));
  s.onCompleted(rail, 1 << 20, *t += uint64_t(double(1 << 20) * 1e9 / bw));
}

}  // namespace autopilot::net::core::testutil

// Periods the send and receive engines run on. The simulator (bench/sim) drives the same policy
// classes and must keep their clock: it includes this header rather than a copy of the value.
#pragma once

#include <cstdint>

namespace autopilot::net::core {

// Rail states are re-evaluated from measured bandwidth this often.
inline constexpr uint64_t kEvaluateNs = 20'000'000;

}  // namespace autopilot::net::core

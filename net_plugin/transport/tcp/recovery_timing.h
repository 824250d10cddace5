// The TCP transport's own recovery periods (send_recovery.cc, recv_recovery.cc). The simulator
// models this transport (bench/sim, its TCP fabric) and includes this header, so that its
// model and the transport cannot drift apart.
#pragma once

#include <cstdint>

namespace autopilot::net::tcp {

// How often a stalled rail asks the kernel whether its TCP still gets bytes acknowledged, and
// if not, whether this host's own link of the rail is down. A sender whose rail holds data and
// moved nothing for this long fails the rail at once when that link is down: evidence that no
// failure detector needs to wait for.
inline constexpr uint64_t kTcpSampleNs = 5'000'000;
// How often a rail lost with this host's own link looks whether the link is back. It is
// re-connected as soon as it is, not when the failback backoff (which grows to seconds over an
// outage) says.
inline constexpr uint64_t kLinkCheckNs = 10'000'000;

}  // namespace autopilot::net::tcp

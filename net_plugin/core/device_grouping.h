// How a transport's rails become NCCL devices, and which rails are on standby, from the
// parameters every transport shares: NCCL_AUTOPILOT_NET_GROUPS (all rails in one device by
// default; 'per-rail'; or explicit groups of rail names) and NCCL_AUTOPILOT_NET_STANDBY (rails
// kept at weight 0). The parsing itself is in rail_selection.h; this applies it with the
// warnings and fallbacks a transport's discovery needs.
#pragma once

#include <string>
#include <vector>

namespace autopilot::net::core {

// Each device as a list of rail indices. A malformed or unresolvable NCCL_AUTOPILOT_NET_GROUPS
// is reported and replaced by one device with every rail; rails named in no explicit group are
// reported and left out; a group beyond `maxRailsPerDevice` keeps its first rails (reported).
std::vector<std::vector<int>> groupRails(const std::vector<std::string>& railNames,
                                         int maxRailsPerDevice);

// Whether a rail, known by `name` or by `alias` (e.g. its interface or device), is listed in
// NCCL_AUTOPILOT_NET_STANDBY.
bool isStandbyRail(const std::string& name, const std::string& alias);

}  // namespace autopilot::net::core

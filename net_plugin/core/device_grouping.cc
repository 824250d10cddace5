#include "net_plugin/core/device_grouping.h"

#include <algorithm>

#include "common/log.h"
#include "common/params.h"
#include "net_plugin/core/rail_selection.h"

namespace autopilot::net::core {

namespace {

params::StringParam gGroups(
    "NCCL_AUTOPILOT_NET_GROUPS", "",
    "How rails form NCCL devices: empty = all rails in one device; 'per-rail'; or explicit "
    "groups of rail names, e.g. 'a0,a1;a2,a3'.");
params::StringParam gStandby("NCCL_AUTOPILOT_NET_STANDBY", "",
                             "Rails (names, comma-separated) kept on standby (weight 0): they "
                             "carry data only while no other rail of the device can.");

constexpr unsigned long kFlags = abi::subsys::kNet | abi::subsys::kInit;

}  // namespace

std::vector<std::vector<int>> groupRails(const std::vector<std::string>& railNames,
                                         int maxRailsPerDevice) {
  GroupSpec spec;
  std::string error;
  std::vector<std::vector<int>> groups;
  std::vector<std::string> unused;
  if (!parseGroupSpec(gGroups.get(), &spec, &error) ||
      !resolveGroups(spec, railNames, &groups, &unused, &error)) {
    AP_WARN(kFlags, "NCCL_AUTOPILOT_NET_GROUPS='%s': %s; using one device with every rail",
            gGroups.get().c_str(), error.c_str());
    spec = GroupSpec{};
    resolveGroups(spec, railNames, &groups, &unused, &error);
  }
  for (const std::string& u : unused) {
    AP_INFO(kFlags, "rail %s is in no group of NCCL_AUTOPILOT_NET_GROUPS: not used", u.c_str());
  }
  for (auto& g : groups) {
    if (g.size() > size_t(maxRailsPerDevice)) {
      AP_WARN(kFlags, "a device has %zu rails; a connection uses at most %d: keeping the first %d",
              g.size(), maxRailsPerDevice, maxRailsPerDevice);
      g.resize(size_t(maxRailsPerDevice));
    }
  }
  return groups;
}

bool isStandbyRail(const std::string& name, const std::string& alias) {
  std::vector<std::string> standby = splitList(gStandby.get());
  return std::find(standby.begin(), standby.end(), name) != standby.end() ||
         std::find(standby.begin(), standby.end(), alias) != standby.end();
}

}  // namespace autopilot::net::core

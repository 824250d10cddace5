// Which interfaces become rails, and how rails are grouped into NCCL devices. Pure parsing and
// matching on names (the transport discovers the interfaces and applies the result).
//
// Interface lists use NCCL_SOCKET_IFNAME's syntax: a comma-separated list of name prefixes;
// a leading '^' excludes the listed interfaces instead; a leading '=' (after '^' if both)
// makes the names exact rather than prefixes. "eth,ib" = every interface whose name starts
// with eth or ib; "^docker,lo" = every interface but those; "=eth0" = eth0 only. NCCL's
// ":port" suffixes are accepted and ignored.
//
// Groups: "" puts every rail in one device (every connection uses all healthy rails);
// "per-rail" makes one device per rail (NCCL may then merge them with makeVDevice);
// "a0,a1;a2,a3" lists devices explicitly by rail name (rails not listed are not used).
#pragma once

#include <string>
#include <vector>

namespace autopilot::net::core {

struct InterfaceFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
  bool empty() const { return names.empty() && !exclude; }
};

// False with a reason on a malformed list (the caller warns and uses discovery).
bool parseInterfaceFilter(const std::string& text, InterfaceFilter* out, std::string* error);
bool interfaceMatches(const InterfaceFilter& filter, const std::string& name);

// Interfaces NCCL skips when nothing is configured: loopback, docker and libvirt bridges.
bool isDefaultExcluded(const std::string& name);

struct GroupSpec {
  enum class Kind { kAllInOne, kPerRail, kExplicit } kind = Kind::kAllInOne;
  std::vector<std::vector<std::string>> groups;  // kExplicit only
};

bool parseGroupSpec(const std::string& text, GroupSpec* out, std::string* error);

// Resolves a spec against the rail names: each device is a list of rail indices. Rails named
// in no explicit group are reported in *unused. False (with a reason) when a group names an
// unknown rail or a rail twice; the caller then falls back to all-in-one.
bool resolveGroups(const GroupSpec& spec, const std::vector<std::string>& railNames,
                   std::vector<std::vector<int>>* devices, std::vector<std::string>* unused,
                   std::string* error);

// A comma-separated list of names (standby rails, explicit addresses); empty entries are
// skipped; whitespace around entries is trimmed.
std::vector<std::string> splitList(const std::string& text, char separator = ',');

}  // namespace autopilot::net::core

#include "net_plugin/transport/tcp/discovery.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/resource.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "common/log.h"
#include "common/params.h"
#include "common/rail_telemetry.h"
#include "net_plugin/core/device_grouping.h"
#include "net_plugin/core/rail_selection.h"
#include "net_plugin/transport/tcp/wire.h"

namespace autopilot::net::tcp {

namespace {

params::StringParam gIfname(
    "NCCL_AUTOPILOT_IFNAME", "",
    "Interfaces used as rails, NCCL_SOCKET_IFNAME syntax (prefixes; ^ excludes; = exact). "
    "Empty: every interface that is up except lo, docker*, virbr*.");
params::StringParam gAddrs(
    "NCCL_AUTOPILOT_NET_ADDRS", "",
    "Explicit local IP addresses, one rail each (e.g. 127.0.0.1,127.0.0.2 for several rails on "
    "loopback). Overrides NCCL_AUTOPILOT_IFNAME.");
constexpr unsigned long kFlags = abi::subsys::kNet | abi::subsys::kInit;
constexpr size_t kMaxDiscoveredRails = 16;

struct Candidate {
  std::string ifname;
  SockAddr address;
  unsigned flags = 0;
};

bool linkLocal6(const SockAddr& a) {
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
  return IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr);
}

// Every (interface, address) pair, in getifaddrs order (interface index order).
std::vector<Candidate> listAddresses() {
  std::vector<Candidate> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_name == nullptr) continue;
    int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    Candidate c;
    c.ifname = it->ifa_name;
    c.flags = it->ifa_flags;
    c.address.length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&c.address.storage, it->ifa_addr, c.address.length);
    c.address.setPort(0);
    if (family == AF_INET6) {
      reinterpret_cast<sockaddr_in6*>(&c.address.storage)->sin6_scope_id = 0;
      reinterpret_cast<sockaddr_in6*>(&c.address.storage)->sin6_flowinfo = 0;
    }
    out.push_back(c);
  }
  freeifaddrs(list);
  return out;
}

int readSpeed(const std::string& ifname) {
  std::ifstream f("/sys/class/net/" + ifname + "/speed");
  long v = -1;
  if (f >> v && v > 0 && v < INT_MAX) return int(v);
  return 0;
}

std::string pciPathOf(const std::string& ifname) {
  std::string link = "/sys/class/net/" + ifname + "/device";
  char resolved[PATH_MAX];
  if (realpath(link.c_str(), resolved) == nullptr) return "";
  std::string path(resolved);
  return path.find("/pci") != std::string::npos ? path : "";
}

// One address per interface: IPv4 first, then a global IPv6 (link-local ones need scope ids,
// which do not travel in the handle).
std::vector<Candidate> onePerInterface(const std::vector<Candidate>& all) {
  std::vector<Candidate> out;
  for (const Candidate& c : all) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const Candidate& o) { return o.ifname == c.ifname; });
    bool usable6 = c.address.family() == AF_INET6 && !linkLocal6(c.address);
    if (c.address.family() != AF_INET && !usable6) continue;
    if (it == out.end()) {
      out.push_back(c);
    } else if (it->address.family() == AF_INET6 && c.address.family() == AF_INET) {
      *it = c;
    }
  }
  return out;
}

std::vector<Candidate> fromExplicitAddresses(const std::string& spec,
                                             const std::vector<Candidate>& all) {
  std::vector<Candidate> out;
  for (const std::string& text : core::splitList(spec)) {
    SockAddr a;
    if (!SockAddr::parseHost(text, &a)) {
      AP_WARN(kFlags, "NCCL_AUTOPILOT_NET_ADDRS: '%s' is not a numeric IP address (ignored)",
              text.c_str());
      continue;
    }
    Candidate c;
    c.address = a;
    for (const Candidate& o : all) {
      if (o.address.sameHost(a)) c.ifname = o.ifname;
    }
    // 127.0.0.x (x > 1) is not assigned to lo but reaches it through lo's 127/8 route.
    if (c.ifname.empty() && a.family() == AF_INET &&
        (ntohl(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr.s_addr) >> 24) == 127) {
      c.ifname = "lo";
    }
    if (c.ifname.empty()) c.ifname = "addr";
    out.push_back(c);
  }
  return out;
}

std::vector<Candidate> fromInterfaces(const std::string& spec, const std::vector<Candidate>& all) {
  std::vector<Candidate> ifs;
  for (const Candidate& c : onePerInterface(all)) {
    if (c.flags & IFF_UP) ifs.push_back(c);
  }
  if (!spec.empty()) {
    core::InterfaceFilter filter;
    std::string error;
    if (core::parseInterfaceFilter(spec, &filter, &error)) {
      std::vector<Candidate> out;
      for (const Candidate& c : ifs) {
        if (core::interfaceMatches(filter, c.ifname)) out.push_back(c);
      }
      return out;
    }
    AP_WARN(kFlags, "NCCL_AUTOPILOT_IFNAME='%s': %s; discovering interfaces instead", spec.c_str(),
            error.c_str());
  }
  // As NCCL does: anything but lo/docker/virbr, else docker, else loopback.
  std::vector<Candidate> out;
  for (const Candidate& c : ifs) {
    if (!core::isDefaultExcluded(c.ifname)) out.push_back(c);
  }
  for (const char* fallback : {"docker", "lo"}) {
    if (!out.empty()) break;
    for (const Candidate& c : ifs) {
      if (c.ifname.rfind(fallback, 0) == 0) out.push_back(c);
    }
  }
  return out;
}

}  // namespace

TcpRails& TcpRails::instance() {
  static TcpRails rails;
  return rails;
}

const std::string& interfaceOf(int globalIndex) {
  static const std::string kNone;
  const auto& rails = TcpRails::instance().rails();
  if (globalIndex < 0 || size_t(globalIndex) >= rails.size()) return kNone;
  return rails[size_t(globalIndex)].ifname;
}

void TcpRails::ensureDiscovered() {
  std::call_once(once_, [this] { discover(); });
}

int TcpRails::maxComms(int railsPerDevice) const {
  rlimit lim{};
  long files = 1024;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    files = long(lim.rlim_cur);
  if (lim.rlim_cur == RLIM_INFINITY) files = 1 << 20;
  // A receiving comm holds a connection and a listening socket per rail.
  long perComm = 2L * std::max(railsPerDevice, 1);
  return int(std::clamp((files - 64) / perComm, 1L, 65536L));
}

void TcpRails::discover() {
  std::vector<Candidate> all = listAddresses();
  std::string addrs = gAddrs.get();
  std::vector<Candidate> chosen =
      addrs.empty() ? fromInterfaces(gIfname.get(), all) : fromExplicitAddresses(addrs, all);
  if (chosen.size() > kMaxDiscoveredRails) {
    AP_WARN(kFlags, "%zu rails found; using the first %zu", chosen.size(), kMaxDiscoveredRails);
    chosen.resize(kMaxDiscoveredRails);
  }
  for (const Candidate& c : chosen) {
    TcpRail r;
    r.ifname = c.ifname;
    r.name = addrs.empty() ? c.ifname : c.ifname + "/" + c.address.host();
    r.address = c.address;
    r.speedMbps = readSpeed(c.ifname);
    r.pciPath = pciPathOf(c.ifname);
    r.standby = core::isStandbyRail(r.name, r.ifname);
    if (std::any_of(rails_.begin(), rails_.end(),
                    [&](const TcpRail& o) { return o.name == r.name; })) {
      AP_WARN(kFlags, "rail %s listed twice (ignored)", r.name.c_str());
      continue;
    }
    rails_.push_back(std::move(r));
  }
  std::vector<std::string> names;
  for (const TcpRail& r : rails_) names.push_back(r.name);

  std::vector<std::vector<int>> groups = core::groupRails(names, wire::kMaxRails);
  std::vector<core::RailDescriptor> descriptors;
  for (const TcpRail& r : rails_) descriptors.push_back({r.name, r.speedMbps, r.pciPath});
  devices_.build(descriptors, groups, 10000);

  auto& registry = telemetry::RailRegistry::instance();
  for (int d = 0; d < devices_.count(); ++d) {
    const core::NetDevice* dev = devices_.device(d);
    for (size_t i = 0; i < dev->rails.size(); ++i) {
      TcpRail& r = rails_[size_t(dev->rails[i])];
      telemetry::RailIdentity id{};
      std::snprintf(id.name, sizeof(id.name), "%s", r.name.c_str());
      std::snprintf(id.transport, sizeof(id.transport), "tcp");
      id.device = d;
      id.railIndex = int(i);
      id.speedMbps = r.speedMbps;
      r.telemetryId = registry.registerRail(id);
    }
    AP_INFO(kFlags, "net device %d: %s (%zu rail%s, %d Mbit/s)", d, dev->name.c_str(),
            dev->rails.size(), dev->rails.size() == 1 ? "" : "s", dev->speedMbps);
  }
  for (size_t i = 0; i < rails_.size(); ++i) {
    const TcpRail& r = rails_[i];
    AP_INFO(kFlags, "rail %zu: %s address %s speed %d Mbit/s%s", i, r.name.c_str(),
            r.address.host().c_str(), r.speedMbps, r.standby ? " (standby)" : "");
  }
  if (rails_.empty()) {
    AP_INFO(kFlags, "no usable interface found: the net plugin reports no devices");
  }
}

}  // namespace autopilot::net::tcp

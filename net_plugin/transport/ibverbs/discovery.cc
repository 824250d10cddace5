#include "net_plugin/transport/ibverbs/discovery.h"

#include <endian.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>

#include "common/clock.h"
#include "common/log.h"
#include "common/params.h"
#include "common/rail_telemetry.h"
#include "net_plugin/core/device_grouping.h"
#include "net_plugin/core/fault_injector.h"
#include "net_plugin/core/rail_selection.h"
#include "net_plugin/transport/ibverbs/port_attributes.h"
#include "net_plugin/transport/ibverbs/wire.h"

namespace autopilot::net::ib {

namespace {

params::StringParam gHca(
    "NCCL_AUTOPILOT_IB_HCA", "",
    "RDMA device ports used as rails by the verbs transport, NCCL_IB_HCA syntax (device-name "
    "prefixes, ^ excludes, = exact, optional :port, e.g. '=mlx5_0:1,mlx5_1:1'). Empty: every "
    "active port.");
params::IntParam gGidIndex(
    "NCCL_AUTOPILOT_IB_GID_INDEX", -1, -1, 1023,
    "GID index used on RoCE ports; -1 picks the RoCE v2 GID with an IPv4-mapped address (then "
    "another RoCE v2 GID).");

constexpr unsigned long kFlags = abi::subsys::kNet | abi::subsys::kInit;

const char* linkLayerName(uint8_t l) {
  return l == IBV_LINK_LAYER_ETHERNET ? "RoCE" : l == IBV_LINK_LAYER_INFINIBAND ? "IB" : "other";
}

std::string gidText(const ibv_gid& g) {
  char buf[48];
  const uint8_t* r = g.raw;
  if (isIpv4Mapped(r)) {
    std::snprintf(buf, sizeof(buf), "::ffff:%u.%u.%u.%u", r[12], r[13], r[14], r[15]);
  } else {
    std::snprintf(buf, sizeof(buf), "%02x%02x:%02x%02x:...:%02x%02x:%02x%02x", r[0], r[1], r[2],
                  r[3], r[12], r[13], r[14], r[15]);
  }
  return buf;
}

// The GID type of an entry: from the provider when libibverbs can tell, else from sysfs (as
// NCCL does), else unknown.
GidType gidType(const VerbsLibrary* lib, ibv_context* ctx, const std::string& dev, uint8_t port,
                int index) {
  if (lib->queryGidEx) {
    ibv_gid_entry entry{};
    if (lib->queryGidEx(ctx, port, uint32_t(index), &entry, 0, sizeof(entry)) == 0) {
      switch (entry.gid_type) {
        case IBV_GID_TYPE_IB:
          return GidType::kIb;
        case IBV_GID_TYPE_ROCE_V1:
          return GidType::kRoceV1;
        case IBV_GID_TYPE_ROCE_V2:
          return GidType::kRoceV2;
      }
    }
  }
  std::ifstream f("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) +
                  "/gid_attrs/types/" + std::to_string(index));
  std::string line;
  if (std::getline(f, line)) {
    if (line.find("v2") != std::string::npos) return GidType::kRoceV2;
    if (line.find("RoCE") != std::string::npos || line.find("IB/RoCE") != std::string::npos) {
      return GidType::kRoceV1;
    }
  }
  return GidType::kUnknown;
}

std::string pciPathOf(const std::string& dev) {
  std::string link = "/sys/class/infiniband/" + dev + "/device";
  char resolved[PATH_MAX];
  if (realpath(link.c_str(), resolved) == nullptr) return "";
  std::string path(resolved);
  return path.find("/pci") != std::string::npos ? path : "";
}

}  // namespace

IbRails& IbRails::instance() {
  static IbRails rails;
  return rails;
}

void IbRails::ensureDiscovered() {
  std::call_once(once_, [this] { discover(); });
}

int IbRails::maxComms(const core::NetDevice& dev) const {
  int most = 65536;
  for (int r : dev.rails) {
    const IbDevice& d = *devices_[size_t(rails_[size_t(r)].device)];
    // Each connection end holds one QP per rail (the send and the receive comm of a pair of
    // processes are both on this host when it talks to itself).
    most = std::min(most, std::max(d.maxQp / 2, 1));
  }
  return most;
}

void IbRails::discover() {
  std::string why;
  lib_ = verbs(&why);
  if (lib_ == nullptr) {
    AP_INFO(kFlags, "ibverbs transport: libibverbs is not available (%s): no RDMA devices",
            why.c_str());
    return;
  }
  core::InterfaceFilter filter;
  std::string error;
  if (!core::parseInterfaceFilter(gHca.get(), &filter, &error)) {
    AP_WARN(kFlags, "NCCL_AUTOPILOT_IB_HCA='%s': %s; using every active port", gHca.get().c_str(),
            error.c_str());
    filter = core::InterfaceFilter{};
  }
  bool filtered = !gHca.get().empty() && !filter.empty();
  int count = 0;
  ibv_device** list = lib_->getDeviceList(&count);
  if (list == nullptr || count == 0) {
    AP_INFO(kFlags, "ibverbs transport: no RDMA device (%s)",
            list == nullptr ? "libibverbs cannot list devices" : "none present");
    if (list) lib_->freeDeviceList(list);
    return;
  }
  for (int i = 0; i < count && int(rails_.size()) < kMaxRails; ++i) {
    std::string name = lib_->getDeviceName(list[i]) ? lib_->getDeviceName(list[i]) : "";
    if (name.empty() || (filtered && !core::interfaceMatches(filter, name))) continue;
    auto dev = std::make_unique<IbDevice>();
    dev->name = name;
    dev->guid = be64toh(lib_->getDeviceGuid(list[i]));
    dev->context = DeviceContext(lib_, lib_->openDevice(list[i]));
    if (!dev->context) {
      AP_WARN(kFlags, "%s: cannot be opened (errno %d); skipped", name.c_str(), errno);
      continue;
    }
    ibv_device_attr attr{};
    if (lib_->queryDevice(dev->context.get(), &attr) != 0) {
      AP_WARN(kFlags, "%s: ibv_query_device failed (errno %d); skipped", name.c_str(), errno);
      continue;
    }
    dev->maxQp = attr.max_qp;
    dev->maxQpWr = attr.max_qp_wr;
    dev->maxCqe = attr.max_cqe;
    int deviceIndex = int(devices_.size());
    std::vector<IbRail> found;
    for (int p = 1; p <= attr.phys_port_cnt && int(rails_.size() + found.size()) < kMaxRails; ++p) {
      std::string railName = name + ":" + std::to_string(p);
      if (filtered && !core::interfaceMatches(filter, name, p)) continue;
      ibv_port_attr pa{};
      if (lib_->queryPort(dev->context.get(), uint8_t(p), &pa) != 0) {
        AP_WARN(kFlags, "%s: ibv_query_port failed (errno %d); skipped", railName.c_str(), errno);
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        AP_INFO(kFlags, "%s: port not active (state %d); skipped", railName.c_str(), int(pa.state));
        continue;
      }
      if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET) {
        AP_INFO(kFlags, "%s: link layer %d is neither InfiniBand nor Ethernet; skipped",
                railName.c_str(), int(pa.link_layer));
        continue;
      }
      IbRail rail;
      rail.name = railName;
      rail.device = deviceIndex;
      rail.port = uint8_t(p);
      rail.linkLayer = pa.link_layer;
      rail.lid = pa.lid;
      rail.activeMtu = pa.active_mtu;
      if (pa.max_msg_sz > 0) rail.maxMessageBytes = pa.max_msg_sz;
      rail.speedMbps = portSpeedMbps(pa.active_speed, pa.active_width);
      rail.pciPath = pciPathOf(name);
      if (rail.roce()) {
        std::vector<GidEntry> table;
        for (int g = 0; g < pa.gid_tbl_len && g < 1024; ++g) {
          GidEntry e;
          e.index = g;
          ibv_gid gid{};
          if (lib_->queryGid(dev->context.get(), uint8_t(p), g, &gid) != 0) continue;
          std::copy(gid.raw, gid.raw + 16, e.raw);
          if (isZeroGid(e.raw)) continue;
          e.type = gidType(lib_, dev->context.get(), name, uint8_t(p), g);
          table.push_back(e);
        }
        int configured = int(gGidIndex.get());
        rail.gidIndex = chooseGidIndex(table, configured);
        if (configured >= 0 && rail.gidIndex != configured) {
          AP_WARN(kFlags, "%s: NCCL_AUTOPILOT_IB_GID_INDEX=%d is not a valid GID here; using %d",
                  railName.c_str(), configured, rail.gidIndex);
        }
        if (rail.gidIndex < 0) {
          AP_INFO(kFlags, "%s: RoCE port without a usable GID; skipped", railName.c_str());
          continue;
        }
      } else {
        rail.gidIndex = 0;  // IB: LID routing; the GID only matters across subnets
        if (pa.lid == 0) {
          AP_INFO(kFlags, "%s: InfiniBand port without a LID (no subnet manager?); skipped",
                  railName.c_str());
          continue;
        }
      }
      if (lib_->queryGid(dev->context.get(), uint8_t(p), rail.gidIndex, &rail.gid) != 0) {
        AP_WARN(kFlags, "%s: ibv_query_gid(%d) failed; skipped", railName.c_str(), rail.gidIndex);
        continue;
      }
      rail.standby = core::isStandbyRail(railName, name);
      found.push_back(rail);
    }
    if (found.empty()) continue;
    dev->pd = ProtectionDomain(lib_, lib_->allocPd(dev->context.get()));
    if (!dev->pd) {
      AP_WARN(kFlags, "%s: ibv_alloc_pd failed (errno %d); skipped", name.c_str(), errno);
      continue;
    }
    events_.addDevice(lib_, dev->context.get(), name);
    devices_.push_back(std::move(dev));
    for (IbRail& r : found) rails_.push_back(std::move(r));
  }
  lib_->freeDeviceList(list);  // the opened contexts stay valid

  std::vector<std::string> names;
  for (const IbRail& r : rails_) names.push_back(r.name);
  std::vector<std::vector<int>> groups = core::groupRails(names, wire::kMaxRails);
  std::vector<core::RailDescriptor> descriptors;
  for (const IbRail& r : rails_) descriptors.push_back({r.name, r.speedMbps, r.pciPath});
  table_.build(descriptors, groups, 100000);

  auto& registry = telemetry::RailRegistry::instance();
  for (int d = 0; d < table_.count(); ++d) {
    const core::NetDevice* dev = table_.device(d);
    for (size_t i = 0; i < dev->rails.size(); ++i) {
      IbRail& r = rails_[size_t(dev->rails[i])];
      telemetry::RailIdentity id{};
      std::snprintf(id.name, sizeof(id.name), "%s", r.name.c_str());
      std::snprintf(id.transport, sizeof(id.transport), "ib");
      id.device = d;
      id.railIndex = int(i);
      id.speedMbps = r.speedMbps;
      r.telemetryId = registry.registerRail(id);
    }
    AP_INFO(kFlags, "net device %d: %s (%zu RDMA rail%s, %d Mbit/s)", d, dev->name.c_str(),
            dev->rails.size(), dev->rails.size() == 1 ? "" : "s", dev->speedMbps);
  }
  for (size_t i = 0; i < rails_.size(); ++i) {
    const IbRail& r = rails_[i];
    events_.addRail(int(i), r.device, r.port, r.name, true);
    AP_INFO(kFlags, "RDMA rail %zu: %s %s %s gid[%d] %s lid %u mtu %d speed %d Mbit/s%s", i,
            r.name.c_str(), linkLayerName(r.linkLayer), devices_[size_t(r.device)]->name.c_str(),
            r.gidIndex, gidText(r.gid).c_str(), unsigned(r.lid), 128 << int(r.activeMtu),
            r.speedMbps, r.standby ? " (standby)" : "");
  }
  if (rails_.empty()) AP_INFO(kFlags, "ibverbs transport: no usable RDMA port");
}

void PortWatch::start(int global, const core::FaultInjector* faults) {
  global_ = global;
  faults_ = faults;
  catchUp();
  reset_ = faults_ != nullptr ? faults_->qpResetSequence(global) : 0;
}

bool PortWatch::resetSinceLook() {
  uint32_t now = faults_ != nullptr ? faults_->qpResetSequence(global_) : 0;
  bool news = now != reset_;
  reset_ = now;
  return news;
}

bool PortWatch::downSinceLook() {
  uint32_t now = IbRails::instance().events().downEvents(global_);
  bool news = now != down_;
  down_ = now;
  return news;
}

bool PortWatch::upSinceLook() {
  uint32_t now = IbRails::instance().events().upEvents(global_);
  bool news = now != up_;
  up_ = now;
  return news;
}

void PortWatch::catchUp() {
  down_ = IbRails::instance().events().downEvents(global_);
  up_ = IbRails::instance().events().upEvents(global_);
}

}  // namespace autopilot::net::ib

// The TCP transport's rails and devices, discovered once per load of the library.
//
// Rails are interfaces chosen by NCCL_AUTOPILOT_IFNAME (NCCL_SOCKET_IFNAME syntax), or, when it
// is unset, every interface that is up except loopback, docker and libvirt bridges (docker
// ones, then loopback, only when nothing else exists), one address each (IPv4 preferred,
// global IPv6 otherwise). NCCL_AUTOPILOT_NET_ADDRS instead lists local addresses, one rail
// each; several addresses on one interface (127.0.0.x on lo) give several rails on one host
// without privileges. Rails are grouped into NCCL devices by NCCL_AUTOPILOT_NET_GROUPS
// (default: all rails in one device); NCCL_AUTOPILOT_NET_STANDBY names rails with weight 0.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "net_plugin/core/device_table.h"
#include "net_plugin/transport/tcp/socket.h"

namespace autopilot::net::tcp {

struct TcpRail {
  std::string name;  // unique: the interface, or "interface/address" for explicit addresses
  std::string ifname;
  SockAddr address;   // local address, port 0
  int speedMbps = 0;  // from sysfs, 0 when unknown
  std::string pciPath;
  bool standby = false;
  int telemetryId = -1;
};

class TcpRails {
 public:
  static TcpRails& instance();
  // Discovers on first call (thread-safe); later calls return at once.
  void ensureDiscovered();
  // Valid after ensureDiscovered(); never changes afterwards.
  const std::vector<TcpRail>& rails() const { return rails_; }
  core::DeviceTable& devices() { return devices_; }
  // Open-file limit based: connections this process can hold per device.
  int maxComms(int railsPerDevice) const;

 private:
  void discover();
  std::once_flag once_;
  std::vector<TcpRail> rails_;
  core::DeviceTable devices_;
};

// The local interface of the process's rail `globalIndex` (empty when there is none).
const std::string& interfaceOf(int globalIndex);

}  // namespace autopilot::net::tcp

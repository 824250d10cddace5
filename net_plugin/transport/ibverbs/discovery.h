// The verbs transport's rails and devices, discovered once per load of the library.
//
// A rail is one active port of an RDMA device (InfiniBand or RoCE), named "device:port"
// (mlx5_0:1, rxe0:1). Rails are the ports chosen by NCCL_AUTOPILOT_IB_HCA (NCCL_IB_HCA
// syntax: device-name prefixes, ^ to exclude, = for exact names, an optional :port per entry)
// or every active port, in the order libibverbs lists the devices. They are grouped into NCCL
// devices and put on standby exactly as the TCP transport's rails are (NCCL_AUTOPILOT_NET_GROUPS,
// NCCL_AUTOPILOT_NET_STANDBY). RoCE ports use the GID chosen by NCCL_AUTOPILOT_IB_GID_INDEX or,
// by default, the RoCE v2 entry with an IPv4-mapped address (port_attributes.h); InfiniBand ports
// are addressed by LID.
//
// The device contexts and one protection domain per device are opened here and live as long as
// the library: every comm's QPs and memory registrations of a device share them. Without
// libibverbs or without any usable port the transport has no rails, and net_api.cc uses the TCP
// transport instead.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net_plugin/core/device_table.h"
#include "net_plugin/core/fault_injector.h"
#include "net_plugin/transport/ibverbs/port_events.h"
#include "net_plugin/transport/ibverbs/verbs_objects.h"

namespace autopilot::net::ib {

struct IbDevice {
  std::string name;
  uint64_t guid = 0;  // host byte order
  int maxQp = 0;
  int maxQpWr = 0;
  int maxCqe = 0;
  DeviceContext context;  // declared before pd: released after it
  ProtectionDomain pd;
};

struct IbRail {
  std::string name;  // "device:port"
  int device = -1;   // index into IbRails::device()
  uint8_t port = 1;
  uint8_t linkLayer = IBV_LINK_LAYER_INFINIBAND;
  int gidIndex = 0;
  ibv_gid gid{};
  uint16_t lid = 0;
  ibv_mtu activeMtu = IBV_MTU_1024;
  uint64_t maxMessageBytes = 1u << 30;  // the port's largest RDMA message
  int speedMbps = 0;
  std::string pciPath;
  bool standby = false;
  int telemetryId = -1;
  bool roce() const { return linkLayer == IBV_LINK_LAYER_ETHERNET; }
};

class IbRails {
 public:
  static constexpr int kMaxRails = PortEvents::kMaxRails;

  static IbRails& instance();
  // Discovers on first call (thread-safe); later calls return at once.
  void ensureDiscovered();
  const VerbsLibrary* lib() const { return lib_; }
  // Valid after ensureDiscovered(); never change afterwards.
  const std::vector<IbRail>& rails() const { return rails_; }
  IbDevice& device(int index) { return *devices_[size_t(index)]; }
  core::DeviceTable& devices() { return table_; }
  PortEvents& events() { return events_; }
  // Connections (QPs per rail) one NCCL device can hold.
  int maxComms(const core::NetDevice& dev) const;

 private:
  void discover();
  std::once_flag once_;
  const VerbsLibrary* lib_ = nullptr;
  // Declared before the rails that refer to them and released last; the QPs and MRs of comms
  // still open at unload hold references that make their release fail (counted, harmless).
  std::vector<std::unique_ptr<IbDevice>> devices_;
  std::vector<IbRail> rails_;
  core::DeviceTable table_;
  PortEvents events_;
};

// One comm's view of the process-wide events of one rail's port (down, up) and of simulated
// queue-pair resets: each event is news to every comm once. Both ends of a connection watch
// their rails with it.
class PortWatch {
 public:
  // Events before now are not news. `faults`: where simulated resets come from (none if null).
  void start(int global, const core::FaultInjector* faults);
  // True once per event since the last look.
  bool resetSinceLook();
  bool downSinceLook();
  bool upSinceLook();
  // The port's down and up events so far are old news (the rail was just rebuilt).
  void catchUp();

 private:
  int global_ = -1;
  const core::FaultInjector* faults_ = nullptr;
  uint32_t down_ = 0, up_ = 0, reset_ = 0;
};

}  // namespace autopilot::net::ib

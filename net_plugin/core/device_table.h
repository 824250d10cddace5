// DeviceTable: the NCCL devices a transport offers, each a group of rails. Transport-neutral:
// the transport discovers its rails (interfaces, HCA ports) and a grouping, and this table
// numbers the devices, keeps their names unique and stable, and adds the virtual devices NCCL
// asks for with makeVDevice (numbered after the physical ones, as NCCL expects).
//
// Thread-safe (NCCL's init threads of several communicators may call in); device entries are
// never moved or freed while the library is loaded, so the name pointers handed to NCCL stay
// valid.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace autopilot::net::core {

struct RailDescriptor {
  std::string name;     // unique among the transport's rails
  int speedMbps = 0;    // nominal; 0 when unknown
  std::string pciPath;  // empty when not a PCI device
};

struct NetDevice {
  std::string name;
  std::vector<int> rails;  // indices into the rail list
  int speedMbps = 0;       // sum over the rails
  uint64_t guid = 0;
  std::string pciPath;  // the first rail's, if any
  bool isVirtual = false;
  std::vector<int> children;  // virtual devices: the physical devices merged
};

class DeviceTable {
 public:
  static constexpr int kMaxRailsPerDevice = 16;
  static constexpr int kMaxDevices = 64;
  // NCCL 2.30's vProps (net v12) lists up to 8 devices; older versions' 4 are checked by their
  // adapters.
  static constexpr int kMaxDevicesPerVirtual = 8;

  // Replaces the table: `groups` lists each physical device's rails.
  void build(std::vector<RailDescriptor> rails, const std::vector<std::vector<int>>& groups,
             int defaultSpeedMbps);
  int count() const;
  int physicalCount() const;
  // Stable pointer, NULL for an invalid index.
  const NetDevice* device(int dev) const;
  const std::vector<RailDescriptor>& rails() const { return rails_; }  // fixed after build()
  // Merges physical devices into a new virtual one; returns its index, or -1 with a reason.
  int makeVirtual(const int* devs, int n, std::string* error);

 private:
  NetDevice makeDevice(const std::vector<int>& rails, const std::string& name) const;
  std::string uniqueName(const std::string& base) const;

  mutable std::mutex mutex_;
  std::vector<RailDescriptor> rails_;
  std::deque<NetDevice> devices_;
  int physical_ = 0;
  int defaultSpeedMbps_ = 10000;
};

}  // namespace autopilot::net::core

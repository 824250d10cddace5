#include "net_plugin/core/device_table.h"

#include <algorithm>

namespace autopilot::net::core {

namespace {
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}
}  // namespace

NetDevice DeviceTable::makeDevice(const std::vector<int>& rails, const std::string& name) const {
  NetDevice d;
  d.name = name;
  d.rails = rails;
  for (int r : rails) {
    const RailDescriptor& rd = rails_[size_t(r)];
    d.speedMbps += rd.speedMbps > 0 ? rd.speedMbps : defaultSpeedMbps_;
    if (d.pciPath.empty()) d.pciPath = rd.pciPath;
  }
  d.guid = fnv1a(name);
  return d;
}

std::string DeviceTable::uniqueName(const std::string& base) const {
  auto taken = [&](const std::string& n) {
    return std::any_of(devices_.begin(), devices_.end(),
                       [&](const NetDevice& d) { return d.name == n; });
  };
  if (!taken(base)) return base;
  for (int k = 2;; ++k) {
    std::string candidate = base + "#" + std::to_string(k);
    if (!taken(candidate)) return candidate;
  }
}

void DeviceTable::build(std::vector<RailDescriptor> rails,
                        const std::vector<std::vector<int>>& groups, int defaultSpeedMbps) {
  std::lock_guard<std::mutex> lock(mutex_);
  rails_ = std::move(rails);
  devices_.clear();
  defaultSpeedMbps_ = defaultSpeedMbps;
  for (const auto& group : groups) {
    if (int(devices_.size()) >= kMaxDevices) break;
    std::vector<int> members;
    std::string name;
    for (int r : group) {
      if (r < 0 || r >= int(rails_.size()) || int(members.size()) >= kMaxRailsPerDevice) continue;
      members.push_back(r);
      name += (name.empty() ? "" : "+") + rails_[size_t(r)].name;
    }
    if (members.empty()) continue;
    devices_.push_back(makeDevice(members, uniqueName(name)));
  }
  physical_ = int(devices_.size());
}

int DeviceTable::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return int(devices_.size());
}

int DeviceTable::physicalCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return physical_;
}

const NetDevice* DeviceTable::device(int dev) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (dev < 0 || dev >= int(devices_.size())) return nullptr;
  return &devices_[size_t(dev)];
}

int DeviceTable::makeVirtual(const int* devs, int n, std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (n < 1 || n > kMaxDevicesPerVirtual) {
    if (error) {
      *error = "a virtual device merges 1 to " + std::to_string(kMaxDevicesPerVirtual) +
               " devices, not " + std::to_string(n);
    }
    return -1;
  }
  if (int(devices_.size()) >= kMaxDevices) {
    if (error) *error = "too many devices";
    return -1;
  }
  std::vector<int> rails;
  std::vector<int> children;
  std::string name;
  for (int i = 0; i < n; ++i) {
    int d = devs[i];
    if (d < 0 || d >= physical_) {
      if (error) *error = "device " + std::to_string(d) + " is not a physical device";
      return -1;
    }
    if (std::find(children.begin(), children.end(), d) != children.end()) {
      if (error) *error = "device " + std::to_string(d) + " listed twice";
      return -1;
    }
    children.push_back(d);
    const NetDevice& child = devices_[size_t(d)];
    for (int r : child.rails) {
      if (std::find(rails.begin(), rails.end(), r) == rails.end()) rails.push_back(r);
    }
    name += (name.empty() ? "" : "+") + child.name;
  }
  if (int(rails.size()) > kMaxRailsPerDevice) {
    if (error) *error = "more than " + std::to_string(kMaxRailsPerDevice) + " rails";
    return -1;
  }
  NetDevice v = makeDevice(rails, uniqueName(name));
  v.isVirtual = true;
  v.children = std::move(children);
  devices_.push_back(std::move(v));
  return int(devices_.size()) - 1;
}

}  // namespace autopilot::net::core

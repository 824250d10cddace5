// A mini-cluster on one machine for the demo: one network namespace per host, one Linux bridge
// per rail in a "switch" namespace, and one veth pair per (host, rail) — so every host has one
// NIC per rail, the way a multi-rail cluster is cabled. Faults are real: a rail is rate-limited
// with tc tbf on every host's NIC of that rail, or taken down with `ip link set down`.
//
// Addresses are 127.32.<rail>.<host+1>/24 (route_localnet), so nothing can ever be mistaken for
// traffic to another machine. Requires root; available() says why not otherwise. Everything
// created is deleted by the destructor (and by cleanupStale() after a crash).
#pragma once

#include <string>
#include <vector>

namespace autopilot::demo {

class VethCluster {
 public:
  struct Config {
    int hosts = 4;
    int rails = 3;
    int rateMbit = 250;  // every rail's line rate (tbf); 0 = unshaped
  };

  static bool available(std::string* why);
  // Deletes namespaces left behind by a demo process that no longer exists.
  static void cleanupStale();

  explicit VethCluster(const Config& config);  // throws std::runtime_error
  ~VethCluster();
  VethCluster(const VethCluster&) = delete;
  VethCluster& operator=(const VethCluster&) = delete;

  const Config& config() const { return config_; }
  const std::string& hostNamespace(int host) const { return hostNs_[size_t(host)]; }
  static std::string railInterface(int rail) { return "r" + std::to_string(rail); }
  static std::string railAddress(int host, int rail);
  // Comma-separated exact interface list for NCCL_AUTOPILOT_IFNAME ("=r0,r1,...").
  std::string ifnameList() const;

  // Moves the calling process into `host`'s namespace (for a freshly forked child).
  void enterHost(int host) const;

  void setRailRate(int rail, int mbit);  // 0 restores the configured line rate
  void setRailUp(int rail, bool up);

 private:
  void shape(int host, int rail, int mbit);
  Config config_;
  std::string prefix_;
  std::string switchNs_;
  std::vector<std::string> hostNs_;
};

// Runs a shell command; throws std::runtime_error with its output when it fails.
void runChecked(const std::string& command);

}  // namespace autopilot::demo

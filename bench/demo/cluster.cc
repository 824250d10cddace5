#include "bench/demo/cluster.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "bench/net/netns.h"

namespace autopilot::demo {

void runChecked(const std::string& command) {
  std::string full = command + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run: " + command);
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int rc = pclose(p);
  if (rc != 0) throw std::runtime_error("'" + command + "' failed: " + out);
}

namespace {
void runQuiet(const std::string& command) {
  std::string full = command + " >/dev/null 2>&1";
  if (std::system(full.c_str()) != 0) {
    // Best effort (cleanup paths): nothing more to do.
  }
}
}  // namespace

bool VethCluster::available(std::string* why) {
  if (geteuid() != 0) {
    *why = "not root";
    return false;
  }
  if (std::system("ip netns list >/dev/null 2>&1") != 0) {
    *why = "'ip netns' does not work here (iproute2 missing?)";
    return false;
  }
  if (std::system("tc -V >/dev/null 2>&1") != 0) {
    *why = "tc (iproute2) missing";
    return false;
  }
  return true;
}

void VethCluster::cleanupStale() {
  FILE* p = popen("ip netns list 2>/dev/null", "r");
  if (p == nullptr) return;
  char line[256];
  std::vector<std::string> stale;
  while (fgets(line, sizeof(line), p)) {
    int pid = 0;
    char rest[64];
    // Our namespaces are named apd<pid>h<n> / apd<pid>sw.
    if (std::sscanf(line, "apd%d%63s", &pid, rest) == 2 && pid > 0 && kill(pid, 0) != 0) {
      std::string name(line);
      name = name.substr(0, name.find_first_of(" \n"));
      stale.push_back(name);
    }
  }
  pclose(p);
  for (const auto& ns : stale) runQuiet("ip netns del " + ns);
}

std::string VethCluster::railAddress(int host, int rail) {
  return "127.32." + std::to_string(rail) + "." + std::to_string(host + 1);
}

VethCluster::VethCluster(const Config& config) : config_(config) {
  prefix_ = "apd" + std::to_string(getpid());
  switchNs_ = prefix_ + "sw";
  for (int h = 0; h < config_.hosts; ++h) hostNs_.push_back(prefix_ + "h" + std::to_string(h));
  try {
    runChecked("ip netns add " + switchNs_);
    for (const auto& ns : hostNs_) {
      runChecked("ip netns add " + ns);
      runChecked("ip -n " + ns + " link set lo up");
      runChecked("ip netns exec " + ns + " sysctl -qw net.ipv4.conf.all.route_localnet=1");
    }
    for (int r = 0; r < config_.rails; ++r) {
      std::string br = "br" + std::to_string(r);
      runChecked("ip -n " + switchNs_ + " link add " + br + " type bridge");
      runChecked("ip -n " + switchNs_ + " link set " + br + " up");
      for (int h = 0; h < config_.hosts; ++h) {
        // Created in the root namespace under unique names, then moved and renamed.
        std::string a = "a" + std::to_string(getpid() % 1000000) + "h" + std::to_string(h) + "r" +
                        std::to_string(r);
        std::string b = "b" + a.substr(1);
        std::string host = hostNs_[size_t(h)], nic = railInterface(r);
        runChecked("ip link add " + a + " type veth peer name " + b);
        runChecked("ip link set " + a + " netns " + host);
        runChecked("ip link set " + b + " netns " + switchNs_);
        runChecked("ip -n " + host + " link set " + a + " name " + nic);
        runChecked("ip -n " + switchNs_ + " link set " + b + " master " + br + " up");
        runChecked("ip netns exec " + host + " sysctl -qw net.ipv4.conf." + nic +
                   ".route_localnet=1");
        runChecked("ip -n " + host + " addr add " + railAddress(h, r) + "/24 dev " + nic);
        runChecked("ip -n " + host + " link set " + nic + " up");
        // With the link down its /24 route goes away and 127/8 would send the rail's traffic to
        // loopback, which answers with resets; a dead link must be silent instead.
        runChecked("ip -n " + host + " route add blackhole 127.32." + std::to_string(r) +
                   ".0/24 metric 4000");
        shape(h, r, config_.rateMbit);
      }
    }
  } catch (...) {
    for (const auto& ns : hostNs_) runQuiet("ip netns del " + ns);
    runQuiet("ip netns del " + switchNs_);
    throw;
  }
}

VethCluster::~VethCluster() {
  for (const auto& ns : hostNs_) runQuiet("ip netns del " + ns);
  runQuiet("ip netns del " + switchNs_);
}

std::string VethCluster::ifnameList() const {
  std::string out = "=";
  for (int r = 0; r < config_.rails; ++r) out += (r ? "," : "") + railInterface(r);
  return out;
}

void VethCluster::enterHost(int host) const {
  std::string path = "/var/run/netns/" + hostNs_[size_t(host)];
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    throw std::runtime_error("cannot enter network namespace " + hostNs_[size_t(host)]);
  }
  close(fd);
}

void VethCluster::shape(int host, int rail, int mbit) {
  std::string dev = " dev " + railInterface(rail);
  std::string ns = "ip netns exec " + hostNs_[size_t(host)] + " ";
  if (mbit <= 0) {
    runQuiet(ns + "tc qdisc del" + dev + " root");
    return;
  }
  // A rate change is applied in place ('change', not 'replace'): a link that slows down does not
  // drop what it already queued. tbfArguments sizes the bucket so that it also sends on what it
  // queued (a smaller one black-holed the rail at the change).
  std::string params = " root tbf " + bench::tbfArguments(mbit, 400);
  if (std::system((ns + "tc qdisc change" + dev + params + " >/dev/null 2>&1").c_str()) != 0) {
    runChecked(ns + "tc qdisc replace" + dev + params);
  }
}

void VethCluster::setRailRate(int rail, int mbit) {
  for (int h = 0; h < config_.hosts; ++h) shape(h, rail, mbit > 0 ? mbit : config_.rateMbit);
}

void VethCluster::setRailUp(int rail, bool up) {
  for (int h = 0; h < config_.hosts; ++h) {
    runChecked("ip -n " + hostNs_[size_t(h)] + " link set " + railInterface(rail) +
               (up ? " up" : " down"));
  }
}

}  // namespace autopilot::demo

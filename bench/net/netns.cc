#include "bench/net/netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace autopilot::bench {

namespace {
constexpr const char* kPrefix = "apn";

int shell(const std::string& script) {
  std::string cmd = "/bin/sh -c '" + script + "' >/dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}
}  // namespace

bool NetnsTestbed::available(std::string* why) {
  if (geteuid() != 0) {
    *why = "not root: network namespaces and veth rails need root (CI runs as root)";
    return false;
  }
  if (shell("command -v ip && command -v tc") != 0) {
    *why = "the ip and tc commands (iproute2) are missing";
    return false;
  }
  return true;
}

void NetnsTestbed::cleanupStale() {
  DIR* d = opendir("/var/run/netns");
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(kPrefix, 0) != 0 || name.size() < 5) continue;
    char side = name.back();
    if (side != 'A' && side != 'B') continue;
    std::string digits = name.substr(3, name.size() - 4);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = pid_t(std::atol(digits.c_str()));
    if (pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)) continue;  // still alive
    shell("ip netns del " + name);
  }
  closedir(d);
}

NetnsTestbed::NetnsTestbed(int rails) : rails_(rails), tag_(kPrefix + std::to_string(getpid())) {
  cleanupStale();
  std::string a = ns('A'), b = ns('B');
  std::string s = "set -e; ip netns add " + a + "; ip netns add " + b + ";";
  for (int i = 0; i < rails; ++i) {
    std::string ia = ifname('A', i), ib = ifname('B', i);
    s += "ip link add " + ia + " type veth peer name " + ib + ";";
    s += "ip link set " + ia + " netns " + a + "; ip link set " + ib + " netns " + b + ";";
  }
  for (const std::string& n : {a, b}) {
    // 127/8 on a non-loopback interface needs route_localnet (docs/testbed.md §2).
    s += "ip netns exec " + n + " sysctl -qw net.ipv4.conf.all.route_localnet=1;";
    s += "ip -n " + n + " link set lo up;";
  }
  for (int i = 0; i < rails; ++i) {
    for (char side : {'A', 'B'}) {
      std::string n = ns(side), dev = ifname(side, i);
      s += "ip netns exec " + n + " sysctl -qw net.ipv4.conf." + dev + ".route_localnet=1;";
      s += "ip -n " + n + " addr add " + address(side, i) + "/24 dev " + dev + ";";
      s += "ip -n " + n + " link set " + dev + " up;";
      // With the link down its /24 route goes away and 127/8 would route the rail's traffic
      // to loopback, which answers with resets: a dead link must be silent instead.
      std::string net = "127.31." + std::to_string(i) + ".0/24";
      s += "ip -n " + n + " route add blackhole " + net + " metric 4000;";
    }
  }
  if (!run(s)) {
    error_ = "could not create the namespaces and veth rails";
    return;
  }
  ok_ = true;
}

NetnsTestbed::~NetnsTestbed() {
  // Deleting a namespace destroys the veth ends inside it (and with them the pairs).
  shell("ip netns del " + ns('A') + "; ip netns del " + ns('B'));
}

bool NetnsTestbed::run(const std::string& script) const { return shell(script) == 0; }

std::string NetnsTestbed::ns(char side) const { return tag_ + side; }

std::string NetnsTestbed::ifnamePrefix(char side) const {
  return tag_ + char(side == 'A' ? 'a' : 'b');
}

std::string NetnsTestbed::ifname(char side, int rail) const {
  return ifnamePrefix(side) + std::to_string(rail);
}

std::string NetnsTestbed::address(char side, int rail) const {
  return "127.31." + std::to_string(rail) + (side == 'A' ? ".1" : ".2");
}

bool NetnsTestbed::enter(char side) const {
  std::string path = "/var/run/netns/" + ns(side);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

int NetnsTestbed::exec(char side, const std::string& command) const {
  return shell("ip netns exec " + ns(side) + " " + command);
}

bool NetnsTestbed::linkDown(int rail) const {
  return run("ip -n " + ns('A') + " link set " + ifname('A', rail) + " down");
}

bool NetnsTestbed::linkUp(int rail) const {
  // Link-down flushes nothing we configured by hand except routes of the /24, which come back
  // with the link; re-adding the address is not needed.
  return run("ip -n " + ns('A') + " link set " + ifname('A', rail) + " up");
}

std::string tbfArguments(double mbit, int latencyMs) {
  long rateBytes = long(mbit * 1e6 / 8);
  long burst = std::max(128L << 10, rateBytes / 250);
  return "rate " + std::to_string(long(mbit)) + "mbit burst " + std::to_string(burst) +
         " latency " + std::to_string(latencyMs) + "ms";
}

bool NetnsTestbed::shape(int rail, double mbit) const {
  // A queue of up to 50 ms. `replace` on a rail that is already shaped changes the rate in
  // place, keeping what is queued: tbfArguments' bucket lets every queued packet leave.
  return run("tc -n " + ns('A') + " qdisc replace dev " + ifname('A', rail) + " root tbf " +
             tbfArguments(mbit, 50));
}

bool NetnsTestbed::unshape(int rail) const {
  return run("tc -n " + ns('A') + " qdisc del dev " + ifname('A', rail) + " root");
}

}  // namespace autopilot::bench

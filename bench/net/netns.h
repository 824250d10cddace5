// NetnsTestbed: two network namespaces ("hosts" A and B) joined by N veth pairs ("rails"), as
// in docs/testbed.md §2, for real link faults (ip link down/up) and rate limits
// (tc tbf). Needs root. Names carry this process's pid (apn<pid>A, apn<pid>a0, ...) so that
// concurrent runs never collide; only 127.31.<rail>.1 (A) and 127.31.<rail>.2 (B) addresses are
// used, inside the namespaces. Everything is deleted by the destructor, and namespaces left
// by a crashed run (their pid is gone) are removed before creating new ones.
#pragma once

#include <string>

namespace autopilot::bench {

// The arguments of a `tc qdisc ... root tbf` for a rail at `mbit` Mbit/s whose queue holds up
// to `latencyMs` of data. The bucket (burst) covers about 4 ms at that rate, and never less than
// the largest packet the queue may hold: tbf measures a packet against the bucket only when it
// queues it, so after a rate change in place (`tc qdisc change`) a queued packet larger than the
// new bucket never gathers the tokens to leave, and the rail carries nothing until the rate is
// raised again. veth hands tbf GSO packets of up to 64 KiB plus headers; a rail changed from 250
// to 25 Mbit/s with a 32 KiB bucket stalled for seconds (its TCP timer backed off to 1.7 s),
// and was rightly failed as dead.
std::string tbfArguments(double mbit, int latencyMs);

class NetnsTestbed {
 public:
  // Whether namespace tests can run here; *why explains when not.
  static bool available(std::string* why);

  explicit NetnsTestbed(int rails);
  ~NetnsTestbed();
  NetnsTestbed(const NetnsTestbed&) = delete;
  NetnsTestbed& operator=(const NetnsTestbed&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  int rails() const { return rails_; }

  std::string ns(char side) const;                 // 'A' or 'B'
  std::string ifname(char side, int rail) const;   // apn<pid>a<rail> / apn<pid>b<rail>
  std::string ifnamePrefix(char side) const;       // for NCCL_AUTOPILOT_IFNAME
  std::string address(char side, int rail) const;  // 127.31.<rail>.1 / .2

  // Moves the calling process (a forked child) into a namespace.
  bool enter(char side) const;
  // Link faults and rate limits, applied on side A's end of the rail (the veth pair as a whole
  // goes down with it; tbf shapes A's egress, i.e. traffic from A to B).
  bool linkDown(int rail) const;
  bool linkUp(int rail) const;
  bool shape(int rail, double mbit) const;
  bool unshape(int rail) const;
  // Runs a shell command inside a namespace; returns its exit status.
  int exec(char side, const std::string& command) const;

  static void cleanupStale();

 private:
  bool run(const std::string& script) const;
  int rails_;
  std::string tag_;  // apn<pid>
  bool ok_ = false;
  std::string error_;
};

}  // namespace autopilot::bench

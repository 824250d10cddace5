#include "net_plugin/core/fault_injector.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/log.h"
#include "common/params.h"
#include "net_plugin/core/fault_plan.h"

namespace autopilot::net::core {

namespace {

params::StringParam gFaultFile(
    "NCCL_AUTOPILOT_FAULT_FILE", "",
    "Simulated rail faults for tests and demos without root: a file re-read while running, "
    "with lines 'rail <name|index> down|deaf|reject|up|rate <Mbit/s>|qp-reset <n>'. Empty: no "
    "simulated faults.");

constexpr unsigned long kFlags = abi::subsys::kNet;
constexpr size_t kMaxFileBytes = 64 << 10;

}  // namespace

FaultInjector& FaultInjector::instance() {
  static FaultInjector injector;
  return injector;
}

void FaultInjector::setRails(const std::vector<std::string>& names) {
  configure(names, gFaultFile.get());
}

void FaultInjector::configure(const std::vector<std::string>& names, const std::string& path) {
  std::lock_guard<std::mutex> lock(reloadMutex_);
  names_ = names;
  path_ = path;
  haveStamp_ = false;
  for (int i = 0; i < kMaxRails; ++i) {
    down_[i].store(false, std::memory_order_relaxed);
    deaf_[i].store(false, std::memory_order_relaxed);
    reject_[i].store(false, std::memory_order_relaxed);
    rateBytesPerSec_[i].store(0, std::memory_order_relaxed);
    qpReset_[i].store(0, std::memory_order_relaxed);
    pacers_[i].reset();
  }
  nextCheckNs_.store(0, std::memory_order_relaxed);
  enabled_.store(!path.empty(), std::memory_order_release);
  if (!path.empty()) {
    AP_WARN(kFlags, "SIMULATED faults enabled: rail faults are read from %s (not real link faults)",
            path.c_str());
  }
}

void FaultInjector::refresh(uint64_t nowNs) {
  if (!enabled()) return;
  uint64_t due = nextCheckNs_.load(std::memory_order_relaxed);
  if (nowNs < due) return;
  if (!nextCheckNs_.compare_exchange_strong(due, nowNs + kRefreshNs, std::memory_order_relaxed)) {
    return;  // another thread took this turn
  }
  std::unique_lock<std::mutex> lock(reloadMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  reload();
}

void FaultInjector::reload() {
  struct stat st;
  bool exists = ::stat(path_.c_str(), &st) == 0;
  uint64_t stamp[4] = {0, 0, 0, 0};
  if (exists) {
    stamp[0] = uint64_t(st.st_dev);
    stamp[1] = uint64_t(st.st_ino);
    stamp[2] = uint64_t(st.st_size);
    stamp[3] = uint64_t(st.st_mtim.tv_sec) * 1000000000ull + uint64_t(st.st_mtim.tv_nsec);
  }
  if (haveStamp_ && std::equal(stamp, stamp + 4, stamp_)) return;
  haveStamp_ = true;
  std::copy(stamp, stamp + 4, stamp_);

  std::string text;
  if (exists) {
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      char buf[4096];
      ssize_t n;
      while (text.size() < kMaxFileBytes && (n = ::read(fd, buf, sizeof(buf))) > 0) {
        text.append(buf, size_t(n));
      }
      ::close(fd);
    }
  }
  FaultPlan plan = parseFaultPlan(text.data(), text.size());
  for (const std::string& e : plan.errors) {
    AP_WARN(kFlags, "SIMULATED fault file %s: %s (line ignored)", path_.c_str(), e.c_str());
  }
  bool down[kMaxRails] = {}, deaf[kMaxRails] = {}, reject[kMaxRails] = {};
  uint64_t rate[kMaxRails] = {};
  uint32_t reset[kMaxRails] = {};
  for (const FaultRule& rule : plan.rules) {
    int idx = rule.index;
    if (idx < 0) {
      for (size_t i = 0; i < names_.size(); ++i) {
        if (names_[i] == rule.rail) idx = int(i);
      }
    }
    if (idx < 0 || idx >= int(names_.size()) || idx >= kMaxRails) {
      AP_WARN(kFlags, "SIMULATED fault file %s: line %d: no rail '%s' in this process (ignored)",
              path_.c_str(), rule.line, rule.rail.c_str());
      continue;
    }
    switch (rule.action) {
      case FaultRule::Action::kDown:
        down[idx] = true;
        break;
      case FaultRule::Action::kUp:
        down[idx] = deaf[idx] = reject[idx] = false;
        break;
      case FaultRule::Action::kDeaf:
        deaf[idx] = true;
        break;
      case FaultRule::Action::kReject:
        reject[idx] = true;
        break;
      case FaultRule::Action::kRate:
        rate[idx] = uint64_t(rule.rateMbps * 1e6 / 8);
        break;
      case FaultRule::Action::kQpReset:
        reset[idx] = uint32_t(rule.resetSequence);
        break;
    }
  }
  for (int i = 0; i < kMaxRails && i < int(names_.size()); ++i) {
    bool wasDown = down_[i].exchange(down[i], std::memory_order_relaxed);
    if (deaf_[i].exchange(deaf[i], std::memory_order_relaxed) != deaf[i]) {
      AP_WARN(
          kFlags, "SIMULATED fault: rail %d (%s) %s", i, names_[i].c_str(),
          deaf[i] ? "DEAF: nothing it delivers is read here (one direction dead)" : "hears again");
    }
    if (reject_[i].exchange(reject[i], std::memory_order_relaxed) != reject[i]) {
      AP_WARN(kFlags, "SIMULATED fault: rail %d (%s) %s", i, names_[i].c_str(),
              reject[i] ? "REJECT: its data writes name a remote key the receiver never "
                          "registered (the receiver's NIC rejects them)"
                        : "writes with the right keys again");
    }
    uint64_t wasRate = rateBytesPerSec_[i].exchange(rate[i], std::memory_order_relaxed);
    if (qpReset_[i].exchange(reset[i], std::memory_order_relaxed) != reset[i] && reset[i] != 0) {
      AP_WARN(kFlags, "SIMULATED fault: rail %d (%s) queue pair reset #%u (the peer is not told)",
              i, names_[i].c_str(), reset[i]);
    }
    if (wasDown != down[i]) {
      AP_WARN(kFlags, "SIMULATED fault: rail %d (%s) %s", i, names_[i].c_str(),
              down[i] ? "DOWN: it stops moving bytes, as a dead link would" : "up again");
    }
    if (wasRate != rate[i]) {
      if (rate[i] == 0) {
        AP_WARN(kFlags, "SIMULATED fault: rail %d (%s) rate limit removed", i, names_[i].c_str());
      } else {
        AP_WARN(kFlags, "SIMULATED fault: rail %d (%s) paced to %.1f Mbit/s", i, names_[i].c_str(),
                double(rate[i]) * 8 / 1e6);
      }
    }
  }
}

}  // namespace autopilot::net::core

// FaultInjector: applies the simulated-fault plan (fault_plan.h) named by
// NCCL_AUTOPILOT_FAULT_FILE to this process's rails. A process that loads the library with
// RTLD_LOCAL (the demo, NCCL itself) cannot call into it, so the plan is a file that anyone can
// rewrite; the data path calls refresh(), which looks at the file's identity and mtime at most
// every kRefreshNs and re-reads it only when it changed. Every change is logged as SIMULATED.
//
// Thread-safe: refresh() may run on several progress threads at once (one reloads, the others
// return at once, never blocking); down()/rateBytesPerSec() are relaxed atomic loads.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "net_plugin/core/pacer.h"

namespace autopilot::net::core {

class FaultInjector {
 public:
  static constexpr int kMaxRails = 16;
  static constexpr uint64_t kRefreshNs = 75'000'000;

  static FaultInjector& instance();

  // The rails of this process in index order (the transport net_api.cc chose, at device
  // discovery). Reads the parameter.
  void setRails(const std::vector<std::string>& names);
  // Same, with an explicit plan file (tests); "" disables injection.
  void configure(const std::vector<std::string>& names, const std::string& path);

  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  void refresh(uint64_t nowNs);
  bool down(int rail) const {
    return rail >= 0 && rail < kMaxRails && down_[rail].load(std::memory_order_relaxed);
  }
  // Nothing arriving on the rail is read (`deaf`).
  bool deaf(int rail) const {
    return rail >= 0 && rail < kMaxRails && deaf_[rail].load(std::memory_order_relaxed);
  }
  // Data writes on the rail carry a remote key the receiver never registered (`reject`).
  bool reject(int rail) const {
    return rail >= 0 && rail < kMaxRails && reject_[rail].load(std::memory_order_relaxed);
  }
  // 0: unlimited.
  double rateBytesPerSec(int rail) const {
    return rail >= 0 && rail < kMaxRails
               ? double(rateBytesPerSec_[rail].load(std::memory_order_relaxed))
               : 0.0;
  }
  Pacer* pacer(int rail) { return rail >= 0 && rail < kMaxRails ? &pacers_[rail] : nullptr; }
  // The latest `qp-reset <n>` value for the rail (0: none); a transport that supports it
  // destroys its QP on the rail whenever this differs from the value it last acted on.
  uint32_t qpResetSequence(int rail) const {
    return rail >= 0 && rail < kMaxRails ? qpReset_[rail].load(std::memory_order_relaxed) : 0;
  }

 private:
  void reload();
  std::mutex reloadMutex_;  // try_lock only on the data path
  std::string path_;
  std::vector<std::string> names_;
  std::atomic<bool> enabled_{false};
  std::atomic<uint64_t> nextCheckNs_{0};
  bool haveStamp_ = false;
  uint64_t stamp_[4] = {};  // dev, ino, size, mtime of the last file read
  std::atomic<bool> down_[kMaxRails] = {};
  std::atomic<bool> deaf_[kMaxRails] = {};
  std::atomic<bool> reject_[kMaxRails] = {};
  std::atomic<uint64_t> rateBytesPerSec_[kMaxRails] = {};
  std::atomic<uint32_t> qpReset_[kMaxRails] = {};
  Pacer pacers_[kMaxRails];
};

// One comm's view of the simulated faults, given at construction: asked by the comm's own rail
// index (0..n-1), it maps to the process's rails. A default view has no faults (a comm built by
// a test without an injector).
class FaultView {
 public:
  FaultView() = default;
  FaultView(FaultInjector* injector, const int* globalRails, int n) : injector_(injector) {
    n_ = n < FaultInjector::kMaxRails ? n : FaultInjector::kMaxRails;
    for (int r = 0; r < n_; ++r) global_[r] = globalRails[r];
  }

  FaultInjector* injector() const { return injector_; }
  void refresh(uint64_t nowNs) const {
    if (injector_ != nullptr) injector_->refresh(nowNs);
  }
  bool down(int r) const { return injector_ != nullptr && injector_->down(global(r)); }
  bool deaf(int r) const { return injector_ != nullptr && injector_->deaf(global(r)); }
  bool reject(int r) const { return injector_ != nullptr && injector_->reject(global(r)); }
  double rateBytesPerSec(int r) const {
    return injector_ != nullptr ? injector_->rateBytesPerSec(global(r)) : 0.0;
  }
  Pacer* pacer(int r) const { return injector_ != nullptr ? injector_->pacer(global(r)) : nullptr; }

 private:
  int global(int r) const { return r >= 0 && r < n_ ? global_[r] : -1; }

  FaultInjector* injector_ = nullptr;
  int global_[FaultInjector::kMaxRails] = {};
  int n_ = 0;
};

}  // namespace autopilot::net::core

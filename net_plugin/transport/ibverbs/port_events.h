// PortEvents: the asynchronous events of the devices this process opened (a port going down
// or up, a fatal device error), turned into per-rail state the comms read on every progress
// pass: whether the port is active, and how many times it went down / came back. A link going
// down raises IBV_EVENT_PORT_ERR within milliseconds (rxe: 1-2 ms), long before any retry
// budget runs out, so a comm fails the rail at once instead of waiting for a timeout.
//
// No thread: each device's async event descriptor is non-blocking, and poll() is called from
// the comms' progress (NCCL's proxy threads), at most once per kPollIntervalNs per process;
// when another thread is already polling, the call returns at once (try_lock). Events are
// acknowledged right after they are read (ibv_destroy_qp waits for the acknowledgements of its
// QP's events, so holding one would stall a teardown).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "net_plugin/transport/ibverbs/verbs_library.h"

namespace autopilot::net::ib {

class PortEvents {
 public:
  static constexpr int kMaxRails = 16;
  static constexpr uint64_t kPollIntervalNs = 1'000'000;

  // Discovery: the opened devices and the rails (device, port) whose state is tracked.
  void addDevice(const VerbsLibrary* lib, ibv_context* context, const std::string& name);
  void addRail(int rail, int device, uint8_t port, const std::string& name, bool active);

  void poll(uint64_t nowNs);

  bool active(int rail) const {
    return valid(rail) && rails_[rail].active.load(std::memory_order_acquire);
  }
  uint32_t downEvents(int rail) const {
    return valid(rail) ? rails_[rail].down.load(std::memory_order_acquire) : 0;
  }
  uint32_t upEvents(int rail) const {
    return valid(rail) ? rails_[rail].up.load(std::memory_order_acquire) : 0;
  }

 private:
  struct Device {
    ibv_context* context = nullptr;
    std::string name;
  };
  struct Rail {
    int device = -1;
    uint8_t port = 0;
    std::string name;
    std::atomic<bool> active{false};
    std::atomic<uint32_t> down{0}, up{0};
  };
  bool valid(int rail) const { return rail >= 0 && rail < railCount_; }
  void handle(int device, const ibv_async_event& event);
  void setPort(int device, int port, bool active, const char* why);

  const VerbsLibrary* lib_ = nullptr;
  std::vector<Device> devices_;  // fixed after discovery
  Rail rails_[kMaxRails];
  int railCount_ = 0;
  std::mutex pollMutex_;  // try_lock only
  std::atomic<uint64_t> nextPollNs_{0};
};

}  // namespace autopilot::net::ib

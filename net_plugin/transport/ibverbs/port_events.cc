#include "net_plugin/transport/ibverbs/port_events.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>

#include "common/event_journal.h"
#include "common/log.h"

namespace autopilot::net::ib {

namespace {
constexpr unsigned long kFlags = abi::subsys::kNet;
constexpr int kMaxEventsPerPoll = 64;
}  // namespace

void PortEvents::addDevice(const VerbsLibrary* lib, ibv_context* context, const std::string& name) {
  lib_ = lib;
  // Non-blocking, so that ibv_get_async_event returns at once when nothing is pending.
  int flags = fcntl(context->async_fd, F_GETFL);
  if (flags < 0 || fcntl(context->async_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    AP_WARN(kFlags,
            "%s: cannot make the async event descriptor non-blocking (errno %d): port "
            "events are not watched; failures are found by timeouts only",
            name.c_str(), errno);
    return;
  }
  devices_.push_back({context, name});
}

void PortEvents::addRail(int rail, int device, uint8_t port, const std::string& name, bool active) {
  if (rail < 0 || rail >= kMaxRails) return;
  rails_[rail].device = device;
  rails_[rail].port = port;
  rails_[rail].name = name;
  rails_[rail].active.store(active, std::memory_order_release);
  railCount_ = std::max(railCount_, rail + 1);
}

void PortEvents::poll(uint64_t nowNs) {
  if (devices_.empty() || nowNs < nextPollNs_.load(std::memory_order_relaxed)) return;
  std::unique_lock<std::mutex> lock(pollMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  nextPollNs_.store(nowNs + kPollIntervalNs, std::memory_order_relaxed);
  for (size_t d = 0; d < devices_.size(); ++d) {
    for (int i = 0; i < kMaxEventsPerPoll; ++i) {
      ibv_async_event event;
      if (lib_->getAsyncEvent(devices_[d].context, &event) != 0) break;  // EAGAIN: none left
      handle(int(d), event);
      lib_->ackAsyncEvent(&event);
    }
  }
}

void PortEvents::setPort(int device, int port, bool active, const char* why) {
  for (int r = 0; r < railCount_; ++r) {
    Rail& rail = rails_[r];
    if (rail.device != device || (port >= 0 && rail.port != port)) continue;
    bool was = rail.active.exchange(active, std::memory_order_acq_rel);
    (active ? rail.up : rail.down).fetch_add(1, std::memory_order_acq_rel);
    if (was == active) continue;  // logged once per change
    if (active) {
      AP_INFO(kFlags, "%s: port active again (%s)", rail.name.c_str(), why);
    } else {
      AP_WARN(kFlags, "%s: port down (%s)", rail.name.c_str(), why);
    }
    journal::EventJournal::instance().record(journal::Source::kNet, 0, -1,
                                             active ? "port_active" : "port_down", "%s %s",
                                             rail.name.c_str(), why);
  }
}

void PortEvents::handle(int device, const ibv_async_event& event) {
  const char* what = lib_->eventTypeStr ? lib_->eventTypeStr(event.event_type) : "event";
  switch (event.event_type) {
    case IBV_EVENT_PORT_ERR:
      setPort(device, event.element.port_num, false, what);
      break;
    case IBV_EVENT_PORT_ACTIVE:
      setPort(device, event.element.port_num, true, what);
      break;
    case IBV_EVENT_DEVICE_FATAL:
      setPort(device, -1, false, what);
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_CQ_ERR:
      // The QP's or CQ's own completions carry the failure to the comm that owns it.
      AP_INFO(kFlags, "%s: %s", devices_[size_t(device)].name.c_str(), what);
      break;
    default:
      AP_TRACE(kFlags, "%s: %s", devices_[size_t(device)].name.c_str(), what);
      break;
  }
}

}  // namespace autopilot::net::ib

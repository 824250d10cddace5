#include "tuner_plugin/tuner_service.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "common/log.h"

namespace autopilot::tuner {
namespace {

constexpr uint64_t kMaxSleepNs = 100'000'000;

class Service {
 public:
  static Service& instance() {
    static Service s;
    return s;
  }

  bool add(ServiceClient* c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (clients_.empty()) {
      wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (wakeFd_ < 0) return false;
      stop_ = false;
      try {
        thread_ = std::thread([this] { run(); });
      } catch (...) {
        close(wakeFd_);
        wakeFd_ = -1;
        return false;
      }
    }
    clients_.push_back(c);
    ++generation_;
    wake();
    return true;
  }

  void remove(ServiceClient* c) {
    std::thread toJoin;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = std::find(clients_.begin(), clients_.end(), c);
      if (it == clients_.end()) return;
      clients_.erase(it);
      ++generation_;
      if (clients_.empty()) {
        stop_ = true;
        toJoin = std::move(thread_);
      }
      wake();
    }
    if (toJoin.joinable()) {
      toJoin.join();
      std::lock_guard<std::mutex> lock(mu_);
      if (clients_.empty() && wakeFd_ >= 0) {
        close(wakeFd_);
        wakeFd_ = -1;
      }
    }
  }

 private:
  void wake() {
    uint64_t one = 1;
    if (wakeFd_ >= 0) (void)!write(wakeFd_, &one, sizeof(one));
  }

  void run() {
    pthread_setname_np(pthread_self(), "ap-tuner");
    std::vector<pollfd> fds;
    uint64_t next = 0;
    for (;;) {
      uint64_t generation;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        generation = generation_;
        fds.clear();
        fds.push_back(pollfd{wakeFd_, POLLIN, 0});
        for (ServiceClient* c : clients_) c->collectFds(&fds);
      }
      uint64_t now = monotonicNs();
      uint64_t sleepNs = next > now ? std::min(next - now, kMaxSleepNs) : 0;
      int rc = poll(fds.data(), fds.size(), int((sleepNs + 999999) / 1000000));
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      if (fds[0].revents & POLLIN) {
        uint64_t drained;
        (void)!read(wakeFd_, &drained, sizeof(drained));
      }
      now = monotonicNs();
      next = now + kMaxSleepNs;
      // A client added or removed while we slept: its fds' slice no longer lines up; the next
      // round collects afresh (events stay pending on the sockets).
      bool sameClients = generation == generation_;
      for (ServiceClient* c : clients_) {
        if (sameClients && rc > 0) c->handleEvents(fds.data(), fds.size(), now);
        next = std::min(next, c->step(now));
      }
    }
  }

  std::mutex mu_;
  std::vector<ServiceClient*> clients_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  int wakeFd_ = -1;
  std::thread thread_;
};

}  // namespace

bool TunerService::add(ServiceClient* client) { return Service::instance().add(client); }
void TunerService::remove(ServiceClient* client) { Service::instance().remove(client); }

}  // namespace autopilot::tuner

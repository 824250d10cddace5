#include "tuner_plugin/tuner_service.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "common/clock.h"
#include "common/event_journal.h"
#include "common/log.h"
#include "common/measurement_bus.h"
#include "common/rail_telemetry.h"
#include "common/service_thread.h"

namespace autopilot::tuner {
namespace {

constexpr uint64_t kMaxSleepNs = 100'000'000;
// A round takes microseconds (non-blocking I/O only); a thread that has not returned after this
// long is stuck, and the host's exit or dlclose must not wait on it any longer.
constexpr std::chrono::milliseconds kJoinTimeout{2000};

class Service {
 public:
  static Service& instance() {
    static Service s;
    return s;
  }

  bool add(ServiceClient* c) {
    std::lock_guard<std::mutex> lifecycle(lifecycleMu_);
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.running()) {
      if (wakeFd_ < 0) wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (wakeFd_ < 0) return false;
      stop_ = false;
      if (!thread_.start("ap-tuner", [this] { run(); })) return false;
    }
    clients_.push_back(c);
    wake();
    return true;
  }

  void remove(ServiceClient* c) {
    std::lock_guard<std::mutex> lifecycle(lifecycleMu_);
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto it = std::find(clients_.begin(), clients_.end(), c);
      if (it == clients_.end()) return;
      clients_.erase(it);
      // The thread works on a snapshot without the mutex: wait until the round that may be
      // using `c` is over (the wake makes it end its poll now).
      wake();
      roundDone_.wait(lock, [&] {
        return !inRound_ || std::find(active_.begin(), active_.end(), c) == active_.end();
      });
      if (!clients_.empty()) return;
      stop_ = true;
    }
    thread_.join(kJoinTimeout);  // the thread takes mu_ once more to see stop_
  }

  // exit() or dlclose() with communicators NCCL never finalized: the thread must be gone
  // before the library's code and statics are. Never throws, never waits without bound.
  ~Service() {
    std::lock_guard<std::mutex> lifecycle(lifecycleMu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      wake();
    }
    thread_.join(kJoinTimeout);
    if (wakeFd_ >= 0) close(wakeFd_);
  }

 private:
  Service() {
    // The clients use these on the service thread: built first, they are destroyed after this
    // object (statics are destroyed in reverse order of construction), i.e. after the join.
    bus::MeasurementBus::instance();
    journal::EventJournal::instance();
    telemetry::RailRegistry::instance();
    registerForkHandlers({&prepareFork, &parentAfterFork, &childAfterFork});
  }

  // fork(): no lock may be copied into the child in a held state. prepare waits for the
  // current round (non-blocking I/O, microseconds) to end.
  static void prepareFork() {
    instance().lifecycleMu_.lock();
    instance().mu_.lock();
  }
  static void parentAfterFork() {
    instance().mu_.unlock();
    instance().lifecycleMu_.unlock();
  }
  // The child has no service thread, and the communicators it inherited are its parent's: their
  // sockets are shared with the parent, so the child must never read or write them. They are
  // dropped from the service (a finalize of one in the child is a no-op, see tuner.cc); a
  // communicator the child creates itself starts a thread of its own.
  static void childAfterFork() {
    Service& s = instance();
    s.thread_.forgetAfterFork();
    s.clients_.clear();
    s.active_.clear();
    s.inRound_ = false;
    new (&s.roundDone_) std::condition_variable();  // may count the parent's waiters
    s.stop_ = false;
    if (s.wakeFd_ >= 0) close(s.wakeFd_);  // the child's copy; the parent keeps its own
    s.wakeFd_ = -1;
    s.mu_.unlock();
    s.lifecycleMu_.unlock();
  }

  void wake() {
    uint64_t one = 1;
    if (wakeFd_ >= 0) (void)!write(wakeFd_, &one, sizeof(one));
  }

  void run() {
    std::vector<pollfd> fds;
    uint64_t next = 0;
    for (;;) {
      try {
        if (!round(&fds, &next)) return;
      } catch (const std::exception& e) {
        // An allocation failure under a memory limit: the round is lost, the service goes on,
        // and nothing escapes the thread (ServiceThread catches anything else).
        AP_WARN(abi::subsys::kTuning, "tuner: service round failed: %s", e.what());
        next = monotonicNs() + kMaxSleepNs;
      }
    }
  }

  // One poll and one pass over the clients; false when asked to stop. The mutex is held only
  // to take a snapshot of the clients and to end the round: never during I/O or a client's
  // work, so NCCL's threads (init, finalize) never wait on a socket (remove() waits for the
  // round that uses its client, which its wake-up shortens to the work itself).
  bool round(std::vector<pollfd>* fds, uint64_t* next) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return false;
      active_ = clients_;  // capacity kept across rounds: no allocation once warm
      inRound_ = true;
    }
    struct EndRound {
      Service* s;
      ~EndRound() {
        std::lock_guard<std::mutex> lock(s->mu_);
        s->inRound_ = false;
        s->roundDone_.notify_all();
      }
    } endRound{this};
    fds->clear();
    fds->push_back(pollfd{wakeFd_, POLLIN, 0});
    for (ServiceClient* c : active_) c->collectFds(fds);
    uint64_t now = monotonicNs();
    uint64_t sleepNs = *next > now ? std::min(*next - now, kMaxSleepNs) : 0;
    int rc = poll(fds->data(), fds->size(), int((sleepNs + 999999) / 1000000));
    if ((*fds)[0].revents & POLLIN) {
      uint64_t drained;
      (void)!read(wakeFd_, &drained, sizeof(drained));
    }
    now = monotonicNs();
    *next = now + kMaxSleepNs;
    for (ServiceClient* c : active_) {
      try {  // one communicator's failure does not stop the others' service
        // Also after a poll that found nothing new: frames left in a connection's buffer by
        // last round's budget are handed out here (the client asked for this round by
        // returning a deadline of now).
        if (rc >= 0) c->handleEvents(fds->data(), fds->size(), now);
        *next = std::min(*next, c->step(now));
      } catch (const std::exception& e) {
        AP_WARN(abi::subsys::kTuning, "tuner: a communicator's service step failed: %s", e.what());
      }
    }
    return true;
  }

  // add/remove/destruction/fork hold lifecycleMu_ (taken first) so that starting and joining
  // the thread never race; the thread itself takes only mu_, and only briefly.
  std::mutex lifecycleMu_;
  std::mutex mu_;
  std::vector<ServiceClient*> clients_;
  std::vector<ServiceClient*> active_;  // the clients of the round in progress
  bool inRound_ = false;
  std::condition_variable roundDone_;
  bool stop_ = false;
  int wakeFd_ = -1;
  ServiceThread thread_;
};

}  // namespace

bool TunerService::add(ServiceClient* client) { return Service::instance().add(client); }
void TunerService::remove(ServiceClient* client) { Service::instance().remove(client); }
void TunerService::construct() { Service::instance(); }

}  // namespace autopilot::tuner

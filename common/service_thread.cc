#include "common/service_thread.h"

#include <cerrno>
#include <csignal>
#include <ctime>
#include <exception>

#include "common/log.h"

namespace autopilot {

namespace {
constexpr unsigned long kFlags = abi::subsys::kInit;
}

ServiceThread::~ServiceThread() {
  // The owner joins before it goes away; a thread still here is one that would not stop. It is
  // forgotten, never joined without bound and never left to std::thread's terminate.
  if (running_) {
    AP_WARN(kFlags, "thread %s still running while its owner is destroyed; left to the process",
            name_);
    pthread_detach(thread_);
  }
}

void* ServiceThread::trampoline(void* self) {
  auto* t = static_cast<ServiceThread*>(self);
  pthread_setname_np(pthread_self(), t->name_);
  try {
    t->body_();
  } catch (const std::exception& e) {
    AP_WARN(kFlags, "thread %s stopped: %s", t->name_, e.what());
  } catch (...) {
    AP_WARN(kFlags, "thread %s stopped by an unknown exception", t->name_);
  }
  return nullptr;
}

bool ServiceThread::start(const char* name, std::function<void()> body) {
  if (running_) return false;
  name_ = name;
  body_ = std::move(body);
  // Signals meant for the application (SIGTERM, SIGINT, SIGCHLD handlers, ...) must not be
  // delivered to our thread: the new thread starts with every blockable signal blocked.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  int rc = pthread_create(&thread_, nullptr, &ServiceThread::trampoline, this);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (rc != 0) {
    AP_WARN(kFlags, "cannot start thread %s: error %d", name, rc);
    body_ = nullptr;
    return false;
  }
  running_ = true;
  return true;
}

bool ServiceThread::join(std::chrono::milliseconds timeout) {
  if (!running_) return false;
  running_ = false;
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
  deadline.tv_sec += time_t(ns / 1000000000);
  deadline.tv_nsec += long(ns % 1000000000);
  if (deadline.tv_nsec >= 1000000000) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000;
  }
  int rc = pthread_timedjoin_np(thread_, nullptr, &deadline);
  if (rc == 0) {
    body_ = nullptr;
    return true;
  }
  AP_WARN(kFlags, "thread %s did not stop within %lld ms (error %d); it is left to the process",
          name_, static_cast<long long>(timeout.count()), rc);
  pthread_detach(thread_);
  return false;
}

void registerForkHandlers(const ForkHandlers& handlers) {
  log::registerForkGate();  // first: its prepare step must run after this owner's
  int rc = pthread_atfork(handlers.prepare, handlers.parent, handlers.child);
  if (rc != 0) AP_WARN(kFlags, "pthread_atfork failed (error %d): fork() is not guarded", rc);
}

}  // namespace autopilot

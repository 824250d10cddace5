// The library's background threads live inside someone else's process, which may end or split
// in any way: exit() or _exit() without finalizing its communicators, fork() (PyTorch's data
// loader workers), dlclose() of the library with communicators alive, a signal. A std::thread
// cannot be left joinable in a static object (its destructor calls std::terminate), cannot be
// joined in a forked child (the thread does not exist there) and must never be waited on
// without bound from a destructor that the loader runs.
//
// ServiceThread is the one owner type for such a thread:
//  - the body runs inside a catch-all: an exception that escapes a thread is std::terminate;
//  - join() waits a bounded time and then forgets the thread with a warning rather than hang
//    the host's exit or dlclose;
//  - forgetAfterFork() drops the thread in a forked child without touching it;
//  - destroying a ServiceThread never terminates the process: its owner joins it first, and a
//    thread still registered at destruction is forgotten (and logged).
//
// ForkGuard registers an owner's fork handlers once per load of the library (glibc removes a
// library's pthread_atfork handlers when it is unloaded): `prepare` takes the owner's locks so
// that no lock is copied into the child in a held state, `parent` releases them, `child`
// releases them and forgets what belongs to the parent (threads, connections, files).
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <chrono>
#include <functional>

namespace autopilot {

class ServiceThread {
 public:
  ServiceThread() = default;
  ~ServiceThread();
  ServiceThread(const ServiceThread&) = delete;
  ServiceThread& operator=(const ServiceThread&) = delete;

  // Starts `body` on a new thread named `name` (at most 15 characters). False when the thread
  // cannot be created (resource limits); nothing runs then.
  bool start(const char* name, std::function<void()> body);
  // Waits at most `timeout` for the body to return. True when the thread ended and was joined;
  // false when it did not end in time (it is then detached and forgotten: at exit the process
  // takes it along) or when there was no thread.
  bool join(std::chrono::milliseconds timeout);
  bool running() const { return running_; }
  // In a forked child: the thread exists only in the parent. Forget it without joining.
  void forgetAfterFork() { running_ = false; }

 private:
  static void* trampoline(void* self);

  pthread_t thread_{};
  bool running_ = false;
  const char* name_ = "";
  std::function<void()> body_;
};

// pthread_atfork registration of one owner's handlers, once per load of the library.
struct ForkHandlers {
  void (*prepare)();
  void (*parent)();
  void (*child)();
};
void registerForkHandlers(const ForkHandlers& handlers);

}  // namespace autopilot

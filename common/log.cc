#include "common/log.h"

#include <pthread.h>

#include <cstdarg>
#include <cstdio>

#include "common/clock.h"

namespace autopilot::log {
namespace {
std::atomic<abi::Logger> gLogger{nullptr};

// fork(): the host's logger serialises its callers with a lock of its own (NCCL's does). A thread
// of ours inside the logger at the moment the process is copied leaves that lock held in the
// child for ever, and the child's first log line hangs. Every call into the logger passes this
// gate, and fork()'s prepare step closes it (see registerForkGate), so that no thread of ours is
// inside the logger when the process is copied. A plain pthread mutex: it cannot throw.
pthread_mutex_t gGate = PTHREAD_MUTEX_INITIALIZER;

void closeGate() { pthread_mutex_lock(&gGate); }
void openGate() { pthread_mutex_unlock(&gGate); }
}  // namespace

void registerForkGate() noexcept {
  // pthread_atfork runs prepare handlers in the reverse order of registration: registered before
  // every owner's handlers (once per load of the library, as glibc drops a library's handlers
  // when it is unloaded), the gate closes last, after the owners' prepare steps, which may wait
  // for a thread of theirs that is logging. The child's handler runs in the thread that forked,
  // the one that holds the gate.
  static const int rc = pthread_atfork(&closeGate, &openGate, &openGate);
  (void)rc;
}

void setLogger(abi::Logger fn) noexcept {
  if (fn != nullptr) gLogger.store(fn, std::memory_order_release);
}

abi::Logger logger() noexcept { return gLogger.load(std::memory_order_acquire); }

void emit(abi::LogLevel level, unsigned long flags, const char* func, int line, const char* fmt,
          ...) noexcept {
  abi::Logger fn = logger();
  if (fn == nullptr) return;
  char buf[1024];
  int prefix = std::snprintf(buf, sizeof(buf), "autopilot: ");
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf + prefix, sizeof(buf) - prefix, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&gGate);
  fn(level, flags, func, line, "%s", buf);
  pthread_mutex_unlock(&gGate);
}

bool RateLimiter::allow(uint64_t* suppressed) noexcept {
  uint64_t now = monotonicNs();
  uint64_t next = nextNs_.load(std::memory_order_relaxed);
  if (now < next || !nextNs_.compare_exchange_strong(next, now + intervalNs_)) {
    held_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  *suppressed = held_.exchange(0, std::memory_order_relaxed);
  return true;
}

}  // namespace autopilot::log

#include "common/log.h"

#include <cstdarg>
#include <cstdio>

#include "common/clock.h"

namespace autopilot::log {
namespace {
std::atomic<abi::Logger> gLogger{nullptr};
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
  fn(level, flags, func, line, "%s", buf);
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

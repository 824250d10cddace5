#include "common/log.h"

#include <cstdarg>
#include <cstdio>

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

}  // namespace autopilot::log

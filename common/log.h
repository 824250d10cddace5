// Logging goes only through the logger NCCL hands to each plugin's init (ncclDebugLogger_t), with
// NCCL's subsystem flags and the caller's function and line. Before any init there is no logger
// and messages are dropped: the library never writes to stdout or stderr itself.
#pragma once

#include <atomic>

#include "common/abi/nccl_abi.h"

namespace autopilot::log {

// Installs NCCL's logger. NCCL passes the same function to every init; the latest non-null
// one wins, so a reload with a new host logger takes effect.
void setLogger(abi::Logger fn) noexcept;
abi::Logger logger() noexcept;

// Formats the message (prefixed "autopilot: ") and forwards it. Safe to call from any thread;
// NCCL's logger takes a mutex, so hot paths log at INFO only on rare state changes.
void emit(abi::LogLevel level, unsigned long flags, const char* func, int line, const char* fmt,
          ...) noexcept __attribute__((format(printf, 5, 6)));

}  // namespace autopilot::log

#define AP_WARN(flags, ...) \
  ::autopilot::log::emit(::autopilot::abi::kLogWarn, (flags), __func__, __LINE__, __VA_ARGS__)
#define AP_INFO(flags, ...) \
  ::autopilot::log::emit(::autopilot::abi::kLogInfo, (flags), __func__, __LINE__, __VA_ARGS__)
#ifdef AUTOPILOT_TRACE
#define AP_TRACE(flags, ...) \
  ::autopilot::log::emit(::autopilot::abi::kLogTrace, (flags), __func__, __LINE__, __VA_ARGS__)
#else
#define AP_TRACE(flags, ...) \
  do {                       \
  } while (0)
#endif

// Warn at most once per call site for the lifetime of the loaded library (hot-path errors).
#define AP_WARN_ONCE(flags, ...)                                        \
  do {                                                                  \
    static std::atomic<bool> apWarnedOnce_{false};                      \
    if (!apWarnedOnce_.exchange(true, std::memory_order_relaxed)) {     \
      AP_WARN((flags), __VA_ARGS__);                                    \
    }                                                                   \
  } while (0)

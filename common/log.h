// Logging goes only through the logger NCCL hands to each plugin's init (ncclDebugLogger_t), with
// NCCL's subsystem flags and the caller's function and line. Before any init there is no logger
// and messages are dropped: the library never writes to stdout or stderr itself.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/abi/nccl_abi.h"

namespace autopilot::log {

// Installs NCCL's logger. NCCL passes the same function to every init; the latest non-null
// one wins, so a reload with a new host logger takes effect.
void setLogger(abi::Logger fn) noexcept;
abi::Logger logger() noexcept;

// Registers the fork handlers that keep every thread of ours out of the host's logger while
// the process is copied by fork(). Called before any owner registers its own (see
// registerForkHandlers in service_thread.h); idempotent within one load of the library.
void registerForkGate() noexcept;

// Formats the message (prefixed "autopilot: ") and forwards it. Safe to call from any thread;
// NCCL's logger takes a mutex, so hot paths log at INFO only on rare state changes.
void emit(abi::LogLevel level, unsigned long flags, const char* func, int line, const char* fmt,
          ...) noexcept __attribute__((format(printf, 5, 6)));

// Lets a message through at most once per interval and counts what it held back, for warnings
// a remote party can trigger at will (rejected connections, bad frames): the job's log must not
// become the attacker's megaphone. Lock-free; one per call site (AP_WARN_LIMITED).
class RateLimiter {
 public:
  explicit constexpr RateLimiter(uint64_t intervalNs) : intervalNs_(intervalNs) {}
  // True when the message may be logged now; *suppressed gets how many were held back since
  // the last one that passed.
  bool allow(uint64_t* suppressed) noexcept;

 private:
  const uint64_t intervalNs_;
  std::atomic<uint64_t> nextNs_{0};
  std::atomic<uint64_t> held_{0};
};

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

// Warn at most once per 10 s per call site, saying how many were held back (warnings a remote
// party can trigger).
#define AP_WARN_LIMITED(flags, fmt, ...)                                      \
  do {                                                                        \
    static ::autopilot::log::RateLimiter apLimiter_(10'000'000'000ull);       \
    uint64_t apHeld_ = 0;                                                     \
    if (apLimiter_.allow(&apHeld_)) {                                         \
      AP_WARN((flags), fmt " (%llu similar messages held back)", __VA_ARGS__, \
              static_cast<unsigned long long>(apHeld_));                      \
    }                                                                         \
  } while (0)

// Warn at most once per call site for the lifetime of the loaded library (hot-path errors).
#define AP_WARN_ONCE(flags, ...)                                    \
  do {                                                              \
    static std::atomic<bool> apWarnedOnce_{false};                  \
    if (!apWarnedOnce_.exchange(true, std::memory_order_relaxed)) { \
      AP_WARN((flags), __VA_ARGS__);                                \
    }                                                               \
  } while (0)

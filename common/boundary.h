// The C ABI boundary: nothing escapes an exported entry point. Each adapter wraps its body in
// guarded(), which maps exceptions to an ncclResult_t and logs why.
#pragma once

#include <exception>
#include <new>

#include "common/abi/nccl_abi.h"
#include "common/log.h"

namespace autopilot {

template <typename Body>
abi::Result guarded(const char* where, unsigned long flags, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    log::emit(abi::kLogWarn, flags, where, 0, "%s: out of memory", where);
    return abi::kSystemError;
  } catch (const std::exception& e) {
    log::emit(abi::kLogWarn, flags, where, 0, "%s: internal error: %s", where, e.what());
    return abi::kInternalError;
  } catch (...) {
    log::emit(abi::kLogWarn, flags, where, 0, "%s: unknown internal error", where);
    return abi::kInternalError;
  }
}

// For entry points whose failure NCCL cannot handle (the tuner's getCollInfo, the profiler's
// event callbacks): any problem is logged once per call site and reported as success.
template <typename Body>
abi::Result guardedNeverFail(const char* where, unsigned long flags, Body&& body) noexcept {
  try {
    body();
  } catch (...) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true, std::memory_order_relaxed)) {
      log::emit(abi::kLogWarn, flags, where, 0,
                "%s: internal error ignored (NCCL's own choice stands); further ones are silent",
                where);
    }
  }
  return abi::kSuccess;
}

}  // namespace autopilot

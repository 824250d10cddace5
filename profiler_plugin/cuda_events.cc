#include "profiler_plugin/cuda_events.h"

#include <dlfcn.h>

#include <mutex>

namespace autopilot::profiler::cuda {
namespace {

// Driver API result codes and flags used here (cuda.h: CUDA_SUCCESS, CUDA_ERROR_NOT_READY,
// CU_EVENT_DEFAULT).
constexpr int kSuccess = 0;
constexpr int kNotReady = 600;
constexpr unsigned kEventDefault = 0;

struct Driver {
  int (*eventCreate)(void** event, unsigned flags) = nullptr;
  int (*eventRecord)(void* event, void* stream) = nullptr;
  int (*eventQuery)(void* event) = nullptr;
  int (*eventElapsedTime)(float* ms, void* start, void* stop) = nullptr;
  bool ok = false;
};

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    // The handle stays open: events created through it outlive any one communicator.
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    d.eventCreate = reinterpret_cast<decltype(d.eventCreate)>(dlsym(lib, "cuEventCreate"));
    d.eventRecord = reinterpret_cast<decltype(d.eventRecord)>(dlsym(lib, "cuEventRecord"));
    d.eventQuery = reinterpret_cast<decltype(d.eventQuery)>(dlsym(lib, "cuEventQuery"));
    d.eventElapsedTime =
        reinterpret_cast<decltype(d.eventElapsedTime)>(dlsym(lib, "cuEventElapsedTime"));
    d.ok = d.eventCreate && d.eventRecord && d.eventQuery && d.eventElapsedTime;
  });
  return d;
}

}  // namespace

bool available() { return driver().ok; }

void* createEvent() {
  const Driver& d = driver();
  void* e = nullptr;
  if (!d.ok || d.eventCreate(&e, kEventDefault) != kSuccess) return nullptr;
  return e;
}

bool record(void* event, void* stream) {
  const Driver& d = driver();
  return d.ok && event != nullptr && d.eventRecord(event, stream) == kSuccess;
}

int query(void* event) {
  const Driver& d = driver();
  if (!d.ok || event == nullptr) return -1;
  int r = d.eventQuery(event);
  return r == kSuccess ? 1 : r == kNotReady ? 0 : -1;
}

bool elapsedNs(void* start, void* stop, uint64_t* ns) {
  const Driver& d = driver();
  float ms = 0;
  if (!d.ok || d.eventElapsedTime(&ms, start, stop) != kSuccess || !(ms >= 0)) return false;
  *ns = uint64_t(double(ms) * 1e6);
  return true;
}

}  // namespace autopilot::profiler::cuda

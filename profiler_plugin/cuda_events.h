// CUDA events through the driver API, loaded with dlopen (the library has no link-time CUDA
// dependency): the only way to time a copy-engine collective, since NCCL brackets only the
// enqueue of its copies and leaves the timing to the profiler (profiler v6+).
//
// record() runs on NCCL's application thread, inside the collective call, where the
// communicator's CUDA context is current; query() and elapsedNs() run on the profiler's
// service thread and need no current context.
#pragma once

#include <cstdint>

namespace autopilot::profiler::cuda {

// Loads libcuda.so.1 once; false (and every call below fails) without a usable driver.
bool available();
// A new event with timing enabled, or NULL.
void* createEvent();
bool record(void* event, void* stream);
// 1: completed, 0: not yet, -1: error.
int query(void* event);
// GPU time between two completed events (the driver's resolution is about 0.5 us).
bool elapsedNs(void* start, void* stop, uint64_t* ns);

}  // namespace autopilot::profiler::cuda

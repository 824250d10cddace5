#include "common/instance.h"

#include <atomic>

namespace autopilot {
namespace {
const char kInstanceAnchor = 0;
std::atomic<long> gLiveContexts{0};
}  // namespace

uintptr_t instanceId() noexcept { return reinterpret_cast<uintptr_t>(&kInstanceAnchor); }
void contextCreated() noexcept { gLiveContexts.fetch_add(1, std::memory_order_relaxed); }
void contextDestroyed() noexcept { gLiveContexts.fetch_sub(1, std::memory_order_relaxed); }
long liveContexts() noexcept { return gLiveContexts.load(std::memory_order_relaxed); }

}  // namespace autopilot

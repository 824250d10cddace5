#include "net_plugin/transport/ibverbs/verbs_objects.h"

namespace autopilot::net::ib {

namespace {
std::atomic<uint64_t> gFailedReleases{0};
}

uint64_t failedReleases() { return gFailedReleases.load(std::memory_order_relaxed); }
void countFailedRelease() { gFailedReleases.fetch_add(1, std::memory_order_relaxed); }

}  // namespace autopilot::net::ib

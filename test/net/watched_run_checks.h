// Checks every fault test of a watched stream makes: both ends connected and ran the script,
// exited cleanly, saw no error, and the receiver found no corrupt byte.
#pragma once

#include <catch2/catch.hpp>

#include "bench/net/pair.h"

namespace autopilot::bench {

inline void checkRanClean(const WatchedRun& run) {
  CHECK(run.started);
  CHECK(run.outcome.receiver == 0);
  CHECK(run.outcome.sender == 0);
  CHECK(run.receiver.error == 0);
  CHECK(run.sender.error == 0);
  CHECK(run.receiver.corrupt == 0);
}

}  // namespace autopilot::bench

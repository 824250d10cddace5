// The SimGrid side of `autopilot simulate`: one run (fabric, workload, faults, policy) in this
// process. SimGrid keeps one engine per process, so the driver forks a child per run.
#pragma once

#include "bench/sim/sim_spec.h"

namespace autopilot::sim {

// Whether this build has SimGrid (the subcommand says so and exits 77 when not).
bool simgridAvailable();

// Runs `spec` to completion and returns its figures. Call at most once per process. When the
// job stops (a hang on a dead link), `onStop` gets the figures and must not return (the
// simulation cannot be unwound cleanly from there); without it the run is torn down.
RunResult runOnce(const RunSpec& spec, void (*onStop)(const RunResult&) = nullptr);

}  // namespace autopilot::sim

// In-process replay fixture: the profiler table is loaded from this test executable through the
// plugin-host harness (STATIC_PLUGIN, as NCCL's static-plugin path does), so tests can drive it
// exactly as NCCL does and still read the measurement bus and the context's counters.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/profiler/nccl_replay.h"
#include "common/host/log_capture.h"
#include "common/host/plugin_host.h"
#include "common/measurement_bus.h"
#include "common/params.h"
#include "profiler_plugin/context.h"

namespace autopilot::test {

struct InProcessProfiler {
  explicit InProcessProfiler(int maxVersion = 5) {
    host::PluginHost::Options o;
    o.profilerPlugin = "STATIC_PLUGIN";
    o.maxProfilerVersion = maxVersion;
    host = std::make_unique<host::PluginHost>(o);
    loaded = host->loadProfiler();
  }
  // Opens one communicator; its session finalizes when the fixture dies (or on demand).
  host::CommSession& open(uint64_t commId, int rank = 0, int nRanks = 4, const char* name = "") {
    host::CommSession::Config cfg;
    cfg.commId = commId;
    cfg.rank = rank;
    cfg.nRanks = nRanks;
    cfg.nNodes = 1;
    cfg.name = name;
    sessions.push_back(std::make_unique<host::CommSession>(*host, cfg));
    sessions.back()->init();
    return *sessions.back();
  }
  replay::Replayer replayer(host::CommSession& s) {
    return replay::Replayer(host->profiler(), s.profilerContext(), host->activationMask());
  }
  static profiler::ProfilerContext* context(host::CommSession& s) {
    return static_cast<profiler::ProfilerContext*>(s.profilerContext());
  }
  std::unique_ptr<host::PluginHost> host;
  std::vector<std::unique_ptr<host::CommSession>> sessions;
  bool loaded = false;
};

inline std::vector<bus::CollectiveSample> drainBus(uint64_t commId) {
  std::vector<bus::CollectiveSample> out(bus::MeasurementBus::kRingCapacity);
  out.resize(bus::MeasurementBus::instance().drain(commId, out.data(), out.size()));
  return out;
}

// Sets (or clears, with NULL) an NCCL_AUTOPILOT_* variable for the scope, re-reading params.
struct ScopedParam {
  ScopedParam(const char* name, const char* value) : name_(name) {
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
    params::resetAllForTesting();
  }
  ~ScopedParam() {
    unsetenv(name_.c_str());
    params::resetAllForTesting();
  }
  std::string name_;
};

}  // namespace autopilot::test

// Starts the demo's rank processes (each in its host's network namespace when there is a veth
// cluster), relays their bootstrap handles, releases them together, and collects what they
// report. One Job is one "run" of the distributed program; the demo runs several.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/demo/cluster.h"
#include "bench/demo/wire.h"

namespace autopilot::demo {

struct JobSpec {
  int nRanks = 4;
  uint64_t commId = 0;
  int rails = 3;
  int railMbit = 250;
  double treeBwFactor = 1.0;               // the declared topology (DeclaredTopology)
  std::string sizes;                       // comma-separated bytes
  bool allReduceOnly = false;              // the workload: all-reduce alone, or four collectives
  int forcedCell = -1;                     // every rank runs this cell where it can (-1: none)
  std::map<std::string, std::string> env;  // added to each rank's environment
  const VethCluster* cluster = nullptr;    // NULL: every rank on the loopback rails
  std::string logDir;                      // each rank's stderr goes to rank<N>.log here
  int slowRank = -1;                       // this rank starts each collective slowMs late
  double slowMs = 0;
};

class Job {
 public:
  explicit Job(const JobSpec& spec);
  ~Job();  // kills and reaps whatever is still running
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Relays handles until every rank is connected; false (with error()) on failure or timeout.
  bool waitReady(int timeoutMs);
  void go();
  // Collects reports for up to `timeoutMs` (returns early on an error report).
  // `onIteration` sees every iteration report.
  void pump(int timeoutMs, const std::function<void(const wire::Iteration&)>& onIteration);
  // Asks every rank to stop after `iteration`, then waits up to `timeoutMs` for them to exit.
  bool stop(uint64_t iteration, int timeoutMs,
            const std::function<void(const wire::Iteration&)>& onIteration);
  void kill();

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  void handle(int rank, const char* buf, ssize_t n,
              const std::function<void(const wire::Iteration&)>& onIteration);
  JobSpec spec_;
  std::vector<pid_t> pids_;
  std::vector<int> fds_;
  std::vector<bool> ready_;
  std::vector<bool> closed_;
  std::string error_;
};

}  // namespace autopilot::demo

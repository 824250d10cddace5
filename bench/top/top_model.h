// What `autopilot top` shows, computed from the Prometheus files the profiler writes (one per
// process; docs/prometheus.md): per communicator its collectives per second, data rate, mean
// time and busiest arm; per rail its state across processes, share, throughput, bandwidth,
// failovers and recoveries; the plugins' events; everything lost. Pure: the command reads the
// files, this turns successive reads into frames (tests feed it text).
//
// Rates come from the two latest distinct versions of each file (by modification time), so they
// cover exactly one rewrite interval of that process whatever the refresh period; a file not
// rewritten since the last refresh keeps its previous rates.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/top/prom_text.h"

namespace autopilot::top {

struct FileVersion {
  std::string path;
  double mtime = 0;  // seconds (any epoch shared by all files and `now`)
  Exposition data;
};

struct CommRow {
  std::string comm;
  int ranksSeen = 0;
  int nRanks = 0;
  bool hasRates = false;    // at least one rank's file was rewritten twice
  double collPerSec = 0;    // mean over the ranks with rates
  double bytesPerSec = 0;   // same
  double meanTimeS = 0;     // execution time per collective over the interval
  double collectives = 0;   // completed since start, summed over ranks
  double shifts = 0;        // latency shifts detected, summed over ranks
  std::string busiestArm;   // "AllReduce 512 KiB Ring/Simple"
  double busiestShare = 0;  // its share of the collectives (interval, else since start)
};

struct RailRow {
  std::string host, rail, transport;
  std::map<std::string, int> states;                      // current state -> processes in it
  double share = 0;                                       // mean over processes
  double throughput = 0;                                  // bytes/s, summed over processes
  double bandwidth = 0;                                   // bytes/s, mean
  double failovers = 0, recoveries = 0, resentBytes = 0;  // summed
};

struct Frame {
  double now = 0;
  int processes = 0;
  std::vector<std::string> hosts;
  int staleFiles = 0;  // not rewritten for longer than the stale limit
  size_t badLines = 0;
  std::string firstBad;  // "path: line N: what"
  std::vector<CommRow> comms;
  std::vector<RailRow> rails;
  std::map<std::string, double> events;       // "source/kind" -> total
  std::map<std::string, double> eventsDelta;  // increase over the interval, where known
  std::map<std::string, double> losses;       // what -> total, non-zero only
};

class TopModel {
 public:
  // One refresh: every file found now. Files no longer found are forgotten (their processes
  // ended and removed them).
  void update(std::vector<FileVersion> files);
  // `staleAfterS`: a file older than this at `now` is counted as stale.
  Frame frame(double now, double staleAfterS) const;

 private:
  struct Tracked {
    FileVersion cur;
    std::optional<FileVersion> prev;
  };
  std::map<std::string, Tracked> files_;
};

std::string renderText(const Frame& f, const std::string& source);
std::string renderJson(const Frame& f);

}  // namespace autopilot::top

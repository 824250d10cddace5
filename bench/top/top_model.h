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
  // Bytes given to the rail only to measure it (copies of chunks another rail carries), summed:
  // part of what it moves, not of the data it carries.
  double probeCopyBytes = 0;
};

// A rank that reaches the communicator's collectives late. Where the ranks exchange their arrival
// times (the profiler's default), rank 0's verdict is shown as is. Otherwise it is estimated
// from durations: the others wait for it inside each
// collective, and they all finish together, so it spends less time in a collective than its
// peers by about its lateness: lag = (median time in a collective over the communicator's ranks)
// - (its own), over the interval. Durations only: no clock is compared across hosts. It holds
// for collectives whose ranks finish together (all-reduce, all-gather, reduce-scatter; a
// broadcast's root may leave early), which is why it takes a lag of both kMinLagS and
// kMinLagShare of the median, in kMinLateFrames consecutive frames, before naming a rank.
struct Straggler {
  std::string comm, host, rank;
  double lagS = 0;     // median - own
  double ownS = 0;     // its mean time in a collective over the interval
  double medianS = 0;  // the communicator's median of those
  double sinceS = 0;   // late in every frame since this time (`now` units)
  // Named by rank 0's arrival exchange (docs/stragglers.md) rather than from durations: lagS is
  // then the rank's mean arrival lag over the last window and lateRatio the share of that
  // window's collectives it was late in; ownS and medianS are 0.
  bool fromArrivals = false;
  double lateRatio = 0;
};
inline constexpr double kMinLagS = 0.001;
inline constexpr double kMinLagShare = 0.25;
inline constexpr double kMinCollectives = 3;  // per rank over the interval
inline constexpr int kMinLateFrames = 2;      // consecutive frames late before it is named

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
  std::vector<Straggler> stragglers;
};

class TopModel {
 public:
  // One refresh: every file found now. Files no longer found are forgotten (their processes
  // ended and removed them).
  void update(std::vector<FileVersion> files);
  // `staleAfterS`: a file older than this at `now` is counted as stale. Remembers since when
  // each straggler has been named (consecutive frames).
  Frame frame(double now, double staleAfterS);

 private:
  struct Tracked {
    FileVersion cur;
    std::optional<FileVersion> prev;
  };
  std::map<std::string, Tracked> files_;
  // comm/host/rank -> (first frame of its streak of late frames, frames in the streak)
  std::map<std::string, std::pair<double, int>> lateSince_;
};

std::string renderText(const Frame& f, const std::string& source);
std::string renderJson(const Frame& f);

}  // namespace autopilot::top

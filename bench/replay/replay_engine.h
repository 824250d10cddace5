// Offline evaluation of the tuner policy on forced-arm measurements (`autopilot replay`).
//
// A context is (system, collective, size, placement): in-place and out-of-place times are
// separate contexts, since they are separate measurements; they learn as one share group per
// (system, collective), as the plugin's contexts of a collective do (a tuner is not told whether
// a call is in place). The arms of a context are its
// measured rows: AUTO/AUTO is NCCL's default; partly forced rows (Ring/AUTO, AUTO/LL) are mapped
// to the cell NCCL's model would pick within that restriction, and rows that map to the same
// cell are one arm with several measurements. Rows that give only bandwidth are converted with
// nccl-tests' formulas (algbw = size / time; busbw = algbw * 2(n-1)/n for all_reduce, (n-1)/n
// for all_gather / reduce_scatter, 1 otherwise).
//
// A row whose system ends with "; channels forced to N" is the arm (algo, proto, N channels) of
// the system named without the suffix: its own arm of the same context (config "ALGO/PROTO/Nch").
// The cost model has no channel dimension: such an arm's prior is its cell's prediction.
//
// The policy sees what it would see in NCCL: a cost table (from the C++ cost model for the
// topology in the CSV's sidecar NAME.topo.json; a flat table without one) with IGNORE on every
// cell that was not measured, and one measured time per call of the arm it played. A call's
// time is one of the arm's measurements drawn at random, times lognormal noise whose sigma is
// estimated from NAME_auto_repeats.csv when it exists, and otherwise the stated value
// (--noise, default 3%). Contexts are called round-robin, as a training loop calls a fixed set
// of sizes. The losses are measured against the truth (the mean of an arm's measurements).
// Sizes below the plugin's learning threshold (--min-bytes, default the plugin's default) keep
// NCCL's choice, as in the plugin.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tuner_plugin/bandit_policy.h"

namespace autopilot::replay {

struct ReplayOptions {
  int callsPerContext = 300;
  int runs = 5;  // independent runs (seeds); learned losses are the worst over runs
  uint64_t seed = 1;
  double statedNoise = 0.03;  // lognormal sigma when no repeats file exists
  std::string topoDir;        // searched after the CSV's own folder
  std::string builtinTopoDir;
  bool flatPrior = false;  // ignore sidecars
  uint64_t minBytes = 0;   // as NCCL_AUTOPILOT_TUNER_MIN_BYTES: smaller sizes stay NCCL's
  tuner::PolicyConfig policy;
  bool shareAcrossSizes = true;  // contexts of a (system, collective) share a model
  // Transfer across scales: learned corrections of another file (FileResult::corrections),
  // keyed by "collective size placement | config"; they seed the prior, never the decisions.
  const std::map<std::string, double>* priorCorrections = nullptr;
};

struct LossSummary {
  int contexts = 0;
  int over10pct = 0;
  double meanLoss = 0;  // fractions
  double p99Loss = 0;
  double maxLoss = 0;
};

struct ContextResult {
  std::string label;
  int arms = 0;
  std::string defaultArm, bestArm, learnedArm;  // learned: in the worst run
  double defaultLoss = 0;
  double learnedLoss = 0;      // worst over runs
  double learnedLossMean = 0;  // mean over runs
  // While learning, means over runs: the extra time vs always-best (%; a file's regret weighs
  // its contexts by their time), the calls played off the incumbent of the moment (probes), and
  // the call from which the final incumbent was in force (1: NCCL's choice throughout).
  double regretPct = 0;
  double probes = 0;
  double settledCall = 0;
};

struct FileResult {
  std::string file;
  std::string prior;  // "sidecar PATH" or "flat"
  double noiseSigma = 0;
  std::string noiseSource;
  int skippedRows = 0;
  int skippedContexts = 0;  // no default, a single arm, or a collective the tuner never sees
  // Measured configurations the model marks IGNORE (not arms: a tuner cannot choose them), and
  // the replayed contexts where one of them measured faster than every arm.
  int unofferedArms = 0;
  int unofferedFastest = 0;
  LossSummary defaults, learned;
  double regretPct = 0;         // learning: extra time vs always-best over all replayed calls, %
  double defaultRegretPct = 0;  // the same for always-default, %
  std::vector<ContextResult> contexts;
  std::vector<double> defaultLosses, learnedLosses;  // per context, for the overall summary
  // log(measured / predicted) ratio errors per arm, relative to the default, from the last run
  // (arms with enough samples), keyed as ReplayOptions::priorCorrections; and how many of this
  // file's arms received a correction.
  std::map<std::string, double> corrections;
  int correctedArms = 0;
};

bool replayFile(const std::string& csvPath, const ReplayOptions& options, FileResult* out,
                std::string* error);

// Nearest-rank summary of a list of losses.
LossSummary summarize(const std::vector<double>& losses);

}  // namespace autopilot::replay

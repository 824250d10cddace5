// `autopilot replay FILE...`: evaluates the tuner's policy by replay on forced-arm measurement
// files (CSV, format in bench/replay/forced_arm_csv.h; bench/replay/replay_engine.h: the method).
// Prints per file and overall, for NCCL's default choice and for the policy after learning:
// contexts, contexts losing > 10% to the best measured arm, mean and p99 loss, and the regret
// spent learning. --check verifies the targets and fails otherwise.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bench/cli_args.h"
#include "bench/commands.h"
#include "bench/replay/replay_engine.h"

namespace autopilot::cli {
namespace {

using replay::FileResult;
using replay::LossSummary;

// Sidecars that ship with the tool's sources (their absolute path, set by the build; else found
// next to this file).
std::string builtinTopologyDir() {
#ifdef AUTOPILOT_REPLAY_TOPOLOGY_DIR
  return AUTOPILOT_REPLAY_TOPOLOGY_DIR;
#endif
  std::string here = __FILE__;
  size_t slash = here.rfind('/');
  return slash == std::string::npos ? "bench/replay/topologies"
                                    : here.substr(0, slash) + "/replay/topologies";
}

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string summaryJson(const LossSummary& s) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "{\"contexts\": %d, \"over_10pct\": %d, \"mean_loss\": %.6f, \"p99_loss\": %.6f, "
                "\"max_loss\": %.6f}",
                s.contexts, s.over10pct, s.meanLoss, s.p99Loss, s.maxLoss);
  return buf;
}

std::string pct(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100 * fraction);
  return buf;
}

void printRow(const char* name, int contexts, const LossSummary& d, const LossSummary& l,
              double regretPct, const char* prior) {
  std::printf("%-44s %4d | %4d %7s %7s | %4d %7s %7s | %7.2f%%  %s\n", name, contexts, d.over10pct,
              pct(d.meanLoss).c_str(), pct(d.p99Loss).c_str(), l.over10pct, pct(l.meanLoss).c_str(),
              pct(l.p99Loss).c_str(), regretPct, prior);
}

bool isRepeatsFile(const std::string& path) {
  const std::string suffix = "_auto_repeats.csv";
  return path.size() >= suffix.size() &&
         path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// --train A --score B: B replayed alone, then with the corrections learned on A as its prior.
int transfer(const std::string& trainPath, const std::string& scorePath,
             replay::ReplayOptions options) {
  FileResult train, alone, seeded;
  std::string error;
  if (!replay::replayFile(trainPath, options, &train, &error) ||
      !replay::replayFile(scorePath, options, &alone, &error)) {
    std::fprintf(stderr, "replay: %s\n", error.c_str());
    return 1;
  }
  options.priorCorrections = &train.corrections;
  if (!replay::replayFile(scorePath, options, &seeded, &error)) {
    std::fprintf(stderr, "replay: %s\n", error.c_str());
    return 1;
  }
  std::printf("%-44s %4s | %-20s | %-20s | %8s\n", "", "", "NCCL default", "after learning", "");
  std::printf("%-44s %4s | %4s %7s %7s | %4s %7s %7s | %8s  %s\n", "", "ctx", ">10%", "mean", "p99",
              ">10%", "mean", "p99", "regret", "prior");
  printRow("train (A)", train.defaults.contexts, train.defaults, train.learned, train.regretPct,
           "");
  printRow("score (B) alone", alone.defaults.contexts, alone.defaults, alone.learned,
           alone.regretPct, "");
  printRow("score (B) seeded by A", seeded.defaults.contexts, seeded.defaults, seeded.learned,
           seeded.regretPct, "");
  std::printf(
      "\n%zu corrections learned on A; %d arms of B seeded (matched by collective, size,\n"
      "placement and configuration). Decisions on B are its own: corrections only move\n"
      "its prior.\n",
      train.corrections.size(), seeded.correctedArms);
  return 0;
}

int cmdReplay(int argc, char** argv) {
  replay::ReplayOptions options;
  options.builtinTopoDir = builtinTopologyDir();
  std::vector<std::string> files;
  std::string jsonPath, trainPath, scorePath;
  bool check = false, perContext = false, noShare = false;
  cli::Args args(
      "autopilot replay",
      "   or: autopilot replay --train A.csv --score B.csv [options]\n"
      "Plays the tuner policy against forced-arm measurements (nccl-tests times per system,\n"
      "collective, forced algorithm/protocol and size, as CSV, e.g. the data set\n"
      "../shared/data/forced-arm/). The cost-table prior comes from NAME.topo.json next to the\n"
      "CSV, else in --topo-dir, else in the sidecars shipped with the tool (--flat ignores\n"
      "them). Noise: from NAME_auto_repeats.csv when present, else lognormal with --noise.\n"
      "Learned losses are the worst over --runs runs.");
  args.addPositionals("files", files, "forced-arm measurements").typeName("FILE.csv");
  args.addText("--json", jsonPath, "the results as JSON").typeName("FILE");
  args.addText("--topo-dir", options.topoDir, "where NAME.topo.json sidecars are looked up")
      .typeName("DIR");
  args.addFlag("--flat", options.flatPrior, "ignore the topology sidecars (a flat prior)");
  args.addFlag("--no-share", noShare,
               "contexts of a (system, collective) do not share what they learn across "
               "sizes and placements");
  args.addInt("--calls", options.callsPerContext, 1, 1 << 30, "calls replayed per context");
  args.addInt("--runs", options.runs, 1, 1 << 20, "independent runs (seeds)");
  args.addInt("--seed", options.seed, uint64_t(0), std::numeric_limits<uint64_t>::max(),
              "seed of the first run");
  args.addReal("--noise", options.statedNoise, Interval::rightOpen(0, 2),
               "lognormal sigma of the noise where no repeats file exists");
  // The plugin's own bounds for NCCL_AUTOPILOT_TUNER_MIN_BYTES, _PROBE_BUDGET and _PROBE_WINDOW_MS.
  args.addInt("--min-bytes", options.minBytes, uint64_t(0), uint64_t(1) << 50,
              "sizes below keep NCCL's choice, as NCCL_AUTOPILOT_TUNER_MIN_BYTES");
  args.addReal(
      "--probe-budget", options.policy.probeBudget, Interval::closed(0, 0.5),
      "probes' extra time as a fraction of all time, as NCCL_AUTOPILOT_TUNER_PROBE_BUDGET");
  double probeWindowMs = options.policy.probeWindowUs * 1e-3;
  args.addReal("--probe-window-ms", probeWindowMs, Interval::closed(0, 3600000),
               "unspent probe budget is saved for at most this much time in collectives (0: the "
               "whole run), as NCCL_AUTOPILOT_TUNER_PROBE_WINDOW_MS");
  args.addText("--train", trainPath,
               "transfer across scales of a system: B (--score) alone, then B with the ratio "
               "errors learned on A (per collective, size, placement, configuration) as its "
               "prior; decisions on B still come from B's own measurements")
      .typeName("A.csv");
  args.addText("--score", scorePath, "see --train").typeName("B.csv");
  args.addFlag("--check", check, "fail unless the targets below hold");
  args.addFlag("--per-context", perContext,
               "one line per context (with its regret, probes and when it settled)");
  args.footer(
      "A row whose system ends with \"; channels forced to N\" (N in 1..64) is the arm (algo,\n"
      "proto, N channels) of the system named without that suffix. A configuration whose cell\n"
      "the topology's model marks IGNORE (LL128 without NVLink) is no arm: NCCL never offers\n"
      "it to a tuner. Losses are against the best arm.\n"
      "--check fails unless, over all files: 0 contexts lose > 10%, mean < 0.5%, p99 < 3%; on\n"
      "every file where the default loses > 10% somewhere: 0 contexts lose > 10%, mean < 1%,\n"
      "p99 < 5%; no context is worse than the default by more than 1%; and the regret over\n"
      "all files (each file's weighted by its contexts) is below 0.5%.");
  if (std::optional<int> rc = args.parse(argc, argv)) return *rc;
  if (noShare) options.shareAcrossSizes = false;
  options.policy.probeWindowUs = probeWindowMs * 1e3;
  if (!trainPath.empty() || !scorePath.empty()) {
    if (trainPath.empty() || scorePath.empty() || !files.empty()) {
      std::fprintf(stderr,
                   "autopilot replay: --train and --score go together, without FILE.csv "
                   "(see --help)\n");
      return kUsageError;
    }
    return transfer(trainPath, scorePath, options);
  }
  if (files.empty()) {
    std::fprintf(stderr, "autopilot replay: no FILE.csv given (see --help)\n");
    return kUsageError;
  }

  std::printf("%-44s %4s | %-20s | %-20s | %8s  %s\n", "", "", "NCCL default", "after learning", "",
              "");
  std::printf("%-44s %4s | %4s %7s %7s | %4s %7s %7s | %8s  %s\n", "file", "ctx", ">10%", "mean",
              "p99", ">10%", "mean", "p99", "regret", "prior");
  std::vector<FileResult> results;
  std::vector<double> allDefault, allLearned;
  double regretWeighted = 0;
  int failures = 0;
  std::vector<std::string> checkFailures;
  for (const std::string& f : files) {
    if (isRepeatsFile(f)) {
      std::printf("%-44s (noise reference of its base file, not replayed on its own)\n",
                  f.substr(f.rfind('/') + 1).c_str());
      continue;
    }
    FileResult r;
    std::string error;
    if (!replay::replayFile(f, options, &r, &error)) {
      std::fprintf(stderr, "replay: %s\n", error.c_str());
      ++failures;
      continue;
    }
    std::string name = f.substr(f.rfind('/') + 1);
    printRow(name.c_str(), r.defaults.contexts, r.defaults, r.learned, r.regretPct,
             r.prior.rfind("sidecar", 0) == 0 ? "sidecar" : "flat");
    if (perContext) {
      for (const auto& c : r.contexts) {
        std::printf(
            "    %-58s arms %d  default %-14s %6s  best %-24s learned %-24s %6s (mean %s)  "
            "regret %5.2f%%  probes %5.1f  final arm from call %5.1f\n",
            c.label.c_str(), c.arms, c.defaultArm.c_str(), pct(c.defaultLoss).c_str(),
            c.bestArm.c_str(), c.learnedArm.c_str(), pct(c.learnedLoss).c_str(),
            pct(c.learnedLossMean).c_str(), c.regretPct, c.probes, c.settledCall);
      }
    }
    allDefault.insert(allDefault.end(), r.defaultLosses.begin(), r.defaultLosses.end());
    allLearned.insert(allLearned.end(), r.learnedLosses.begin(), r.learnedLosses.end());
    regretWeighted += r.regretPct * r.defaults.contexts;
    if (check && r.defaults.over10pct > 0) {
      if (r.learned.over10pct > 0)
        checkFailures.push_back(name + ": contexts losing > 10% after learning");
      if (r.learned.meanLoss >= 0.01) checkFailures.push_back(name + ": mean loss >= 1%");
      if (r.learned.p99Loss >= 0.05) checkFailures.push_back(name + ": p99 loss >= 5%");
    }
    if (check) {
      for (const auto& c : r.contexts) {
        if ((1 + c.learnedLoss) > (1 + c.defaultLoss) * 1.01) {
          checkFailures.push_back(name + ": " + c.label + " worse than the default by > 1%");
        }
      }
    }
    results.push_back(std::move(r));
  }
  LossSummary od = replay::summarize(allDefault), ol = replay::summarize(allLearned);
  double overallRegret = od.contexts > 0 ? regretWeighted / od.contexts : 0;
  printRow("overall", od.contexts, od, ol, overallRegret, "");
  std::printf(
      "\nlosses vs the best measured arm (one a tuner can choose) per context; learned = worst of "
      "%d runs of %d "
      "calls per context;\nregret = extra time vs always-best over all replayed calls, "
      "while learning.\n",
      options.runs, options.callsPerContext);
  for (const FileResult& r : results) {
    std::printf(
        "  %s: prior %s; noise sigma %.3f (%s); %d rows and %d contexts skipped; "
        "default regret %.2f%%",
        r.file.substr(r.file.rfind('/') + 1).c_str(), r.prior.c_str(), r.noiseSigma,
        r.noiseSource.c_str(), r.skippedRows, r.skippedContexts, r.defaultRegretPct);
    if (r.unofferedArms > 0) {
      std::printf(
          "; %d measured configurations not replayed: IGNORE in the model's table, so never "
          "offered to a tuner (fastest of their context in %d)",
          r.unofferedArms, r.unofferedFastest);
    }
    std::printf("\n");
  }

  if (!jsonPath.empty()) {
    FILE* out = std::fopen(jsonPath.c_str(), "w");
    if (out == nullptr) {
      std::fprintf(stderr, "replay: cannot write %s\n", jsonPath.c_str());
      return 1;
    }
    std::fprintf(out, "{\"files\": [");
    for (size_t i = 0; i < results.size(); ++i) {
      const FileResult& r = results[i];
      std::fprintf(out,
                   "%s\n  {\"file\": \"%s\", \"contexts\": %d, \"default\": %s, \"learned\": %s, "
                   "\"regret_pct\": %.4f, \"default_regret_pct\": %.4f, \"prior\": \"%s\", "
                   "\"noise_sigma\": %.4f, \"skipped_contexts\": %d, \"unoffered_arms\": %d, "
                   "\"unoffered_fastest\": %d}",
                   i ? "," : "", jsonEscape(r.file).c_str(), r.defaults.contexts,
                   summaryJson(r.defaults).c_str(), summaryJson(r.learned).c_str(), r.regretPct,
                   r.defaultRegretPct, jsonEscape(r.prior).c_str(), r.noiseSigma, r.skippedContexts,
                   r.unofferedArms, r.unofferedFastest);
    }
    std::fprintf(out,
                 "\n],\n\"overall\": {\"contexts\": %d, \"default\": %s, \"learned\": %s, "
                 "\"regret_pct\": %.4f},\n\"runs\": %d, \"calls_per_context\": %d}\n",
                 od.contexts, summaryJson(od).c_str(), summaryJson(ol).c_str(), overallRegret,
                 options.runs, options.callsPerContext);
    std::fclose(out);
  }
  if (check) {
    if (ol.over10pct > 0) checkFailures.push_back("overall: contexts losing > 10% after learning");
    if (ol.meanLoss >= 0.005) checkFailures.push_back("overall: mean loss >= 0.5%");
    if (ol.p99Loss >= 0.03) checkFailures.push_back("overall: p99 loss >= 3%");
    if (overallRegret >= 0.5) checkFailures.push_back("overall: regret >= 0.5%");
    for (const std::string& f : checkFailures) std::printf("CHECK FAILED: %s\n", f.c_str());
    if (checkFailures.empty() && failures == 0) std::printf("targets met\n");
  }
  return failures > 0 || !checkFailures.empty() ? 1 : 0;
}

CommandRegistrar reg("replay", cmdReplay,
                     "evaluate the tuner policy by replay on forced-arm measurement files");

}  // namespace
}  // namespace autopilot::cli

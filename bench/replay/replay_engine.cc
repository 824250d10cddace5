#include "bench/replay/replay_engine.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>

#include "bench/replay/forced_arm_csv.h"
#include "model/cost_model.h"
#include "model/topology_description.h"

namespace autopilot::replay {
namespace {

using tuner::BanditPolicy;
using tuner::ContextDecision;
using tuner::kNumCells;

const char* kAlgoNames[abi::kNumAlgorithms] = {
    "Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
const char* kProtoNames[abi::kNumProtocols] = {"LL", "LL128", "Simple"};

bool fileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool readFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::string dirName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string baseName(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string b = slash == std::string::npos ? path : path.substr(slash + 1);
  if (b.size() > 4 && b.compare(b.size() - 4, 4, ".csv") == 0) b.resize(b.size() - 4);
  return b;
}

int indexOf(const char* const* names, int n, const std::string& name) {
  for (int i = 0; i < n; ++i) {
    if (strcasecmp(names[i], name.c_str()) == 0) return i;
  }
  return -1;
}

// nccl-tests' bus bandwidth factor.
double busFactor(int func, int nRanks) {
  if (nRanks < 2) return 1.0;
  if (func == abi::kFuncAllReduce) return 2.0 * (nRanks - 1) / nRanks;
  if (func == abi::kFuncAllGather || func == abi::kFuncReduceScatter) {
    return double(nRanks - 1) / nRanks;
  }
  return 1.0;
}

struct Arm {
  std::string config;  // e.g. "Ring/AUTO"; merged arms list every config
  int cell = -1;
  std::vector<double> samples;
  double truth = 0;
};

struct ReplayContext {
  std::string label;
  int func = -1;
  uint64_t size = 0;
  std::vector<std::pair<std::string, double>> measurements;  // (config, time us)
  std::vector<Arm> arms;
  float table[kNumCells];
  int defaultArm = -1;
  int bestArm = -1;
  int armOfCell[kNumCells];
  int group = -1;  // (system, collective): contexts that share what they learn
};

struct Key {
  std::string system, collective;
  uint64_t size;
  bool inPlace;
  bool operator<(const Key& o) const {
    return std::tie(system, collective, size, inPlace) <
           std::tie(o.system, o.collective, o.size, o.inPlace);
  }
};

class TopologySource {
 public:
  TopologySource(const std::string& csvPath, const ReplayOptions& options) {
    if (options.flatPrior) return;
    std::string name = baseName(csvPath) + ".topo.json";
    for (const std::string& dir : {dirName(csvPath), options.topoDir, options.builtinTopoDir}) {
      if (dir.empty()) continue;
      std::string candidate = dir + "/" + name;
      if (fileExists(candidate) && readFile(candidate, &text_)) {
        path_ = candidate;
        return;
      }
    }
  }
  bool present() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  // The model for one system of the file; NULL when there is no sidecar.
  const tuner::model::CostModel* model(const std::string& system, std::string* error) {
    if (!present()) return nullptr;
    auto it = models_.find(system);
    if (it != models_.end()) return it->second.get();
    tuner::model::Topology topo;
    if (!tuner::topologyFromJson(text_, system, &topo, error)) {
      *error = path_ + ": " + *error;
      return nullptr;
    }
    auto& slot = models_[system];
    slot = std::make_unique<tuner::model::CostModel>(topo);
    return slot.get();
  }

 private:
  std::string path_, text_;
  std::map<std::string, std::unique_ptr<tuner::model::CostModel>> models_;
};

// The cell NCCL would run for a (possibly partly) forced configuration, under the model.
int cellForConfig(const std::string& algoName, const std::string& protoName, const float* full) {
  bool anyAlgo = algoName == "AUTO", anyProto = protoName == "AUTO";
  int algo = anyAlgo ? -1 : indexOf(kAlgoNames, abi::kNumAlgorithms, algoName);
  int proto = anyProto ? -1 : indexOf(kProtoNames, abi::kNumProtocols, protoName);
  if ((!anyAlgo && algo < 0) || (!anyProto && proto < 0)) return -2;  // unknown name
  if (!anyAlgo && !anyProto) return algo * abi::kNumProtocols + proto;
  float restricted[kNumCells];
  for (int c = 0; c < kNumCells; ++c) {
    bool allowed = (anyAlgo || c / abi::kNumProtocols == algo) &&
                   (anyProto || c % abi::kNumProtocols == proto);
    restricted[c] = allowed && full != nullptr ? full[c] : abi::kAlgoProtoIgnore;
  }
  int c = full != nullptr ? tuner::model::ncclChoice(restricted) : -1;
  if (c >= 0) return c;
  // The model has nothing there: keep the row as the restriction's most common cell.
  if (anyAlgo && anyProto) return -1;
  return (anyAlgo ? abi::kAlgoRing : algo) * abi::kNumProtocols +
         (anyProto ? abi::kProtoSimple : proto);
}

// Builds the arms and the policy's cost table; false when the context cannot be evaluated.
// Every measured configuration is its own arm, even when the model maps two of them to the same
// cell (AUTO and Ring/AUTO often do): they were measured separately and can differ (B300: AUTO
// was NVLS). The policy only needs distinct cells, so arm i gets cell i (the default first) and
// the cost the model predicts for the cell NCCL would run under that configuration.
// A configuration whose cell the model marks IGNORE is not an arm: NCCL passes a tuner no cost
// for it, and the plugin never raises an IGNORE cell. Here that is LL128 without NVLink, which
// NCCL leaves off by default (docs/nccl-cost-model.md section 7); the L40S and RTX 5090 files
// measured it forced with NCCL_PROTO. Such configurations are counted in `unoffered`, and in
// `unofferedFastest` when one measured faster than every arm.
bool buildArms(ReplayContext* ctx, const tuner::model::CostModel* model,
               std::map<std::string, int>* cellOf, int* unoffered, bool* unofferedFastest) {
  float full[kNumCells];
  if (model != nullptr)
    model->fillTable(ctx->func, ctx->size, 1, reinterpret_cast<float(*)[3]>(full));
  std::vector<std::string> configs;
  for (const auto& [config, t] : ctx->measurements) {
    if (std::find(configs.begin(), configs.end(), config) == configs.end())
      configs.push_back(config);
  }
  std::stable_partition(configs.begin(), configs.end(),
                        [](const std::string& c) { return c == "AUTO/AUTO"; });
  if (configs.empty() || configs[0] != "AUTO/AUTO") return false;
  std::vector<float> predicted;
  std::vector<double> unofferedTimes;
  for (const std::string& config : configs) {
    // One cell per configuration across the contexts of a system, so that contexts that share
    // what they learn (setShareKey) mean the same arm by the same cell; NCCL's default is cell 0.
    auto known = cellOf->find(config);
    int cell = known != cellOf->end() ? known->second : int(cellOf->size());
    if (cell >= kNumCells) continue;
    // "ALGO/PROTO" or "ALGO/PROTO/Nch": the model has no channel dimension, so a forced channel
    // count gets its cell's prediction (a neutral prior on channels).
    size_t slash = config.find('/');
    size_t end = config.find('/', slash + 1);
    std::string proto = config.substr(slash + 1, end == std::string::npos ? end : end - slash - 1);
    int natural = cellForConfig(config.substr(0, slash), proto, model != nullptr ? full : nullptr);
    if (natural == -2) continue;  // an algorithm or protocol name this model does not know
    if (model != nullptr && (natural < 0 || full[natural] < 0)) {
      ++*unoffered;
      double sum = 0;
      int n = 0;
      for (const auto& [c, t] : ctx->measurements) {
        if (c == config) sum += t, ++n;
      }
      unofferedTimes.push_back(sum / n);
      continue;
    }
    if (known == cellOf->end()) (*cellOf)[config] = cell;
    Arm arm;
    arm.config = config;
    arm.cell = cell;
    for (const auto& [c, t] : ctx->measurements) {
      if (c == config) arm.samples.push_back(t);
    }
    ctx->arms.push_back(arm);
    predicted.push_back(model != nullptr && natural >= 0 ? full[natural] : -1.0f);
  }
  if (ctx->arms.size() < 2) return false;
  for (int c = 0; c < kNumCells; ++c) {
    ctx->table[c] = abi::kAlgoProtoIgnore;
    ctx->armOfCell[c] = -1;
  }
  ctx->defaultArm = 0;
  double best = 1e300;
  for (size_t a = 0; a < ctx->arms.size(); ++a) {
    Arm& arm = ctx->arms[a];
    double sum = 0;
    for (double s : arm.samples) sum += s;
    arm.truth = sum / arm.samples.size();
    if (arm.truth < best) {
      best = arm.truth;
      ctx->bestArm = int(a);
    }
    ctx->armOfCell[arm.cell] = int(a);
  }
  for (double t : unofferedTimes) {
    if (t < best) *unofferedFastest = true;
  }
  // The policy's table: the model's prediction where it has one, the default's (a neutral
  // value) where it has none, everything equal without a model; the default stays NCCL's
  // choice (first strict minimum: it holds cell 0 and the smallest prediction).
  float neutral = predicted[0] > 0 ? predicted[0] : 1.0f;
  for (size_t a = 0; a < ctx->arms.size(); ++a) {
    float v = predicted[a] > 0 ? predicted[a] : neutral;
    ctx->table[ctx->arms[a].cell] = a == 0 ? std::min(v, neutral) : std::max(v, neutral);
  }
  return tuner::model::ncclChoice(ctx->table) == ctx->arms[0].cell;
}

// What identifies an arm across scales of a system: everything but the system's name.
std::string transferKey(const ReplayContext& c, const Arm& arm) {
  size_t bar = c.label.find(" | ");
  return (bar == std::string::npos ? c.label : c.label.substr(bar + 3)) + " | " + arm.config;
}

// Noise sigma from the spread of repeated default measurements (same context, several runs).
double noiseFromRepeats(const std::vector<ReplayContext>& contexts, int* pairs) {
  double sum = 0;
  int dof = 0;
  for (const ReplayContext& c : contexts) {
    const Arm& d = c.arms[c.defaultArm];
    if (d.samples.size() < 2) continue;
    double meanLog = 0;
    for (double s : d.samples) meanLog += std::log(s);
    meanLog /= d.samples.size();
    for (double s : d.samples) sum += (std::log(s) - meanLog) * (std::log(s) - meanLog);
    dof += int(d.samples.size()) - 1;
  }
  *pairs = dof;
  return dof > 0 ? std::sqrt(sum / dof) : -1;
}

}  // namespace

LossSummary summarize(const std::vector<double>& losses) {
  LossSummary s;
  s.contexts = int(losses.size());
  if (losses.empty()) return s;
  std::vector<double> sorted = losses;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double l : sorted) {
    sum += l;
    if (l > 0.10) ++s.over10pct;
  }
  s.meanLoss = sum / sorted.size();
  size_t rank = size_t(std::ceil(0.99 * sorted.size()));
  s.p99Loss = sorted[std::max<size_t>(rank, 1) - 1];
  s.maxLoss = sorted.back();
  return s;
}

bool replayFile(const std::string& csvPath, const ReplayOptions& options, FileResult* out,
                std::string* error) {
  *out = FileResult{};
  out->file = csvPath;
  std::vector<ForcedArmRow> rows;
  int skipped = 0;
  if (!readForcedArmCsv(csvPath, &rows, &skipped, error)) return false;
  out->skippedRows = skipped;
  // Repeated default runs of the same system are extra measurements of the default arm.
  std::string repeats = dirName(csvPath) + "/" + baseName(csvPath) + "_auto_repeats.csv";
  bool haveRepeats = false;
  if (fileExists(repeats)) {
    int s2 = 0;
    std::string err2;
    haveRepeats = readForcedArmCsv(repeats, &rows, &s2, &err2);
  }

  TopologySource topo(csvPath, options);
  out->prior = topo.present() ? "sidecar " + topo.path() : "flat (no sidecar)";

  std::map<Key, ReplayContext> grouped;
  for (const ForcedArmRow& r : rows) {
    int func = collectiveFunc(r.collective);
    std::string config = r.armAlgo + "/" + r.armProto;
    if (r.channels > 0) config += "/" + std::to_string(r.channels) + "ch";
    int nRanks = 0;
    if (topo.present()) {
      std::string err;
      if (const auto* m = topo.model(r.system, &err))
        nRanks = m->topology().nRanks;
      else if (!err.empty()) {
        *error = err;
        return false;
      }
    }
    double oop = r.timeOutOfPlaceUs;
    if (oop < 0 && r.algbwGBps > 0) oop = r.sizeBytes / (r.algbwGBps * 1e3);
    if (oop < 0 && r.busbwGBps > 0) {
      oop = r.sizeBytes / (r.busbwGBps / busFactor(func, nRanks) * 1e3);
    }
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      double t = inPlace ? r.timeInPlaceUs : oop;
      if (t <= 0) continue;
      ReplayContext& c = grouped[Key{r.system, r.collective, r.sizeBytes, inPlace != 0}];
      if (c.label.empty()) {
        c.label = r.system.substr(0, 40) + " | " + r.collective + " " +
                  std::to_string(r.sizeBytes) + (inPlace ? " in-place" : " out-of-place");
        c.func = func;
        c.size = r.sizeBytes;
      }
      c.measurements.emplace_back(config, t);
    }
  }

  std::vector<ReplayContext> contexts;
  std::map<std::string, std::map<std::string, int>> cellsOfSystem;
  std::map<std::string, int> groupOf;
  for (auto& [key, c] : grouped) {
    if (c.func < 0) {
      ++out->skippedContexts;
      continue;
    }
    std::string err;
    const tuner::model::CostModel* model = topo.model(key.system, &err);
    int unoffered = 0;
    bool unofferedFastest = false;
    if (!buildArms(&c, model, &cellsOfSystem[key.system], &unoffered, &unofferedFastest)) {
      ++out->skippedContexts;
      continue;
    }
    out->unofferedArms += unoffered;
    if (unofferedFastest) ++out->unofferedFastest;
    // One share group per (system, collective), in-place and out-of-place together, as in the
    // plugin (Learner: per collective and numPipeOps bucket): NCCL does not tell a tuner whether
    // a call is in place, so what one placement measured must inform the other's sizes too.
    // (Split by placement, each group paid its own first probes: regret 0.53% -> 0.45%, means
    // of 36 seeds.)
    std::string g = key.system + "|" + key.collective;
    auto it = groupOf.emplace(g, int(groupOf.size())).first;
    c.group = it->second;
    contexts.push_back(std::move(c));
  }
  if (contexts.size() > size_t(tuner::kNumContexts)) contexts.resize(tuner::kNumContexts);

  int dof = 0;
  double sigma = haveRepeats ? noiseFromRepeats(contexts, &dof) : -1;
  if (sigma > 0) {
    out->noiseSigma = std::max(sigma, 0.005);
    out->noiseSource = "estimated from " + baseName(repeats) + ".csv (" + std::to_string(dof) +
                       " degrees of freedom)";
  } else {
    out->noiseSigma = options.statedNoise;
    out->noiseSource = "stated";
  }

  const int nCtx = int(contexts.size());
  std::vector<double> worstLearned(nCtx, 0), sumLearned(nCtx, 0);
  std::vector<int> worstArm(nCtx, 0);
  std::vector<double> ctxRegret(nCtx, 0), ctxProbes(nCtx, 0), ctxSettled(nCtx, 0);
  double regretSum = 0, defaultRegretSum = 0;
  for (int run = 0; run < options.runs; ++run) {
    std::mt19937_64 rng(options.seed * 1000003 + run);
    std::normal_distribution<double> n01(0, 1);
    BanditPolicy policy(options.policy);
    std::vector<ContextDecision> decision(nCtx);
    tuner::ExplorationCounters counters;
    counters.reset();
    double spent = 0, bestSpent = 0, defaultSpent = 0;
    std::vector<double> ctxSpent(nCtx, 0);
    std::vector<int> lastIncumbent(nCtx, -1), settled(nCtx, 0);
    for (int i = 0; i < nCtx; ++i) {
      policy.setPrior(i, contexts[i].table);
      if (options.shareAcrossSizes) {
        policy.setShareKey(i, contexts[i].group, std::log2(double(contexts[i].size)));
      }
      if (options.priorCorrections == nullptr) continue;
      tuner::BanditPolicy::ArmValues correction{};
      int found = 0;
      for (const Arm& arm : contexts[i].arms) {
        auto it = options.priorCorrections->find(transferKey(contexts[i], arm));
        if (it == options.priorCorrections->end()) continue;
        correction[arm.cell] = float(it->second);
        ++found;
      }
      if (found > 0) policy.setPriorCorrection(i, correction);
      if (run == 0) out->correctedArms += found;
    }
    for (long k = 0; k < long(options.callsPerContext) * nCtx; ++k) {
      int i = int(k % nCtx);
      const ReplayContext& c = contexts[i];
      const bool learns = c.size >= options.minBytes;
      int forced = learns ? tuner::armForCall(decision[i], i, &counters) : -1;
      int cell = forced >= 0 ? forced : policy.defaultCell(i);
      int armIndex = c.armOfCell[cell];
      if (armIndex < 0) armIndex = c.defaultArm;  // cannot happen: IGNORE cells are never forced
      const Arm& arm = c.arms[armIndex];
      double sample =
          arm.samples[rng() % arm.samples.size()] * std::exp(out->noiseSigma * n01(rng));
      if (learns) policy.observe(i, cell, sample);
      spent += arm.truth;
      ctxSpent[i] += arm.truth;
      if (cell != policy.incumbent(i)) ctxProbes[i] += 1;
      bestSpent += c.arms[c.bestArm].truth;
      defaultSpent += c.arms[c.defaultArm].truth;
      ContextDecision next = learns ? policy.decide(i) : ContextDecision{};
      if (policy.incumbent(i) != lastIncumbent[i]) {
        lastIncumbent[i] = policy.incumbent(i);
        settled[i] = int(k / nCtx) + 1;
      }
      if (next != decision[i]) {
        decision[i] = next;  // as in the plugin: counting restarts where an entry changed
        counters.calls[i] = 0;
        counters.explored[i] = 0;
      }
    }
    for (int i = 0; i < nCtx; ++i) {
      const ReplayContext& c = contexts[i];
      ctxRegret[i] += ctxSpent[i] / (options.callsPerContext * c.arms[c.bestArm].truth) - 1;
      ctxSettled[i] += settled[i];
    }
    if (bestSpent > 0) {
      regretSum += spent / bestSpent - 1;
      defaultRegretSum += defaultSpent / bestSpent - 1;
    }
    if (run == options.runs - 1) {
      for (int i = 0; i < nCtx; ++i) {
        tuner::BanditPolicy::ArmValues correction;
        if (!policy.learnedCorrection(i, &correction)) continue;
        for (const Arm& arm : contexts[i].arms) {
          if (correction[arm.cell] != 0)
            out->corrections[transferKey(contexts[i], arm)] = correction[arm.cell];
        }
      }
    }
    for (int i = 0; i < nCtx; ++i) {
      const ReplayContext& c = contexts[i];
      int a = c.size >= options.minBytes ? c.armOfCell[policy.incumbent(i)] : c.defaultArm;
      if (a < 0) a = c.defaultArm;
      double loss = c.arms[a].truth / c.arms[c.bestArm].truth - 1;
      sumLearned[i] += loss;
      if (run == 0 || loss > worstLearned[i]) {
        worstLearned[i] = loss;
        worstArm[i] = a;
      }
    }
  }

  for (int i = 0; i < nCtx; ++i) {
    const ReplayContext& c = contexts[i];
    ContextResult r;
    r.label = c.label;
    r.arms = int(c.arms.size());
    r.defaultArm = c.arms[c.defaultArm].config;
    r.bestArm = c.arms[c.bestArm].config;
    r.learnedArm = c.arms[worstArm[i]].config;
    r.defaultLoss = c.arms[c.defaultArm].truth / c.arms[c.bestArm].truth - 1;
    r.learnedLoss = worstLearned[i];
    r.learnedLossMean = sumLearned[i] / std::max(options.runs, 1);
    r.regretPct = 100 * ctxRegret[i] / std::max(options.runs, 1);
    r.probes = ctxProbes[i] / std::max(options.runs, 1);
    r.settledCall = ctxSettled[i] / std::max(options.runs, 1);
    out->defaultLosses.push_back(r.defaultLoss);
    out->learnedLosses.push_back(r.learnedLoss);
    out->contexts.push_back(r);
  }
  out->defaults = summarize(out->defaultLosses);
  out->learned = summarize(out->learnedLosses);
  out->regretPct = 100 * regretSum / std::max(options.runs, 1);
  out->defaultRegretPct = 100 * defaultRegretSum / std::max(options.runs, 1);
  return true;
}

}  // namespace autopilot::replay

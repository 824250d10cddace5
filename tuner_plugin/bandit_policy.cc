#include "tuner_plugin/bandit_policy.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/shift_detector.h"
#include "tuner_plugin/nccl_choice.h"

namespace autopilot::tuner {
namespace {

// The incumbent's detector: a baseline from its first 8 samples (the profiler's 32 would leave a
// freshly switched context unguarded for longer), shifts of at least 3 noise units (a floor of
// 5%, so about 16% for a quiet arm) fire on the 5th sample after the step.
ShiftDetectorConfig driftConfig() {
  ShiftDetectorConfig c;
  c.warmup = 8;
  return c;
}

}  // namespace

struct BanditPolicy::ContextState {
  float prior[kNumCells];
  float correction[kNumCells] = {};  // log-space shift of the model's prediction (transfer)
  float shared[kNumCells] = {};      // the same, predicted by the sizes of the group (sharing)
  int group = -1;                    // contexts that share what they learn (setShareKey)
  double logSize = 0;
  int defaultCell = -1;
  int incumbent = -1;
  ArmStats arms[kNumCells];
  // Change points of the incumbent's raw times (a shift the profiler may not have reported, or
  // where no profiler runs). Restarted whenever the incumbent changes or the context re-opens.
  ShiftDetector drift{driftConfig()};
  int driftCell = -1;  // the arm `drift` has been watching
  int playsSinceRefresh = 0;
  // The probe in the current decision and how many of its samples arrived since it was issued:
  // once the budget is spent, a new generation grants a fresh one.
  int probeCell = -1;
  int probesSeen = 0;
  int callsSinceGrant = 0;  // noteCall()s since the grant (PolicyConfig::grantExpiryCalls)
  uint16_t generation = 0;
  // The expected extra time of the granted probes not seen yet, held against the global budget.
  double reserveEach = 0;
  int reserveLeft = 0;
};

namespace {

constexpr double kMinPriorUs = 1e-3;  // a zero cost (forced by someone else) still has a log
bool validCell(int cell) { return cell >= 0 && cell < kNumCells; }

double normalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// For d ~ N(mu, sd^2) (log-time of a candidate minus the incumbent's): the expected saving
// E[max(0, 1 - e^d)] and the expected excess E[max(0, e^d - 1)], as fractions of the
// incumbent's time.
void expectedGainAndExcess(double mu, double sd, double* gain, double* excess) {
  sd = std::max(sd, 1e-9);
  const double z = mu / sd;
  const double scale = std::exp(mu + sd * sd / 2);
  *gain = std::max(0.0, normalCdf(-z) - scale * normalCdf(-z - sd));
  *excess = std::max(0.0, scale * normalCdf(z + sd) - normalCdf(z));
}

void addSample(BanditPolicy::ArmStats* a, double x) {
  double n = std::min(a->n + 1, double(BanditPolicy::kWindow));
  double w = 1.0 / n;
  double delta = x - a->mean;
  a->mean += w * delta;
  a->var = (1 - w) * (a->var + w * delta * delta);
  a->n = n;
}

}  // namespace

BanditPolicy::BanditPolicy(const PolicyConfig& config) : config_(config) {
  contexts_.resize(kNumContexts);
}

BanditPolicy::~BanditPolicy() = default;

BanditPolicy::ContextState* BanditPolicy::state(int ctx) const {
  if (ctx < 0 || ctx >= kNumContexts) return nullptr;
  return contexts_[ctx].get();
}

bool BanditPolicy::setPrior(int ctx, const float cost[kNumCells]) {
  if (ctx < 0 || ctx >= kNumContexts) return false;
  if (contexts_[ctx]) return contexts_[ctx]->defaultCell >= 0;
  auto s = std::make_unique<ContextState>();
  std::memcpy(s->prior, cost, sizeof(s->prior));
  s->defaultCell = ncclChoice(s->prior);
  s->incumbent = s->defaultCell;
  bool usable = s->defaultCell >= 0;
  contexts_[ctx] = std::move(s);
  return usable;
}

bool BanditPolicy::setPriorCorrection(int ctx, const float correction[kNumCells]) {
  ContextState* s = state(ctx);
  if (s == nullptr || s->defaultCell < 0) return false;
  for (int c = 0; c < kNumCells; ++c) {
    float v = correction[c];
    // Bounded: a correction is evidence from elsewhere, never more than a factor e^3.
    s->correction[c] = std::isfinite(v) ? std::clamp(v, -3.0f, 3.0f) : 0.0f;
  }
  return true;
}

bool BanditPolicy::learnedCorrection(int ctx, float correction[kNumCells]) const {
  const ContextState* s = state(ctx);
  if (s == nullptr || s->defaultCell < 0) return false;
  const int D = s->defaultCell;
  bool any = false;
  for (int c = 0; c < kNumCells; ++c) {
    correction[c] = 0;
    if (s->prior[c] < 0 || s->arms[c].n < config_.minSamples || s->arms[D].n < config_.minSamples) {
      continue;
    }
    double measured = s->arms[c].mean - s->arms[D].mean;
    double predicted = std::log(std::max(double(s->prior[c]), kMinPriorUs)) -
                       std::log(std::max(double(s->prior[D]), kMinPriorUs));
    correction[c] = float(measured - predicted);
    any = true;
  }
  return any;
}

void BanditPolicy::setShareKey(int ctx, int group, double logSize) {
  ContextState* s = state(ctx);
  if (s == nullptr || !std::isfinite(logSize)) return;
  s->group = group;
  s->logSize = logSize;
}

// Per (group, cell), a Bayesian linear regression of the model's ratio error y (log measured /
// predicted, relative to NCCL's choice, as learnedCorrection()) over log size: w ~ N(0, diag(
// modelErrorSigma^2, kSlopeSigma^2)) for (intercept at the group's mean log size, slope), each
// context a point with variance noise^2 (1/n_c + 1/n_D) + kShareTau^2 (sizes differ by more
// than noise). Its prediction at a context's size becomes that context's prior shift, so a
// probe at 4 MiB moves the prior at 8 MiB; decisions still need the context's own samples.
void BanditPolicy::refreshShared() {
  constexpr double kSlopeSigma = 0.15;  // per unit of log size (a factor 2 in bytes)
  constexpr double kShareTau = 0.1;
  std::vector<int> groups;
  for (const auto& p : contexts_) {
    if (p && p->group >= 0 && p->defaultCell >= 0 &&
        std::find(groups.begin(), groups.end(), p->group) == groups.end()) {
      groups.push_back(p->group);
    }
  }
  for (int g : groups) {
    for (int c = 0; c < kNumCells; ++c) {
      double sx = 0, sn = 0;
      for (const auto& p : contexts_) {
        if (p && p->group == g && p->defaultCell >= 0) {
          sx += p->logSize;
          sn += 1;
        }
      }
      const double xbar = sn > 0 ? sx / sn : 0;
      // Normal equations A w = b, A = prior precision + sum of weighted outer products.
      double a00 = 1 / (config_.modelErrorSigma * config_.modelErrorSigma);
      double a11 = 1 / (kSlopeSigma * kSlopeSigma), a01 = 0, b0 = 0, b1 = 0;
      int points = 0;
      for (const auto& p : contexts_) {
        if (!p || p->group != g || p->defaultCell < 0 || p->prior[c] < 0) continue;
        const int D = p->defaultCell;
        const ArmStats& ac = p->arms[c];
        const ArmStats& ad = p->arms[D];
        if (c == D || ac.n < config_.minSamples || ad.n < config_.minSamples) continue;
        const double noise = noiseSigma(*p);
        const double y =
            (ac.mean - ad.mean) - (std::log(std::max(double(p->prior[c]), kMinPriorUs)) -
                                   std::log(std::max(double(p->prior[D]), kMinPriorUs)));
        const double w = 1 / (noise * noise * (1 / ac.n + 1 / ad.n) + kShareTau * kShareTau);
        const double d = p->logSize - xbar;
        a00 += w;
        a01 += w * d;
        a11 += w * d * d;
        b0 += w * y;
        b1 += w * y * d;
        ++points;
      }
      const double det = a00 * a11 - a01 * a01;
      const bool fit = points > 0 && det > 0;
      const double m0 = fit ? (a11 * b0 - a01 * b1) / det : 0;
      const double m1 = fit ? (a00 * b1 - a01 * b0) / det : 0;
      for (auto& p : contexts_) {
        if (!p || p->group != g || p->defaultCell < 0) continue;
        const double shift = c == p->defaultCell ? 0 : m0 + m1 * (p->logSize - xbar);
        p->shared[c] = float(std::clamp(shift, -3.0, 3.0));
      }
    }
  }
}

bool BanditPolicy::hasPrior(int ctx) const { return state(ctx) != nullptr; }

int BanditPolicy::defaultCell(int ctx) const {
  const ContextState* s = state(ctx);
  return s ? s->defaultCell : -1;
}

int BanditPolicy::incumbent(int ctx) const {
  const ContextState* s = state(ctx);
  return s ? s->incumbent : -1;
}

const BanditPolicy::ArmStats* BanditPolicy::arm(int ctx, int cell) const {
  const ContextState* s = state(ctx);
  return s && validCell(cell) ? &s->arms[cell] : nullptr;
}

double BanditPolicy::noiseSigma(const ContextState& s) const {
  double weight = 0, sum = 0;
  for (const ArmStats& a : s.arms) {
    if (a.n >= 2) {
      // The weighted variance underestimates with few samples; n/(n-1) corrects it.
      sum += a.n * a.var * a.n / (a.n - 1);
      weight += a.n;
    }
  }
  double sigma = weight >= 4 ? std::sqrt(sum / weight) : config_.defaultNoise;
  return std::max(sigma, config_.noiseFloor);
}

void BanditPolicy::posterior(const ContextState& s, double sigmaObs, double* mean,
                             double* var) const {
  // Calibrate the model's absolute level on the best-measured of the default and the incumbent.
  auto logPrior = [&](int c) {
    return std::log(std::max(double(s.prior[c]), kMinPriorUs)) + s.correction[c] + s.shared[c];
  };
  double offset = 0;
  int anchor = s.arms[s.defaultCell].n > 0                             ? s.defaultCell
               : (validCell(s.incumbent) && s.arms[s.incumbent].n > 0) ? s.incumbent
                                                                       : -1;
  if (anchor >= 0) offset = s.arms[anchor].mean - logPrior(anchor);
  // A model that misses the measured level by a factor F is not trusted on ratios either:
  // the prior spread grows to at least half of log F (a 37x miss allows 37x-off ratios at 2 sd).
  const double sigmaPrior = std::max(config_.modelErrorSigma, std::fabs(offset) / 2);
  const double priorPrecision = 1.0 / (sigmaPrior * sigmaPrior);
  const double obsPrecision = 1.0 / (sigmaObs * sigmaObs);
  for (int c = 0; c < kNumCells; ++c) {
    if (s.prior[c] < 0) continue;
    double precision = priorPrecision + s.arms[c].n * obsPrecision;
    mean[c] =
        ((logPrior(c) + offset) * priorPrecision + s.arms[c].n * s.arms[c].mean * obsPrecision) /
        precision;
    var[c] = 1.0 / precision;
  }
}

void BanditPolicy::noteCall(int ctx) {
  if (ContextState* s = state(ctx)) ++s->callsSinceGrant;
}

void BanditPolicy::observe(int ctx, int cell, double timeUs) {
  ContextState* s = state(ctx);
  if (s == nullptr || s->defaultCell < 0 || !validCell(cell) || s->prior[cell] < 0 ||
      !(timeUs > 0) || !std::isfinite(timeUs)) {
    return;
  }
  const double raw = std::log(timeUs);
  ArmStats& a = s->arms[cell];
  observedUs_ += timeUs;
  if (++sinceShare_ >= kShareEvery) {
    sinceShare_ = 0;
    refreshShared();
  }
  if (cell != s->incumbent && s->arms[s->incumbent].n > 0) {
    probeCostUs_ += std::max(0.0, timeUs - std::exp(s->arms[s->incumbent].mean));
  }
  if (cell == s->probeCell && s->reserveLeft > 0) {
    --s->reserveLeft;
    probeReservedUs_ = std::max(0.0, probeReservedUs_ - s->reserveEach);
  }
  const double sigma = noiseSigma(*s);
  double x = raw;
  if (a.n >= 4) {
    // Winsorise: one descheduled host thread must not move an estimate by a factor.
    double limit = std::max(4 * sigma, 0.3);
    x = std::clamp(x, a.mean - limit, a.mean + limit);
  }
  if (cell == s->incumbent) {
    // Judged on raw times, since Winsorising would hide a real level change.
    if (s->driftCell != cell) {
      s->drift.reset();
      s->driftCell = cell;
    }
    Shift shift = s->drift.update(timeUs);
    if (shift.fired) {
      reopen(ctx);
      a.mean = std::log(shift.baseline * shift.ratio);  // the new level, from the latest samples
      return;
    }
  }
  addSample(&a, x);
  if (cell == s->probeCell) ++s->probesSeen;
  if (cell != s->incumbent) return;
  if (config_.refreshPlays > 0 && ++s->playsSinceRefresh >= config_.refreshPlays) {
    // Periodic refresh: forget part of the confidence in the other arms, so that arms close to
    // the incumbent get re-probed; clearly worse arms stay out of the candidate set.
    s->playsSinceRefresh = 0;
    for (int c = 0; c < kNumCells; ++c) {
      if (c != s->incumbent) s->arms[c].n = std::min(s->arms[c].n, double(config_.minSamples - 1));
    }
  }
}

bool BanditPolicy::probePays(int c, int I, const double* mean, const double* var, int probes,
                             double* each) const {
  // In the context: the expected saving over the horizon against the expected excess of the
  // probes. The horizon: a switch stays in force at least until the next refresh.
  double gain, excess;
  const double mu = mean[c] - mean[I];
  expectedGainAndExcess(mu, std::sqrt(var[c] + var[I]), &gain, &excess);
  const double horizon = config_.refreshPlays > 0 ? config_.refreshPlays : 2000.0;
  if (!(horizon * gain > probes * excess)) return false;
  // Globally: the grant is charged at the expected arm's excess (the point estimate: the
  // lognormal mean of a very uncertain arm is dominated by a tail the first sample settles);
  // measured probes are then charged what they really cost.
  *each = std::max(0.0, std::exp(mu) - 1) * std::exp(mean[I]);
  return probeCostUs_ + probeReservedUs_ + probes * *each <= config_.probeBudget * observedUs_;
}

void BanditPolicy::releaseReserve(ContextState* s) {
  probeReservedUs_ = std::max(0.0, probeReservedUs_ - s->reserveLeft * s->reserveEach);
  s->reserveLeft = 0;
}

void BanditPolicy::reopen(int ctx) {
  ContextState* s = state(ctx);
  if (s == nullptr) return;
  ++reopens_;
  for (int c = 0; c < kNumCells; ++c) {
    ArmStats& a = s->arms[c];
    if (c == s->incumbent) {
      a.n = std::min(a.n, 2.0);
    } else {
      a = ArmStats{};  // back to the prior: plausible arms get probed again
    }
  }
  s->drift.reset();
  s->playsSinceRefresh = 0;
}

void BanditPolicy::reopenAll() {
  for (int ctx = 0; ctx < kNumContexts; ++ctx) {
    if (contexts_[ctx]) reopen(ctx);
  }
}

ContextDecision BanditPolicy::decide(int ctx) {
  ContextState* s = state(ctx);
  if (s == nullptr || s->defaultCell < 0) return {};
  if (!validCell(s->incumbent) || s->prior[s->incumbent] < 0) s->incumbent = s->defaultCell;
  const int D = s->defaultCell;
  if (s->arms[s->incumbent].n == 0 && s->arms[D].n == 0) return {};  // measure NCCL's own first

  const double sigmaObs = noiseSigma(*s);
  double mean[kNumCells], var[kNumCells];
  posterior(*s, sigmaObs, mean, var);
  const double gainLog = std::log(1 - config_.minGain);

  // Exploitation: switch only to an arm confidently better than the incumbent.
  int I = s->incumbent;
  int best = I;
  for (int c = 0; c < kNumCells; ++c) {
    if (c == I || s->prior[c] < 0 || s->arms[c].n < config_.minSamples) continue;
    double sd = std::sqrt(var[c] + var[I]);
    if (mean[c] < mean[I] + gainLog && mean[c] + config_.switchZ * sd < mean[I] &&
        mean[c] < mean[best]) {
      best = c;
    }
  }
  if (best != I) {
    s->incumbent = I = best;  // its detector restarts with its next sample
    s->playsSinceRefresh = 0;
  }

  ContextDecision d;
  d.primary = int8_t(I == D ? -1 : I);
  if (!config_.explore) return d;
  // Exploration: among the arms whose optimistic estimate beats the incumbent, the most
  // optimistic one whose probe pays for itself and fits the budget; a grant not used up yet
  // continues while its arm stays plausible.
  const int budget = std::clamp(config_.exploreBudget, 1, 255);
  const double limit = mean[I] + gainLog;
  auto optimistic = [&](int c) { return mean[c] - config_.exploreZ * std::sqrt(var[c]); };
  auto plausible = [&](int c) {
    return c != I && s->prior[c] >= 0 && s->arms[c].n < config_.maxExploreSamples &&
           optimistic(c) < limit;
  };
  const bool expired =
      config_.grantExpiryCalls > 0 && s->callsSinceGrant >= config_.grantExpiryCalls;
  const bool running =
      validCell(s->probeCell) && s->probesSeen < budget && !expired && plausible(s->probeCell);
  if (!running) {
    releaseReserve(s);
    s->probeCell = -1;
    int candidate = -1;
    double bestLcb = limit, candidateEach = 0;
    for (int c = 0; c < kNumCells; ++c) {
      double each;
      if (plausible(c) && optimistic(c) < bestLcb && probePays(c, I, mean, var, budget, &each)) {
        bestLcb = optimistic(c);
        candidate = c;
        candidateEach = each;
      }
    }
    if (candidate < 0) return d;
    ++s->generation;
    s->probeCell = candidate;
    s->probesSeen = 0;
    s->callsSinceGrant = 0;
    s->reserveEach = candidateEach;
    s->reserveLeft = budget;
    probeReservedUs_ += budget * candidateEach;
  }
  d.explore = int8_t(s->probeCell);
  d.period = uint8_t(std::clamp(config_.explorePeriod, 1, 255));
  d.budget = uint8_t(budget);
  d.generation = s->generation;
  return d;
}

std::vector<BanditPolicy::ContextRecord> BanditPolicy::snapshot() const {
  std::vector<ContextRecord> out;
  for (int ctx = 0; ctx < kNumContexts; ++ctx) {
    const ContextState* s = contexts_[ctx].get();
    if (s == nullptr || s->defaultCell < 0) continue;
    bool measured = false;
    for (const ArmStats& a : s->arms) measured = measured || a.n > 0;
    if (!measured) continue;  // nothing learned here
    ContextRecord r;
    r.ctx = ctx;
    std::memcpy(r.prior, s->prior, sizeof(r.prior));
    r.incumbent = s->incumbent;
    std::memcpy(r.arms, s->arms, sizeof(r.arms));
    out.push_back(r);
  }
  return out;
}

bool BanditPolicy::restore(const ContextRecord& r, double maxSamples) {
  if (r.ctx < 0 || r.ctx >= kNumContexts) return false;
  auto s = std::make_unique<ContextState>();
  std::memcpy(s->prior, r.prior, sizeof(s->prior));
  s->defaultCell = ncclChoice(s->prior);
  if (s->defaultCell < 0) return false;
  s->incumbent =
      validCell(r.incumbent) && s->prior[r.incumbent] >= 0 ? r.incumbent : s->defaultCell;
  for (int c = 0; c < kNumCells; ++c) {
    ArmStats a = r.arms[c];
    if (!(a.n >= 0) || !std::isfinite(a.mean) || !(a.var >= 0) || !std::isfinite(a.var) ||
        s->prior[c] < 0) {
      a = ArmStats{};
    }
    a.n = std::min({a.n, maxSamples, double(kWindow)});
    s->arms[c] = a;
  }
  contexts_[r.ctx] = std::move(s);
  return true;
}

}  // namespace autopilot::tuner

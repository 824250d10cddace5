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
  float prior[kNumArms];
  float correction[kNumArms] = {};  // log-space shift of the model's prediction (transfer)
  float shared[kNumArms] = {};      // the same, predicted by the sizes of the group (sharing)
  float sharedVar[kNumArms] = {};   // that prediction's variance (0: no prediction)
  bool sharedSeen[kNumArms] = {};   // the group had measured the arm at the last refresh
  int group = -1;                   // index in groups_ (setShareKey), -1: shares nothing
  double logSize = 0;
  int defaultCell = -1;
  int incumbent = -1;
  ArmStats arms[kNumArms];
  // Change points of the incumbent's raw times (a shift the profiler may not have reported, or
  // where no profiler runs). Restarted whenever the incumbent changes or the context re-opens.
  ShiftDetector drift{driftConfig()};
  int driftCell = -1;  // the arm `drift` has been watching
  int playsSinceRefresh = 0;
  // The probe in the current decision and how many of its samples arrived since it was issued:
  // once the budget is spent, a new generation grants a fresh one.
  int probeCell = -1;
  int probesSeen = 0;
  int grantProbes = 0;      // probes granted: exploreBudget, or one if the global budget allows
                            // no more
  int callsSinceGrant = 0;  // noteCall()s since the grant (PolicyConfig::grantExpiryCalls)
  uint16_t generation = 0;
  // The expected extra time of the granted probes not seen yet, held against the global budget.
  double reserveEach = 0;
  int reserveLeft = 0;
};

namespace {

constexpr int kSizeBucketsMax = 64;   // points per cell of a group (48 size buckets in the plugin)
constexpr double kMinPriorUs = 1e-3;  // a zero cost (forced by someone else) still has a log
bool validArm(int arm) { return arm >= 0 && arm < kNumArms; }

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
  for (int a = 0; a < kNumArms; ++a) s->prior[a] = a < kNumCells ? cost[a] : -1.0f;
  s->defaultCell = ncclChoice(s->prior);
  s->incumbent = s->defaultCell;
  bool usable = s->defaultCell >= 0;
  contexts_[ctx] = std::move(s);
  return usable;
}

bool BanditPolicy::addHalvedChannelArm(int ctx, int cell) {
  ContextState* s = state(ctx);
  if (s == nullptr || s->defaultCell < 0 || cell < 0 || cell >= kNumCells || s->prior[cell] < 0)
    return false;
  s->prior[halvedChannelArm(cell)] = s->prior[cell];
  return true;
}

bool BanditPolicy::addHalvedChunkArm(int ctx, int cell) {
  ContextState* s = state(ctx);
  if (s == nullptr || s->defaultCell < 0 || cell < 0 || cell >= kNumCells || s->prior[cell] < 0 ||
      !cellTakesChunkSize(cell))
    return false;
  s->prior[halvedChunkArm(cell)] = s->prior[cell];
  return true;
}

bool BanditPolicy::setPriorCorrection(int ctx, const ArmValues& correction) {
  ContextState* s = state(ctx);
  if (s == nullptr || s->defaultCell < 0) return false;
  for (int c = 0; c < kNumArms; ++c) {
    float v = correction[c];
    // Bounded: a correction is evidence from elsewhere, never more than a factor e^3.
    s->correction[c] = std::isfinite(v) ? std::clamp(v, -3.0f, 3.0f) : 0.0f;
  }
  return true;
}

namespace {
// log(measured / predicted) per cell relative to NCCL's choice D, where both have minSamples.
bool correctionFrom(const float* prior, const BanditPolicy::ArmStats* arms, int D, int minSamples,
                    float* correction) {
  bool any = false;
  for (int c = 0; c < kNumArms; ++c) {
    correction[c] = 0;
    if (D < 0 || prior[c] < 0 || arms[c].n < minSamples || arms[D].n < minSamples) continue;
    double measured = arms[c].mean - arms[D].mean;
    double predicted = std::log(std::max(double(prior[c]), kMinPriorUs)) -
                       std::log(std::max(double(prior[D]), kMinPriorUs));
    correction[c] = float(measured - predicted);
    any = true;
  }
  return any;
}
}  // namespace

bool BanditPolicy::learnedCorrection(int ctx, ArmValues* correction) const {
  const ContextState* s = state(ctx);
  if (s == nullptr || s->defaultCell < 0) return false;
  return correctionFrom(s->prior, s->arms, s->defaultCell, config_.minSamples, correction->data());
}

bool BanditPolicy::correctionOf(const ContextRecord& r, int minSamples, ArmValues* correction) {
  for (int c = 0; c < kNumArms; ++c) {
    const ArmStats& a = r.arms[c];
    // A record from a file: only finite, bounded values count (the parser checks them too).
    if (!(a.n >= 0) || !std::isfinite(a.mean) || !std::isfinite(a.var)) {
      correction->fill(0.0f);
      return false;
    }
  }
  return correctionFrom(r.prior, r.arms, ncclChoice(r.prior), minSamples, correction->data());
}

float BanditPolicy::priorCorrection(int ctx, int cell) const {
  const ContextState* s = state(ctx);
  return s != nullptr && validArm(cell) ? s->correction[cell] : 0.0f;
}

void BanditPolicy::setShareKey(int ctx, int group, double logSize) {
  ContextState* s = state(ctx);
  if (s == nullptr || !std::isfinite(logSize)) return;
  if (s->group >= 0) {
    auto& old = groups_[s->group].members;
    old.erase(std::remove(old.begin(), old.end(), ctx), old.end());
    s->group = -1;
  }
  s->logSize = logSize;
  if (group < 0) return;
  auto it = std::find_if(groups_.begin(), groups_.end(),
                         [&](const ShareGroup& g) { return g.key == group; });
  if (it == groups_.end()) {
    groups_.push_back(ShareGroup{group, {}});
    it = groups_.end() - 1;
  }
  it->members.push_back(ctx);
  s->group = int(it - groups_.begin());
  refreshGroup(*it);  // a size first seen late starts from what its group knows
}

// Per (group, cell), the model's ratio error y (log measured / predicted, relative to NCCL's
// choice, as learnedCorrection()) is estimated at each size from the sizes measured nearby: a
// normal prior N(0, modelErrorSigma^2), each measured context a point with variance noise^2
// (1/n_c + 1/n_D) + tau^2, weighted by a Gaussian kernel over the distance in log2 size (a
// point two sizes away counts e^-2 as much). The estimate becomes the context's prior shift, so
// a probe at 4 MiB moves the prior at 8 MiB; its variance plus tau^2 becomes the prior's spread
// where that is narrower, so the next size need not probe an arm the model was confirmed on.
// Far from any point both fall back to the model's own prior. While a cell has been measured
// at one size only, tau is half the model's spread (below); from two sizes on, it is at least
// kShareTau and grows to the scatter the points leave around their neighbours' estimate (leave
// one out): a ratio error that jumps between sizes (a protocol that wins at small sizes only)
// keeps the spread wide rather than hiding an arm where it is better. Decisions still need
// each context's own samples.
void BanditPolicy::refreshGroup(ShareGroup& g) {
  constexpr double kLength = 1.0;    // kernel length in units of log2 size
  constexpr double kShareTau = 0.1;  // sizes differ by more than noise at least this much
  // One size alone cannot tell a model error common to all sizes from one of its own; two can
  // (their scatter is what the leave-one-out check sees). A lone point is therefore taken as
  // common only within a scatter of half the model's own spread: it moves its neighbours'
  // prior most of the way (0.7 of its error at the next size) and narrows it from 0.5 to
  // about 0.37. Before, it predicted nothing, and every size paid for an arm's first probe
  // until two had; on the forced-arm files, where one LL probe costs up to 35 calls of a
  // 4-8 MiB all-gather over sockets, the replay's regret was 0.56% (mean of 36 seeds), now
  // 0.53%. Taken as wholly common (the floor's scatter), 0.52%, but then a neighbour no
  // longer checks an arm that one size has ruled out.
  const double loneTau2 = 0.25 * config_.modelErrorSigma * config_.modelErrorSigma;
  // The points of one cell: (log size, y, noise variance).
  struct Point {
    double x, y, v;
  };
  Point pts[kSizeBucketsMax];
  for (int c = 0; c < kNumArms; ++c) {
    int n = 0;
    for (int ctx : g.members) {
      const ContextState& p = *contexts_[ctx];
      const int D = p.defaultCell;
      if (D < 0 || c == D || p.prior[c] < 0 || p.arms[c].n < 1 || p.arms[D].n < 1) continue;
      if (n == kSizeBucketsMax) break;
      const double noise = noiseSigma(p);
      pts[n++] = {
          p.logSize,
          (p.arms[c].mean - p.arms[D].mean) - (std::log(std::max(double(p.prior[c]), kMinPriorUs)) -
                                               std::log(std::max(double(p.prior[D]), kMinPriorUs))),
          noise * noise * (1 / p.arms[c].n + 1 / p.arms[D].n)};
    }
    const double prior0 = 1 / (config_.modelErrorSigma * config_.modelErrorSigma);
    // Kernel-weighted estimate at x from the points (skipping index `skip`), tau2 per point.
    auto estimate = [&](double x, int skip, double tau2, double* mean, double* var) {
      double a = prior0, b = 0;
      for (int i = 0; i < n; ++i) {
        if (i == skip) continue;
        const double d = (pts[i].x - x) / kLength;
        const double w = std::exp(-0.5 * d * d) / (pts[i].v + tau2);
        a += w;
        b += w * pts[i].y;
      }
      *mean = b / a;
      *var = 1 / a;
    };
    double tau2 = kShareTau * kShareTau;
    if (n >= 2) {
      double excess = 0;
      for (int i = 0; i < n; ++i) {
        double m, v;
        estimate(pts[i].x, i, tau2, &m, &v);
        const double r = pts[i].y - m;
        excess += r * r - pts[i].v - v;
      }
      tau2 = std::max(tau2, excess / n);
    } else {
      tau2 = std::max(tau2, loneTau2);
    }
    for (int ctx : g.members) {
      ContextState& p = *contexts_[ctx];
      if (p.defaultCell < 0) continue;
      const bool predicts = n >= 1 && c != p.defaultCell;
      double m = 0, v = 0;
      if (predicts) estimate(p.logSize, -1, tau2, &m, &v);
      p.shared[c] = float(std::clamp(m, -3.0, 3.0));
      p.sharedVar[c] = predicts ? float(v + tau2) : 0.0f;
      p.sharedSeen[c] = n > 0;
    }
  }
}

void BanditPolicy::refreshShared() {
  for (ShareGroup& g : groups_) refreshGroup(g);
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

const BanditPolicy::ArmStats* BanditPolicy::arm(int ctx, int a) const {
  const ContextState* s = state(ctx);
  return s && validArm(a) ? &s->arms[a] : nullptr;
}

double BanditPolicy::noiseSigma(const ContextState& s, double* dof) const {
  double weight = 0, sum = 0, freedom = 0;
  for (const ArmStats& a : s.arms) {
    if (a.n >= 2) {
      // The weighted variance underestimates with few samples; n/(n-1) corrects it.
      sum += a.n * a.var * a.n / (a.n - 1);
      weight += a.n;
      freedom += a.n - 1;
    }
  }
  const bool estimated = weight >= 4;
  if (dof != nullptr) *dof = estimated ? freedom : 0;  // 0: the assumed default, not estimated
  double sigma = estimated ? std::sqrt(sum / weight) : config_.defaultNoise;
  return std::max(sigma, config_.noiseFloor);
}

namespace {
// The Student-t quantile at the normal quantile z with `dof` degrees of freedom (Cornish-Fisher,
// two terms): a difference judged against a noise level estimated from few samples needs more
// of that level to be as sure (z 3 at 8 degrees of freedom: 4.2; at 50: 3.2).
double studentZ(double z, double dof) {
  if (!(dof > 0)) return z;
  const double z3 = z * z * z, z5 = z3 * z * z;
  return z + (z3 + z) / (4 * dof) + (5 * z5 + 16 * z3 + 3 * z) / (96 * dof * dof);
}
}  // namespace

void BanditPolicy::posterior(const ContextState& s, double sigmaObs, bool narrowed, double* mean,
                             double* var) const {
  // Calibrate the model's absolute level on the best-measured of the default and the incumbent.
  auto logPrior = [&](int c) {
    return std::log(std::max(double(s.prior[c]), kMinPriorUs)) + s.correction[c] + s.shared[c];
  };
  double offset = 0;
  int anchor = s.arms[s.defaultCell].n > 0                            ? s.defaultCell
               : (validArm(s.incumbent) && s.arms[s.incumbent].n > 0) ? s.incumbent
                                                                      : -1;
  if (anchor >= 0) offset = s.arms[anchor].mean - logPrior(anchor);
  // A model that misses the measured level by a factor F is not trusted on ratios either:
  // the prior spread grows to at least half of log F (a 37x miss allows 37x-off ratios at 2 sd).
  const double sigmaPrior = std::max(config_.modelErrorSigma, std::fabs(offset) / 2);
  const double obsPrecision = 1.0 / (sigmaObs * sigmaObs);
  // A model that missed a measured arm of this context by a factor F is not trusted on the
  // others beyond F either (one sd): the sizes' shared spread never hides an arm there.
  // Only cells count: the model has no channel or chunk dimension, so a halved arm that beats
  // its cell's prior says nothing about how well the model ranks the cells.
  double miss = 0;
  if (anchor >= 0) {
    for (int c = 0; c < kNumCells; ++c) {
      if (s.prior[c] >= 0 && c != anchor && s.arms[c].n >= 1)
        miss = std::max(miss, std::fabs(s.arms[c].mean - (logPrior(c) + offset)));
    }
  }
  for (int c = 0; c < kNumArms; ++c) {
    if (s.prior[c] < 0) continue;
    // Where the group's sizes predict this arm's ratio error more tightly, that spread holds.
    double priorVar = sigmaPrior * sigmaPrior;
    if (narrowed && s.sharedVar[c] > 0) priorVar = std::min(priorVar, double(s.sharedVar[c]));
    priorVar = std::max(priorVar, miss * miss);
    const double priorPrecision = 1.0 / priorVar;
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

void BanditPolicy::observe(int ctx, int arm, double timeUs) {
  ContextState* s = state(ctx);
  if (s == nullptr || s->defaultCell < 0 || !validArm(arm) || s->prior[arm] < 0 || !(timeUs > 0) ||
      !std::isfinite(timeUs)) {
    return;
  }
  const double raw = std::log(timeUs);
  ArmStats& a = s->arms[arm];
  observedUs_ += timeUs;
  probeCreditUs_ += config_.probeBudget * timeUs;
  if (++sinceShare_ >= kShareEvery) {
    sinceShare_ = 0;
    refreshShared();
  }
  if (arm != s->incumbent && s->arms[s->incumbent].n > 0) {
    const double excess = std::max(0.0, timeUs - std::exp(s->arms[s->incumbent].mean));
    probeCostUs_ += excess;
    probeCreditUs_ -= excess;
  }
  if (config_.probeWindowUs > 0) {
    probeCreditUs_ = std::min(probeCreditUs_, config_.probeBudget * config_.probeWindowUs);
  }
  if (arm == s->probeCell && s->reserveLeft > 0) {
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
  if (arm == s->incumbent) {
    // Judged on raw times, since Winsorising would hide a real level change.
    if (s->driftCell != arm) {
      s->drift.reset();
      s->driftCell = arm;
    }
    Shift shift = s->drift.update(timeUs);
    if (shift.fired) {
      reopen(ctx);
      a.mean = std::log(shift.baseline * shift.ratio);  // the new level, from the latest samples
      return;
    }
  }
  addSample(&a, x);
  if (arm == s->probeCell) ++s->probesSeen;
  // The group's first measurement of an arm: every size sees it now, not kShareEvery later
  // (once per arm and context: a.n is 1 only after the arm's first sample since a re-open).
  if (s->group >= 0 && arm != s->defaultCell && !s->sharedSeen[arm] && a.n == 1)
    refreshGroup(groups_[s->group]);
  if (arm != s->incumbent) return;
  if (config_.refreshPlays > 0 && ++s->playsSinceRefresh >= config_.refreshPlays) {
    // Periodic refresh: forget part of the confidence in the other arms, so that arms close to
    // the incumbent get re-probed; clearly worse arms stay out of the candidate set.
    s->playsSinceRefresh = 0;
    for (int c = 0; c < kNumArms; ++c) {
      if (c != s->incumbent) s->arms[c].n = std::min(s->arms[c].n, double(config_.minSamples - 1));
    }
  }
}

int BanditPolicy::probesThatPay(int c, int I, const double* mean, const double* var, bool measured,
                                int probes, double* each) const {
  // In the context: the expected saving over the horizon against the expected excess of the
  // probes. The horizon: a switch stays in force at least until the next refresh.
  double gain, excess;
  const double mu = mean[c] - mean[I];
  expectedGainAndExcess(mu, std::sqrt(var[c] + var[I]), &gain, &excess);
  const double horizon = config_.refreshPlays > 0 ? config_.refreshPlays : 2000.0;
  if (!(horizon * gain > probes * excess)) return 0;
  // Globally: the grant is charged at the expected arm's excess (the point estimate: the
  // lognormal mean of a very uncertain arm is dominated by a tail the first sample settles);
  // measured probes are then charged what they really cost.
  // A grant the budget cannot pay in full shrinks to one probe: early in a job the budget
  // is small, and one probe already shows whether an arm the model placed above is any good.
  *each = std::max(0.0, std::exp(mu) - 1) * std::exp(mean[I]);
  // An arm that its own samples place below the incumbent is expected to save time: its probes
  // need no budget, even while earlier probes have overspent it (a probe that turns out slower
  // is charged all the same, and then the arm's estimate rises above the incumbent's).
  if (measured && mu < 0) return probes;
  const double left = probeCreditUs_ - probeReservedUs_;
  if (probes * *each <= left) return probes;
  if (*each <= left) return 1;
  // A probe dearer than all a window can save (a large collective's) is paid as before windows,
  // from the whole job's savings, alone; the debt it leaves holds every other probe until the
  // budget has paid it back. Otherwise it would never be probed: on the forced-arm data, with a
  // 5 s window, the four GB200 contexts kept NCCL's choice and lost 21% each.
  const bool dear =
      config_.probeWindowUs > 0 && *each > config_.probeBudget * config_.probeWindowUs;
  return dear && *each <= config_.probeBudget * observedUs_ - probeCostUs_ - probeReservedUs_ ? 1
                                                                                              : 0;
}

void BanditPolicy::releaseReserve(ContextState* s) {
  probeReservedUs_ = std::max(0.0, probeReservedUs_ - s->reserveLeft * s->reserveEach);
  s->reserveLeft = 0;
}

void BanditPolicy::reopen(int ctx) {
  ContextState* s = state(ctx);
  if (s == nullptr) return;
  ++reopens_;
  for (int c = 0; c < kNumArms; ++c) {
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
  if (!validArm(s->incumbent) || s->prior[s->incumbent] < 0) s->incumbent = s->defaultCell;
  const int D = s->defaultCell;
  if (s->arms[s->incumbent].n == 0 && s->arms[D].n == 0) return {};  // measure NCCL's own first

  double dof = 0;
  const double sigmaObs = noiseSigma(*s, &dof);
  double mean[kNumArms], var[kNumArms];
  // A switch rests on this context's own samples and the model's own spread: what other sizes
  // vouch for may choose what to probe, never make a switch confident.
  posterior(*s, sigmaObs, false, mean, var);
  const double gainLog = std::log(1 - config_.minGain);

  // Exploitation: switch only to an arm confidently better than the incumbent.
  const double zSwitch = studentZ(config_.switchZ, dof);
  int I = s->incumbent;
  int best = I;
  for (int c = 0; c < kNumArms; ++c) {
    if (c == I || s->prior[c] < 0 || s->arms[c].n < config_.minSamples) continue;
    double sd = std::sqrt(var[c] + var[I]);
    if (mean[c] < mean[I] + gainLog && mean[c] + zSwitch * sd < mean[I] && mean[c] < mean[best]) {
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
  posterior(*s, sigmaObs, true, mean, var);
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
  const bool running = validArm(s->probeCell) && s->probesSeen < s->grantProbes && !expired &&
                       plausible(s->probeCell);
  if (!running) {
    releaseReserve(s);
    s->probeCell = -1;
    int candidate = -1;
    double bestLcb = limit, candidateEach = 0;
    int candidateProbes = budget;
    for (int c = 0; c < kNumArms; ++c) {
      if (!plausible(c)) continue;
      if (optimistic(c) >= bestLcb) continue;
      double each;
      const int probes = probesThatPay(c, I, mean, var, s->arms[c].n > 0, budget, &each);
      if (probes > 0) {
        bestLcb = optimistic(c);
        candidate = c;
        candidateEach = each;
        candidateProbes = probes;
      }
    }
    if (candidate < 0) return d;
    ++s->generation;
    s->probeCell = candidate;
    s->probesSeen = 0;
    s->callsSinceGrant = 0;
    s->reserveEach = candidateEach;
    s->grantProbes = candidateProbes;
    s->reserveLeft = candidateProbes;
    probeReservedUs_ += candidateProbes * candidateEach;
  }
  d.explore = int8_t(s->probeCell);
  d.period = uint8_t(std::clamp(config_.explorePeriod, 1, 255));
  d.budget = uint8_t(s->grantProbes);
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
  // A halved arm exists where the record gives its channel count, a halved-chunk arm where
  // the record has it; both with their cell's prior.
  for (int c = 0; c < kNumCells; ++c) {
    s->prior[halvedChannelArm(c)] =
        r.halvedChannels[c] > 0 && cellTakesChannelCount(c) ? s->prior[c] : -1.0f;
    s->prior[halvedChunkArm(c)] =
        r.prior[halvedChunkArm(c)] >= 0 && cellTakesChunkSize(c) ? s->prior[c] : -1.0f;
  }
  s->incumbent = validArm(r.incumbent) && s->prior[r.incumbent] >= 0 ? r.incumbent : s->defaultCell;
  for (int c = 0; c < kNumArms; ++c) {
    ArmStats a = r.arms[c];
    if (!(a.n >= 0) || !std::isfinite(a.mean) || !(a.var >= 0) || !std::isfinite(a.var) ||
        s->prior[c] < 0) {
      a = ArmStats{};
    }
    a.n = std::min({a.n, maxSamples, double(kWindow)});
    s->arms[c] = a;
  }
  if (ContextState* old = contexts_[r.ctx].get(); old != nullptr && old->group >= 0) {
    auto& members = groups_[old->group].members;
    members.erase(std::remove(members.begin(), members.end(), r.ctx), members.end());
  }
  contexts_[r.ctx] = std::move(s);
  return true;
}

}  // namespace autopilot::tuner

#include "common/shift_detector.h"

#include <algorithm>
#include <cmath>

namespace autopilot {

ShiftDetector::ShiftDetector(ShiftDetectorConfig config) : config_(config) {
  config_.warmup = std::clamp(config_.warmup, 2, kMaxWarmup);
  if (!(config_.minSigma > 0)) config_.minSigma = 0.05;
  if (!(config_.clip > config_.drift)) config_.clip = config_.drift + 1.0;
}

double ShiftDetector::baseline() const { return ready() ? std::exp(mu_) : 0.0; }

void ShiftDetector::reset() {
  nWarm_ = 0;
  sumPos_ = sumNeg_ = 0.0;
  runPos_ = runNeg_ = 0;
  nRecent_ = 0;
}

void ShiftDetector::learnBaseline() {
  int n = config_.warmup;
  std::array<double, kMaxWarmup> sorted = warm_;
  std::nth_element(sorted.begin(), sorted.begin() + n / 2, sorted.begin() + n);
  mu_ = sorted[n / 2];
  for (int i = 0; i < n; ++i) sorted[i] = std::fabs(warm_[i] - mu_);
  std::nth_element(sorted.begin(), sorted.begin() + n / 2, sorted.begin() + n);
  sigma_ = std::max(1.4826 * sorted[n / 2], config_.minSigma);
}

Shift ShiftDetector::update(double value) {
  Shift out;
  if (!(value > 0) || !std::isfinite(value)) return out;
  ++values_;
  double x = std::log(value);
  if (!ready()) {
    warm_[nWarm_++] = x;
    if (ready()) learnBaseline();
    return out;
  }
  double z = std::clamp((x - mu_) / sigma_, -config_.clip, config_.clip);
  recent_[nRecent_++ % kRecent] = x;

  auto step = [&](double& sum, uint32_t& run, double& muAtStart, double increment) {
    double next = sum + increment - config_.drift;
    if (run == 0) muAtStart = mu_;
    sum = next > 0 ? next : 0;
    run = next > 0 ? run + 1 : 0;
  };
  step(sumPos_, runPos_, muAtStartPos_, z);
  step(sumNeg_, runNeg_, muAtStartNeg_, -z);

  bool up = sumPos_ > config_.threshold;
  bool down = sumNeg_ > config_.threshold;
  if (!up && !down) {
    // In control: let the baseline follow, with clipped deviations so that a beginning shift
    // moves it by at most adapt × clip × sigma per value.
    double d = std::clamp(x - mu_, -config_.clip * sigma_, config_.clip * sigma_);
    mu_ += config_.adapt * d;
    // Mean absolute deviation × sqrt(pi/2) estimates sigma for Gaussian noise.
    sigma_ = std::max(config_.minSigma, sigma_ + config_.adapt * (std::fabs(d) * 1.2533 - sigma_));
    return out;
  }
  uint32_t run = up ? runPos_ : runNeg_;
  int n = int(std::min<uint64_t>({uint64_t(run), uint64_t(kRecent), nRecent_}));
  double logSum = 0;
  for (int i = 1; i <= n; ++i) logSum += recent_[(nRecent_ - uint64_t(i)) % kRecent];
  double reference = up ? muAtStartPos_ : muAtStartNeg_;
  out.fired = true;
  out.baseline = std::exp(reference);
  out.valuesAfterStart = run;
  out.ratio = n > 0 ? std::exp(logSum / n - reference) : 1.0;
  ++shifts_;
  reset();  // re-learn the baseline at the new level
  return out;
}

}  // namespace autopilot

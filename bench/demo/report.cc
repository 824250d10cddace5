#include "bench/demo/report.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "bench/demo/collectives.h"
#include "common/abi/nccl_abi.h"

namespace autopilot::demo {

double sumPrometheusMetric(const std::string& dir, const std::string& metric) {
  double total = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.compare(name.size() - 5, 5, ".prom") != 0) continue;
    std::ifstream f(dir + "/" + name);
    std::string line;
    while (std::getline(f, line)) {
      if (line.compare(0, metric.size(), metric) != 0) continue;
      char next = line.size() > metric.size() ? line[metric.size()] : '\0';
      if (next != '{' && next != ' ') continue;
      size_t space = line.rfind(' ');
      if (space != std::string::npos) total += std::strtod(line.c_str() + space + 1, nullptr);
    }
  }
  closedir(d);
  return total;
}

RailEventLedger::Charge RailEventLedger::read(int phase, double failoversTotal,
                                              double recoveriesTotal, double nowS) {
  Charge c;
  // Nothing is charged twice or negative (see the class comment).
  c.failovers = std::max(0.0, failoversTotal - failoversBase_);
  c.recoveries = std::max(0.0, recoveriesTotal - recoveriesBase_);
  failoversBase_ = std::max(failoversBase_, failoversTotal);
  recoveriesBase_ = std::max(recoveriesBase_, recoveriesTotal);
  c.failoverPhase = heldPhase_ >= 0 ? heldPhase_ : phase;
  if (holdEnded(nowS)) heldPhase_ = -1;
  return c;
}

ModeRecord::ModeRecord(std::string mode, std::vector<Phase> phases, int nRanks)
    : mode_(std::move(mode)), phases_(std::move(phases)), nRanks_(nRanks) {
  for (const Phase& p : phases_) stats_[p.name];
}

std::string ModeRecord::phaseAt(double s) const {
  for (const Phase& p : phases_) {
    if (s >= p.startS && s < p.endS) return p.name;
  }
  return {};
}

void ModeRecord::add(const wire::Iteration& it, uint64_t t0Ns, double phaseOffsetS,
                     double latestS) {
  double s = phaseOffsetS + (it.endNs > t0Ns ? double(it.endNs - t0Ns) / 1e9 : 0.0);
  s = std::min(s, latestS);
  std::string phase = phaseAt(s);
  int64_t code = (int64_t(it.algo) * 1000 + it.proto * 100 + it.nChannels) * 100000 + it.stepKiB;
  auto& row = decisions_[it.iteration];
  row.push_back(code);
  if (int(row.size()) == nRanks_) {
    ++compared_;
    if (std::any_of(row.begin(), row.end(), [&](int64_t c) { return c != row[0]; })) {
      ++mismatches_;
    }
    decisions_.erase(it.iteration);  // bounded: only in-flight iterations are kept
  }
  if (phase.empty()) return;
  PhaseStats& st = stats_[phase];
  st.wrongElements += it.wrongElements;
  if (it.h.rank != 0) return;
  st.busBytes += double(it.busBytes);
  ++st.iterations;
  st.latencyUs[it.tunerBytes].push_back(double(it.durationNs) / 1e3);
  std::string arm =
      std::string(algorithmName(Algorithm(it.algo))) + "/" + protocolByIndex(it.proto).name;
  if (it.stepKiB > 0) arm += " (" + std::to_string(it.stepKiB) + " KiB steps)";
  ++st.decisions[arm];
  // A task at the tuner's chunk size is the tuner's decision too, even on NCCL's cell.
  const bool ncclChoice = it.algo * abi::kNumProtocols + it.proto == it.ncclCell && it.stepKiB == 0;
  if (!ncclChoice) ++st.tunerChanged;
  SizeHistory& h = sizes_[it.tunerBytes];
  if (h.firstS < 0) h.firstS = s;
  if (ncclChoice) h.lastNcclChoiceS = s;
  h.lastArm = arm;
  h.lastWasNcclChoice = ncclChoice;
  if (lastCompletionS_ >= 0) st.maxGapS = std::max(st.maxGapS, s - lastCompletionS_);
  lastCompletionS_ = s;
  completions_.emplace_back(s, double(it.busBytes));
}

void ModeRecord::markFailed(const std::string& phase, const std::string& why) {
  PhaseStats& st = stats_[phase];
  if (!st.failed) {
    st.failed = true;
    st.failure = why;
  }
}

void ModeRecord::markRestarted(const std::string& phase) { stats_[phase].restarted = true; }

uint64_t ModeRecord::decisionMismatches() const { return mismatches_; }

std::vector<std::pair<double, double>> ModeRecord::timeline(double binS) const {
  double end = phases_.empty() ? 0 : phases_.back().endS;
  size_t bins = size_t(std::ceil(end / binS));
  std::vector<double> bytes(bins, 0.0);
  for (const auto& [s, b] : completions_) {
    size_t i = size_t(s / binS);
    if (i < bins) bytes[i] += b;
  }
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < bins; ++i)
    out.emplace_back((double(i) + 0.5) * binS, bytes[i] * 8 / 1e9 / binS);
  return out;
}

const Phase* ModeRecord::findPhase(const std::string& name) const {
  for (const Phase& p : phases_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

double ModeRecord::bytesIn(double fromS, double toS) const {
  double sum = 0;
  for (const auto& [s, bytes] : completions_) {
    if (s >= fromS && s < toS) sum += bytes;
  }
  return sum;
}

double ModeRecord::firstWindowAt(double startS, double endS, double windowS,
                                 double bytesPerS) const {
  for (double t = startS + windowS; t <= endS + 1e-9; t += windowS / 10) {
    if (bytesIn(t - windowS, t) / windowS >= bytesPerS) return t - startS;
  }
  return -1;
}

double ModeRecord::settleSeconds(const std::string& phase, double windowS, double fraction) const {
  const Phase* it = findPhase(phase);
  if (it == nullptr || windowS <= 0) return -1;
  const double start = it->startS, end = it->endS, mid = (start + end) / 2;
  double steady = bytesIn(mid, end) / (end - mid);
  if (steady <= 0) return -1;
  return firstWindowAt(start, end, windowS, fraction * steady);
}

double ModeRecord::settleSecondsPerPeriod(const std::string& phase, double periodS, double windowS,
                                          double fraction) const {
  const Phase* it = findPhase(phase);
  if (it == nullptr || windowS <= 0 || periodS < 2 * windowS) return -1;
  // Periods cut short by the phase's end count while their second half holds a window.
  struct Period {
    double startS, endS;
  };
  std::vector<Period> periods;
  for (double a = it->startS; it->endS - a >= 2 * windowS - 1e-9; a += periodS) {
    periods.push_back({a, std::min(a + periodS, it->endS)});
  }
  double steady[2] = {0, 0};
  int counted[2] = {0, 0};
  for (size_t k = 0; k < periods.size(); ++k) {
    const double mid = (periods[k].startS + periods[k].endS) / 2;
    steady[k % 2] += bytesIn(mid, periods[k].endS) / (periods[k].endS - mid);
    ++counted[k % 2];
  }
  if (counted[0] == 0 || counted[1] == 0) return -1;
  double worst = 0;
  for (size_t k = 0; k < periods.size(); ++k) {
    const double state = steady[k % 2] / counted[k % 2];
    if (state <= 0) return -1;
    const double settle =
        firstWindowAt(periods[k].startS, periods[k].endS, windowS, fraction * state);
    if (settle < 0) return -1;
    worst = std::max(worst, settle);
  }
  return worst;
}

}  // namespace autopilot::demo

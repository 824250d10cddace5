#include "net_plugin/core/rail_health.h"

#include <algorithm>
#include <cstdio>

#include "common/event_journal.h"
#include "common/log.h"
#include "net_plugin/core/rail_news.h"

namespace autopilot::net::core {

namespace {
constexpr unsigned long kFlags = abi::subsys::kNet;
}

void RailHealth::init(uint64_t commId, const char* role, const std::vector<RailInfo>& rails,
                      const RailHealthConfig& config, uint64_t nowNs) {
  commId_ = commId;
  role_ = role;
  config_ = config;
  rails_.clear();
  rails_.reserve(rails.size());
  for (const RailInfo& info : rails) {
    Rail r{info,
           State::kFailed,
           nowNs,
           FailureDetector(config.failure),
           DegradationDetector(config.degradation),
           FailbackScheduler(config.failback),
           0,
           0};
    rails_.push_back(std::move(r));
  }
  noLiveSinceNs_ = nowNs;
}

bool RailHealth::stallBlamesRail(int r, uint64_t nowNs) const {
  const FailureDetector& fd = rails_[r].failure;
  if (fd.hasError()) return true;
  if (fd.stalledForNs(nowNs) >= config_.peerStallNs + fd.stretchNs()) return true;
  // The evidence must be recent as well: a peer that answered on another rail right after this
  // stall began and then paused (descheduled, page faults) says nothing about this rail.
  const uint64_t recent =
      nowNs > config_.failure.stallTimeoutNs / 2 ? nowNs - config_.failure.stallTimeoutNs / 2 : 0;
  const uint64_t since = std::max(fd.stallStartNs(), recent);
  for (size_t q = 0; q < rails_.size(); ++q) {
    if (int(q) == r || rails_[q].state == State::kFailed) continue;
    if (rails_[q].failure.lastEvidenceNs() > since) return true;
  }
  return false;
}

int RailHealth::liveCount() const {
  int n = 0;
  for (const Rail& r : rails_) n += r.state != State::kFailed;
  return n;
}

RailMode RailHealth::mode(int r) const {
  switch (rails_[r].state) {
    case State::kFailed:
      return RailMode::kDown;
    case State::kStandby:
      return RailMode::kStandby;
    default:
      return RailMode::kActive;
  }
}

void RailHealth::updateNoLive(uint64_t nowNs) {
  if (liveCount() > 0) {
    noLiveSinceNs_ = 0;
  } else if (noLiveSinceNs_ == 0) {
    noLiveSinceNs_ = nowNs;
  }
}

void RailHealth::transition(int r, State to, uint64_t nowNs, const char* kind,
                            const std::string& detail, bool warn) {
  Rail& rail = rails_[r];
  State from = rail.state;
  rail.state = to;
  rail.sinceNs = nowNs;
  if (rail.info.telemetryId >= 0) {
    telemetry::RailRegistry::instance().setState(rail.info.telemetryId, to, nowNs);
  }
  const char* fromName = telemetry::railStateName(from);
  const char* toName = telemetry::railStateName(to);
  if (to == State::kFailed && warn) {
    AP_WARN(kFlags, "comm 0x%llx %s rail %d (%s): %s -> %s: %s", (unsigned long long)commId_, role_,
            r, rail.info.name.c_str(), fromName, toName, detail.c_str());
  } else {
    AP_INFO(kFlags, "comm 0x%llx %s rail %d (%s): %s -> %s%s%s", (unsigned long long)commId_, role_,
            r, rail.info.name.c_str(), fromName, toName, detail.empty() ? "" : ": ",
            detail.c_str());
  }
  journal::EventJournal::instance().record(
      journal::Source::kNet, commId_, rail.info.telemetryId, kind, "%s rail %d (%s) %s->%s %s",
      role_, r, rail.info.name.c_str(), fromName, toName, detail.c_str());
  updateNoLive(nowNs);
}

void RailHealth::connected(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  rail.state = rail.info.standby ? State::kStandby : State::kHealthy;
  rail.sinceNs = nowNs;
  rail.failure.reset(nowNs);
  rail.degradation.reset();
  if (rail.info.telemetryId >= 0) {
    telemetry::RailRegistry::instance().setState(rail.info.telemetryId, rail.state, nowNs);
  }
  updateNoLive(nowNs);
}

void RailHealth::connectFailed(int r, uint64_t nowNs, const std::string& reason) {
  Rail& rail = rails_[r];
  rail.failures++;
  rail.failback.onFailed(nowNs);
  if (rail.info.telemetryId >= 0) {
    telemetry::RailRegistry::instance().setState(rail.info.telemetryId, State::kFailed, nowNs);
  }
  AP_WARN(kFlags,
          "comm 0x%llx %s rail %d (%s) could not be connected: %s; retrying in the "
          "background",
          (unsigned long long)commId_, role_, r, rail.info.name.c_str(), reason.c_str());
  journal::EventJournal::instance().record(journal::Source::kNet, commId_, rail.info.telemetryId,
                                           "rail_failed", "%s rail %d (%s) not connected: %s",
                                           role_, r, rail.info.name.c_str(), reason.c_str());
  updateNoLive(nowNs);
}

bool RailHealth::fail(int r, uint64_t nowNs, const std::string& reason, bool warn) {
  Rail& rail = rails_[r];
  if (rail.state == State::kFailed) return false;
  rail.failures++;
  rail.failback.onFailed(nowNs);
  rail.degradation.reset();
  transition(r, State::kFailed, nowNs, "rail_failed", reason, warn);
  RailNews::instance().failed(rail.info.telemetryId, nowNs);
  if (liveCount() == 0) {
    // Nothing is left: probe every rail soon rather than at its grown backoff.
    for (Rail& other : rails_) other.failback.expedite(nowNs);
  }
  return true;
}

bool RailHealth::rejoin(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  if (rail.state != State::kFailed) return false;
  rail.rejoins++;
  rail.failback.onRejoined(nowNs);
  rail.failure.reset(nowNs);
  State to = rail.info.standby ? State::kStandby : State::kProbing;
  transition(r, to, nowNs, "rail_rejoined", "re-connected, starts with a small share");
  RailNews::instance().rejoined(rail.info.telemetryId);
  return true;
}

void RailHealth::evaluate(uint64_t nowNs, const double* bandwidth, const uint64_t* samples) {
  for (int r = 0; r < rails(); ++r) {
    Rail& rail = rails_[r];
    if (rail.state == State::kProbing && nowNs - rail.sinceNs >= config_.probationNs) {
      transition(r, State::kHealthy, nowNs, "rail_healthy", "probation passed");
    }
  }
  if (bandwidth == nullptr || samples == nullptr) return;
  double peers[RailStriper::kMaxRails];
  for (int r = 0; r < rails(); ++r) {
    Rail& rail = rails_[r];
    if (rail.state != State::kHealthy && rail.state != State::kDegraded) continue;
    int n = 0;
    for (int o = 0; o < rails() && n < RailStriper::kMaxRails; ++o) {
      State s = rails_[o].state;
      if (o != r && (s == State::kHealthy || s == State::kDegraded || s == State::kProbing)) {
        peers[n++] = bandwidth[o];
      }
    }
    double reference = 0;
    if (n > 0) {
      std::nth_element(peers, peers + n / 2, peers + n);
      reference = peers[n / 2];
    }
    if (!rail.degradation.update(bandwidth[r], reference, nowNs, samples[r])) continue;
    char detail[96];
    std::snprintf(detail, sizeof(detail), "%.2f Gbit/s vs %.2f Gbit/s on its peers",
                  bandwidth[r] * 8e-9, reference * 8e-9);
    if (rail.degradation.degraded()) {
      transition(r, State::kDegraded, nowNs, "rail_degraded", detail);
    } else {
      transition(r, State::kHealthy, nowNs, "rail_recovered", detail);
    }
  }
}

uint64_t RailHealth::totalFailures() const {
  uint64_t n = 0;
  for (const Rail& r : rails_) n += r.failures;
  return n;
}

uint64_t RailHealth::totalRejoins() const {
  uint64_t n = 0;
  for (const Rail& r : rails_) n += r.rejoins;
  return n;
}

}  // namespace autopilot::net::core

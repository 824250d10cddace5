#include "profiler_plugin/arrival_exchange.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <ctime>

#include "common/abi/nccl_abi.h"
#include "common/clock.h"
#include "common/event_journal.h"
#include "common/log.h"
#include "common/params.h"
#include "common/rail_telemetry.h"
#include "tuner_plugin/wire_format.h"

namespace autopilot::profiler {
namespace {

params::StringParam gReport(
    "NCCL_AUTOPILOT_STRAGGLER_REPORT", "rank0",
    "Arrival exchange among a communicator's ranks (docs/stragglers.md): 'rank0' names late "
    "ranks on rank 0 (log, journal, trace, Prometheus), 'all' also on every other rank, 'off' "
    "exchanges nothing.",
    {"rank0", "all", "off"});
params::IntParam gWindowMs("NCCL_AUTOPILOT_STRAGGLER_WINDOW_MS", 1000, 100, 3600000,
                           "Window over which rank 0 judges arrival lags; a rank late in two "
                           "windows in a row is named.");
params::IntParam gMinLagUs(
    "NCCL_AUTOPILOT_STRAGGLER_MIN_LAG_US", 1000, 1, 60000000,
    "A rank is late in a collective when it arrives this much after the communicator's median "
    "arrival, beyond the clock error bounds.");
params::DoubleParam gMinLagShare(
    "NCCL_AUTOPILOT_STRAGGLER_MIN_LAG_SHARE", 0.25, 0.0, 10.0,
    "A rank is late in a collective only when its lag is also at least this share of the "
    "collective's median duration (the time the others spend waiting for it).");
params::DoubleParam gLateFraction(
    "NCCL_AUTOPILOT_STRAGGLER_LATE_FRACTION", 0.75, 0.01, 1.0,
    "Share of a window's collectives a rank must be late in for the window to count as late.");
params::IntParam gClockSkewUs(
    "NCCL_AUTOPILOT_TEST_CLOCK_SKEW_US", 0, -1000000000, 1000000000,
    "Tests only: adds rank x this many microseconds to the clock this process uses in the "
    "arrival exchange, as if every rank ran on a host with its own clock.");

constexpr unsigned long kFlags = abi::subsys::kProfile;

enum Msg : uint8_t { kArrivals = 40, kProbe = 41, kEcho = 42, kReport = 43, kBye = 44 };
constexpr size_t kRecordBytes = 25;
constexpr size_t kReportEntryBytes = 4 + 1 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 8 + 2;
constexpr size_t kMaxFramesPerRound = 16;

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

double wallSecondsAt(uint64_t monoNs) { return double(monoNs + realtimeMinusMonotonicNs()) / 1e9; }

std::string wallText(double seconds) {
  time_t t = time_t(seconds);
  tm parts;
  gmtime_r(&t, &parts);
  char buf[32];
  strftime(buf, sizeof(buf), "%H:%M:%S UTC", &parts);
  return buf;
}

void railsOfThisProcess(int* total, int* unhealthy) {
  telemetry::RailSnapshot snap[telemetry::kMaxRails];
  size_t n =
      telemetry::RailRegistry::instance().snapshot(snap, telemetry::kMaxRails, monotonicNs());
  *total = int(n);
  *unhealthy = 0;
  for (size_t i = 0; i < n; ++i) {
    telemetry::RailState s = snap[i].state;
    *unhealthy += s == telemetry::RailState::kDegraded || s == telemetry::RailState::kFailed ||
                  s == telemetry::RailState::kProbing;
  }
}

}  // namespace

struct ArrivalExchange::Peer {
  enum class Stage { kConnecting, kAwaitChallenge, kAwaitHello, kAwaitWelcome, kReady };
  tuner::FrameConnection conn;
  Stage stage = Stage::kConnecting;
  tuner::wire::Nonce leaderNonce = {};
  tuner::wire::Nonce followerNonce = {};
  tuner::wire::SecureSession session;
  int rank = -1;
  uint64_t deadlineNs = 0;  // handshake
  uint64_t lastHeardNs = 0;
  uint64_t nextProbeNs = 0;  // leader
  uint64_t probeT1 = 0;      // leader: the probe awaiting its echo (0: none)
  uint64_t nextSendNs = 0;   // follower
  bool bye = false;          // the other side finalized
};

ArrivalExchange::ArrivalExchange(const ExchangeConfig& config) : config_(config) {
  buffer_.resize(kBufferSize);
  batch_.resize(kMaxBatch);
  if (leader()) {
    analyzer_ = std::make_unique<ArrivalAnalyzer>(config_.analysis, monotonicNs());
    clocks_.resize(size_t(config_.nRanks));
    railsTotal_.assign(size_t(config_.nRanks), -1);
    railsUnhealthy_.assign(size_t(config_.nRanks), -1);
    // Nobody is waited for before joining: a rank whose profiler never connects (another
    // profiler plugin, an old library) leaves the others compared among themselves.
    for (int r = 1; r < config_.nRanks; ++r) analyzer_->setPresent(r, false);
  }
}

ArrivalExchange::~ArrivalExchange() {
  if (!abandoned_) stop();
}

bool ArrivalExchange::start() {
  if (leader()) {
    bool inUse = false;
    std::string error;
    listen_ = tuner::listenOn(config_.endpoint, true, &inUse, &error);
    if (!listen_.valid()) {
      AP_WARN(kFlags, "profiler: comm %s: no arrival exchange: %s", config_.label.c_str(),
              error.c_str());
      return false;
    }
  }
  registered_ = tuner::TunerService::add(this);
  if (!registered_) {
    AP_WARN(kFlags, "profiler: comm %s: no arrival exchange: the channel thread cannot start",
            config_.label.c_str());
    listen_.reset();
    if (leader()) tuner::unlinkEndpoint(config_.endpoint);
    return false;
  }
  AP_INFO(kFlags, "profiler: comm %s rank %d: arrival exchange at %s", config_.label.c_str(),
          config_.rank, config_.endpoint.describe().c_str());
  return true;
}

void ArrivalExchange::stop() {
  if (!registered_) return;
  tuner::TunerService::remove(this);
  registered_ = false;
  for (auto& p : peers_) {
    if (p->stage == Peer::Stage::kReady) {
      (void)p->conn.send(tuner::wire::frame(p->session.seal(kBye, std::string())));
    }
  }
  peers_.clear();
  if (listen_.valid()) {
    listen_.reset();
    tuner::unlinkEndpoint(config_.endpoint);
  }
}

void ArrivalExchange::abandon() {
  abandoned_ = true;
  registered_ = false;
  // The descriptors are this child's copies: closing them leaves the parent's channel intact.
  peers_.clear();
  listen_.reset();
}

uint64_t ArrivalExchange::clockNow() const {
  return uint64_t(int64_t(monotonicNs()) + config_.clockSkewNs);
}

void ArrivalExchange::recordArrival(int func, uint64_t seq, uint64_t hostStartNs,
                                    uint64_t durationNs) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.recorded;
  if (size_ == kBufferSize) {
    // Oldest first out: the newest arrivals are what the current window is judged on.
    head_ = (head_ + 1) % kBufferSize;
    --size_;
    ++counters_.dropped;
  }
  buffer_[(head_ + size_) % kBufferSize] =
      Record{seq, uint64_t(int64_t(hostStartNs) + config_.clockSkewNs), durationNs, int8_t(func)};
  ++size_;
}

size_t ArrivalExchange::takeRecords(Record* out, size_t max) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = std::min(max, size_);
  for (size_t i = 0; i < n; ++i) out[i] = buffer_[(head_ + i) % kBufferSize];
  head_ = (head_ + n) % kBufferSize;
  size_ -= n;
  return n;
}

ArrivalReport ArrivalExchange::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  return report_;
}

ExchangeCounters ArrivalExchange::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void ArrivalExchange::collectFds(std::vector<pollfd>* fds) {
  tuner::appendPollSlice(listen_, peers_, fds, &fdPeers_, &fdBase_, &fdCount_);
}

void ArrivalExchange::handleEvents(const pollfd* fds, size_t count, uint64_t nowNs) {
  if (count < fdBase_ + fdCount_) return;
  std::vector<Peer*> broken;
  bool accept = false;
  for (size_t i = 0; i < fdCount_; ++i) {
    const pollfd& f = fds[fdBase_ + i];
    Peer* p = fdPeers_[i];
    if (p == nullptr) {
      // After the peers: accepting may evict a handshake this loop still points to.
      accept = (f.revents & POLLIN) != 0;
      continue;
    }
    if (f.revents == 0 && !p->conn.hasBufferedFrame()) continue;
    bool ok = true;
    if (p->stage == Peer::Stage::kConnecting) {
      if (!(f.revents & (POLLOUT | POLLERR | POLLHUP))) continue;
      std::string error;
      ok = tuner::connectFinished(p->conn.fd(), &error);
      if (ok) {
        p->stage = Peer::Stage::kAwaitChallenge;
        p->deadlineNs = nowNs + config_.handshakeTimeoutNs;
      }
    }
    if (ok && (f.revents & POLLOUT)) ok = p->conn.flush();
    if (ok && ((f.revents & (POLLIN | POLLHUP | POLLERR)) || p->conn.hasBufferedFrame())) {
      frames_.clear();
      ok = p->conn.readFrames(&frames_, tuner::wire::kMaxFrameBody, kMaxFramesPerRound);
      for (const std::string& body : frames_) {
        if (!ok) break;
        ok = onFrame(*p, body, nowNs);
      }
    }
    if (!ok) broken.push_back(p);
  }
  for (Peer* p : broken) {
    for (size_t k = 0; k < peers_.size(); ++k) {
      if (peers_[k].get() == p) {
        dropPeer(k, p->bye ? "it finalized" : "the channel failed", p->bye);
        break;
      }
    }
  }
  if (accept) acceptAll(nowNs);
}

void ArrivalExchange::acceptAll(uint64_t nowNs) {
  for (int i = 0; i < 64; ++i) {
    tuner::Fd fd = tuner::acceptFrom(listen_.get());
    if (!fd.valid()) return;
    // Handshakes in progress are bounded: the oldest goes (a silent connection cannot keep a
    // rank out; a rank evicted by mistake reconnects).
    size_t handshaking = 0;
    for (const auto& p : peers_) handshaking += p->stage != Peer::Stage::kReady;
    if (handshaking >= size_t(config_.nRanks) + 8) {
      for (size_t k = 0; k < peers_.size(); ++k) {
        if (peers_[k]->stage == Peer::Stage::kReady) continue;
        peers_.erase(peers_.begin() + long(k));
        std::lock_guard<std::mutex> lock(mu_);
        ++counters_.rejected;
        break;
      }
    }
    auto p = std::make_unique<Peer>();
    p->conn = tuner::FrameConnection(std::move(fd));
    p->stage = Peer::Stage::kAwaitHello;
    tuner::wire::randomBytes(p->leaderNonce, tuner::wire::kNonceSize);
    p->deadlineNs = nowNs + config_.handshakeTimeoutNs;
    p->lastHeardNs = nowNs;
    if (p->conn.send(tuner::wire::frame(tuner::wire::challengeBody(p->leaderNonce)))) {
      peers_.push_back(std::move(p));
    }
  }
}

void ArrivalExchange::connect(uint64_t nowNs) {
  bool inProgress = false;
  std::string error;
  tuner::Fd fd = tuner::connectTo(config_.endpoint, &inProgress, &error);
  nextConnectNs_ = nowNs + backoffNs_;
  // Rank 0 may not listen yet, or has finalized: try again, less and less often.
  backoffNs_ = std::min<uint64_t>(backoffNs_ * 2, 1'000'000'000);
  if (!fd.valid()) return;
  auto p = std::make_unique<Peer>();
  p->conn = tuner::FrameConnection(std::move(fd));
  p->stage = inProgress ? Peer::Stage::kConnecting : Peer::Stage::kAwaitChallenge;
  p->deadlineNs = nowNs + config_.handshakeTimeoutNs;
  p->lastHeardNs = nowNs;
  peers_.push_back(std::move(p));
}

bool ArrivalExchange::onFrame(Peer& p, const std::string& body, uint64_t nowNs) {
  p.lastHeardNs = nowNs;
  if (p.stage != Peer::Stage::kReady) return onHandshake(p, body, nowNs);
  uint8_t type = 0;
  std::string payload;
  if (!p.session.open(body, &type, &payload)) return false;
  tuner::wire::Reader r(payload.data(), payload.size());
  if (leader()) {
    if (type == kArrivals) return onArrivals(p, payload, nowNs);
    if (type == kEcho) {
      ClockSample s;
      if (!r.u64(&s.t1) || !r.u64(&s.t2) || !r.u64(&s.t3)) return false;
      s.t4 = clockNow();
      if (s.t1 != p.probeT1) return true;  // an echo of an older probe: its t4 is not ours
      p.probeT1 = 0;
      clocks_[size_t(p.rank)].add(s);
      return true;
    }
  } else {
    if (type == kProbe) {
      uint64_t t1;
      if (!r.u64(&t1)) return false;
      tuner::wire::Writer w;
      w.u64(t1);
      w.u64(clockNow());  // t2: when the probe was read (now, within this round)
      w.u64(clockNow());  // t3
      return sendSealed(p, kEcho, w.str());
    }
    if (type == kReport) return onReport(payload);
  }
  if (type == kBye) p.bye = true;
  return false;  // a goodbye ends the channel; anything else is a protocol violation
}

bool ArrivalExchange::onHandshake(Peer& p, const std::string& body, uint64_t nowNs) {
  namespace wire = tuner::wire;
  wire::Reader r(body.data(), body.size());
  uint8_t type = 0;
  if (!r.u8(&type)) return false;
  if (!leader() && p.stage == Peer::Stage::kAwaitChallenge && type == wire::kChallenge) {
    uint32_t version;
    if (!wire::readChallenge(&r, &version, p.leaderNonce)) return false;
    if (version != wire::kProtocolVersion) return false;
    p.stage = Peer::Stage::kAwaitWelcome;
    return p.conn.send(
        wire::frame(wire::helloBody(config_.key, p.leaderNonce, p.followerNonce, config_.rank, 0)));
  }
  if (!leader() && p.stage == Peer::Stage::kAwaitWelcome && type == wire::kWelcome) {
    bool authentic = false;
    if (!wire::readWelcome(&r, config_.key, p.leaderNonce, p.followerNonce, &authentic)) {
      return false;
    }
    if (!authentic) {
      AP_WARN_ONCE(kFlags,
                   "profiler: comm %s: the process at %s cannot prove the job key; no arrival "
                   "exchange with it",
                   config_.label.c_str(), config_.endpoint.describe().c_str());
      return false;
    }
    p.session =
        wire::SecureSession(wire::sessionKey(config_.key, p.leaderNonce, p.followerNonce), false);
    p.stage = Peer::Stage::kReady;
    p.nextSendNs = nowNs;
    backoffNs_ = 10'000'000;
    return true;
  }
  if (leader() && p.stage == Peer::Stage::kAwaitHello && type == wire::kHello) {
    int32_t rank;
    uint32_t flags;
    bool authentic = false;
    if (!wire::readHello(&r, config_.key, p.leaderNonce, p.followerNonce, &rank, &flags,
                         &authentic)) {
      return false;
    }
    const char* why = nullptr;
    if (!authentic) {
      why = "cannot prove the job key";
    } else if (rank <= 0 || rank >= config_.nRanks) {
      why = "claims no follower rank of the communicator";
    } else {
      for (const auto& other : peers_) {
        if (other->stage == Peer::Stage::kReady && other->rank == rank)
          why = "claims a rank already here";
      }
    }
    if (why != nullptr) {
      uint64_t n;
      {
        std::lock_guard<std::mutex> lock(mu_);
        n = ++counters_.rejected;
      }
      if (n <= 3) {
        AP_WARN(kFlags, "profiler: comm %s: arrival exchange rejected a connection: it %s",
                config_.label.c_str(), why);
      }
      return false;
    }
    if (!p.conn.send(wire::frame(wire::welcomeBody(config_.key, p.leaderNonce, p.followerNonce)))) {
      return false;
    }
    p.session =
        wire::SecureSession(wire::sessionKey(config_.key, p.leaderNonce, p.followerNonce), true);
    p.rank = rank;
    p.stage = Peer::Stage::kReady;
    p.nextProbeNs = nowNs;
    clocks_[size_t(rank)].reset();  // a rank that came back may run on another host
    analyzer_->setPresent(rank, true);
    return true;
  }
  return false;
}

bool ArrivalExchange::onArrivals(Peer& p, const std::string& payload, uint64_t nowNs) {
  tuner::wire::Reader r(payload.data(), payload.size());
  uint8_t total, unhealthy;
  uint32_t lost;
  uint16_t n;
  if (!r.u8(&total) || !r.u8(&unhealthy) || !r.u32(&lost) || !r.u16(&n) || n > kMaxBatch ||
      r.remaining() != size_t(n) * kRecordBytes) {
    return false;
  }
  railsTotal_[size_t(p.rank)] = total;
  railsUnhealthy_[size_t(p.rank)] = unhealthy;
  const ClockOffsetEstimator& clock = clocks_[size_t(p.rank)];
  if (!clock.valid()) {
    // Times on a clock not yet related to ours mean nothing here.
    std::lock_guard<std::mutex> lock(mu_);
    counters_.awaitingClock += n;
    return true;
  }
  const int64_t offset = clock.offsetNs();
  const uint64_t error = clock.errorNs(clockNow());
  for (uint16_t i = 0; i < n; ++i) {
    uint8_t func;
    uint64_t seq, arrival, duration;
    r.u8(&func);
    r.u64(&seq);
    r.u64(&arrival);
    r.u64(&duration);
    analyzer_->add(p.rank, int8_t(func), seq, int64_t(arrival) - offset, error, duration, nowNs);
  }
  return true;
}

bool ArrivalExchange::onReport(const std::string& payload) {
  if (!config_.reportAll) return true;
  tuner::wire::Reader r(payload.data(), payload.size());
  ArrivalReport rep;
  uint64_t windows, matched, unmatched;
  uint16_t n;
  if (!r.u64(&windows) || !r.u64(&matched) || !r.u64(&unmatched) || !r.u16(&n) ||
      n > kMaxReportRanks || r.remaining() != size_t(n) * kReportEntryBytes) {
    return false;
  }
  rep.valid = true;
  rep.windows = windows;
  rep.matched = matched;
  rep.unmatched = unmatched;
  for (uint16_t i = 0; i < n; ++i) {
    ArrivalReport::Rank e;
    int32_t rank;
    uint8_t flags, total, unhealthy;
    uint32_t latePermille, streakPermille;
    uint64_t lag, maxLag, sinceNs, streakLag, offset, error;
    r.i32(&rank);
    r.u8(&flags);
    r.u64(&lag);
    r.u64(&maxLag);
    r.u32(&latePermille);
    r.u64(&e.compared);
    r.u64(&e.late);
    r.u64(&sinceNs);
    r.u64(&streakLag);
    r.u32(&streakPermille);
    r.u64(&offset);
    r.u64(&error);
    r.u8(&total);
    r.u8(&unhealthy);
    if (rank < 0 || rank >= config_.nRanks) return false;
    e.rank = rank;
    e.present = flags & 1;
    e.named = flags & 2;
    e.clockKnown = flags & 4;
    e.windowLagNs = double(lag);
    e.windowMaxLagNs = double(maxLag);
    e.windowLateFraction = std::min(latePermille, 1000u) / 1000.0;
    e.sinceWallSeconds = double(sinceNs) / 1e9;
    e.streakLateLagNs = double(streakLag);
    e.streakLateFraction = std::min(streakPermille, 1000u) / 1000.0;
    e.clockOffsetNs = int64_t(offset);
    e.clockErrorNs = error;
    e.railsTotal = total == 0xff ? -1 : total;
    e.railsUnhealthy = unhealthy == 0xff ? -1 : unhealthy;
    rep.ranks.push_back(e);
  }
  std::lock_guard<std::mutex> lock(mu_);
  report_ = std::move(rep);
  return true;
}

bool ArrivalExchange::sendSealed(Peer& p, uint8_t type, const std::string& payload) {
  return p.conn.send(tuner::wire::frame(p.session.seal(type, payload)));
}

void ArrivalExchange::dropPeer(size_t index, const char* why, bool orderly) {
  Peer& p = *peers_[index];
  if (p.stage == Peer::Stage::kReady) {
    if (leader()) {
      analyzer_->setPresent(p.rank, false);
      railsTotal_[size_t(p.rank)] = railsUnhealthy_[size_t(p.rank)] = -1;
    }
    log::emit(orderly ? abi::kLogInfo : abi::kLogWarn, kFlags, __func__, __LINE__,
              "profiler: comm %s: arrival exchange with rank %d ended: %s", config_.label.c_str(),
              leader() ? p.rank : 0, why);
  }
  peers_.erase(peers_.begin() + long(index));
}

void ArrivalExchange::sendBatch(Peer& p, uint64_t nowNs) {
  p.nextSendNs = nowNs + config_.sendIntervalNs;
  int total, unhealthy;
  railsOfThisProcess(&total, &unhealthy);
  // Everything buffered, a batch at a time (each frame bounded); the rest waits for next time.
  for (int frames = 0; frames < 8; ++frames) {
    size_t n = takeRecords(batch_.data(), kMaxBatch);
    uint64_t lost;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lost = counters_.dropped;
      counters_.sent += n;
    }
    tuner::wire::Writer w;
    w.u8(uint8_t(std::min(total, 0xfe)));
    w.u8(uint8_t(std::min(unhealthy, 0xfe)));
    w.u32(uint32_t(std::min<uint64_t>(lost, UINT32_MAX)));
    w.u16(uint16_t(n));
    for (size_t i = 0; i < n; ++i) {
      w.u8(uint8_t(batch_[i].func));
      w.u64(batch_[i].seq);
      w.u64(batch_[i].arrivalNs);
      w.u64(batch_[i].durationNs);
    }
    // An empty batch still goes: it is the heartbeat that keeps rank 0 from timing us out.
    if (!sendSealed(p, kArrivals, w.str()) || n < kMaxBatch) return;
  }
}

uint64_t ArrivalExchange::step(uint64_t nowNs) {
  uint64_t next = nowNs + 100'000'000;
  // Handshake deadlines and silent peers.
  for (size_t k = peers_.size(); k > 0; --k) {
    Peer& p = *peers_[k - 1];
    if (p.stage != Peer::Stage::kReady && nowNs > p.deadlineNs) {
      if (leader()) {
        std::lock_guard<std::mutex> lock(mu_);
        ++counters_.rejected;
      }
      dropPeer(k - 1, "handshake timed out", false);
    } else if (p.stage == Peer::Stage::kReady && nowNs - p.lastHeardNs > config_.peerTimeoutNs) {
      dropPeer(k - 1, "silent past the peer timeout", false);
    }
  }
  if (!leader()) {
    if (peers_.empty() && nowNs >= nextConnectNs_) connect(nowNs);
    if (peers_.empty()) return std::min(next, nextConnectNs_);
    Peer& p = *peers_.front();
    if (p.stage == Peer::Stage::kReady) {
      if (nowNs >= p.nextSendNs) sendBatch(p, nowNs);
      if (!peers_.empty()) next = std::min(next, p.nextSendNs);
    } else {
      next = std::min(next, p.deadlineNs);
    }
    return next;
  }
  // Rank 0: its own arrivals, probes, the window.
  for (;;) {
    size_t n = takeRecords(batch_.data(), kMaxBatch);
    for (size_t i = 0; i < n; ++i) {
      analyzer_->add(0, batch_[i].func, batch_[i].seq, int64_t(batch_[i].arrivalNs), 0,
                     batch_[i].durationNs, nowNs);
    }
    if (n < kMaxBatch) break;
  }
  for (size_t k = peers_.size(); k > 0; --k) {
    Peer& p = *peers_[k - 1];
    if (p.stage != Peer::Stage::kReady) {
      next = std::min(next, p.deadlineNs);
      continue;
    }
    if (nowNs >= p.nextProbeNs) {
      p.nextProbeNs = nowNs + config_.probeIntervalNs;
      p.probeT1 = clockNow();
      tuner::wire::Writer w;
      w.u64(p.probeT1);
      if (!sendSealed(p, kProbe, w.str())) {
        dropPeer(k - 1, "the channel failed", false);
        continue;
      }
    }
    next = std::min(next, p.nextProbeNs);
  }
  changes_.clear();
  if (analyzer_->advance(nowNs, &changes_)) closeWindow(changes_);
  return std::min(next, analyzer_->nextWindowAt());
}

void ArrivalExchange::closeWindow(const std::vector<ArrivalChange>& changes) {
  int total, unhealthy;
  railsOfThisProcess(&total, &unhealthy);
  railsTotal_[0] = total;
  railsUnhealthy_[0] = unhealthy;
  const uint64_t clockNowNs = clockNow();
  ArrivalReport rep;
  rep.valid = true;
  rep.windows = analyzer_->windows();
  rep.matched = analyzer_->matched();
  rep.unmatched = analyzer_->unmatched();
  const auto& ranks = analyzer_->ranks();
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankArrival& a = ranks[r];
    ArrivalReport::Rank e;
    e.rank = int(r);
    e.present = a.present;
    e.named = a.named;
    e.windowLagNs = a.windowLagNs;
    e.windowMaxLagNs = a.windowMaxLagNs;
    e.windowLateFraction = a.windowLateFraction;
    e.compared = a.compared;
    e.late = a.late;
    e.sinceWallSeconds = a.lateWindows > 0 ? wallSecondsAt(a.sinceNs) : 0.0;
    e.streakLateLagNs = a.streakLateMeanLagNs();
    e.streakLateFraction = a.streakLateFraction();
    if (r == 0) {
      e.clockKnown = true;
    } else if (clocks_[r].valid()) {
      e.clockKnown = true;
      e.clockOffsetNs = clocks_[r].offsetNs();
      e.clockErrorNs = clocks_[r].errorNs(clockNowNs);
    }
    e.railsTotal = railsTotal_[r];
    e.railsUnhealthy = railsUnhealthy_[r];
    rep.ranks.push_back(e);
  }
  std::string railNote;
  for (const ArrivalReport::Rank& e : rep.ranks) {
    if (e.railsUnhealthy > 0) {
      railNote += (railNote.empty() ? "" : ", ") + std::to_string(e.rank) + " (" +
                  std::to_string(e.railsUnhealthy) + " of " + std::to_string(e.railsTotal) + ")";
    }
  }
  for (const ArrivalChange& c : changes) {
    const ArrivalReport::Rank& e = rep.ranks[size_t(c.rank)];
    if (c.named) {
      AP_WARN(kFlags,
              "profiler: comm %s: rank %d is late by %.1f ms in %.0f%% of collectives since %s",
              config_.label.c_str(), c.rank, e.streakLateLagNs / 1e6, e.streakLateFraction * 100.0,
              wallText(e.sinceWallSeconds).c_str());
      journal::EventJournal::instance().record(
          journal::Source::kProfiler, config_.commId, -1, "straggler",
          "rank %d late by %.1f ms in %.0f%% of collectives since %s", c.rank,
          e.streakLateLagNs / 1e6, e.streakLateFraction * 100.0,
          wallText(e.sinceWallSeconds).c_str());
    } else {
      AP_INFO(kFlags, "profiler: comm %s: rank %d no longer arrives late", config_.label.c_str(),
              c.rank);
      journal::EventJournal::instance().record(journal::Source::kProfiler, config_.commId, -1,
                                               "straggler_cleared", "rank %d no longer late",
                                               c.rank);
    }
  }
  for (const ArrivalReport::Rank& e : rep.ranks) {
    if (!e.named) continue;
    AP_INFO(kFlags,
            "profiler: comm %s window %llu: rank %d late by %.1f ms (max %.1f ms) in %.0f%% of "
            "the window's collectives; %.0f%% since %s%s%s",
            config_.label.c_str(), ull(rep.windows), e.rank, e.streakLateLagNs / 1e6,
            e.windowMaxLagNs / 1e6, e.windowLateFraction * 100.0, e.streakLateFraction * 100.0,
            wallText(e.sinceWallSeconds).c_str(),
            railNote.empty() ? "" : "; unhealthy rails on rank(s) ", railNote.c_str());
  }
  // Every rank gets the table (worst first, bounded), whatever its own setting says.
  if (!peers_.empty()) {
    std::vector<const ArrivalReport::Rank*> order;
    for (const auto& e : rep.ranks) order.push_back(&e);
    std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
      if (a->named != b->named) return a->named;
      return a->windowLagNs > b->windowLagNs;
    });
    if (order.size() > kMaxReportRanks) order.resize(kMaxReportRanks);
    tuner::wire::Writer w;
    w.u64(rep.windows);
    w.u64(rep.matched);
    w.u64(rep.unmatched);
    w.u16(uint16_t(order.size()));
    for (const auto* e : order) {
      w.i32(e->rank);
      w.u8(uint8_t(e->present | e->named << 1 | e->clockKnown << 2));
      w.u64(uint64_t(std::max(e->windowLagNs, 0.0)));
      w.u64(uint64_t(std::max(e->windowMaxLagNs, 0.0)));
      w.u32(uint32_t(e->windowLateFraction * 1000.0 + 0.5));
      w.u64(e->compared);
      w.u64(e->late);
      w.u64(uint64_t(std::max(e->sinceWallSeconds, 0.0) * 1e9));
      w.u64(uint64_t(std::max(e->streakLateLagNs, 0.0)));
      w.u32(uint32_t(e->streakLateFraction * 1000.0 + 0.5));
      w.u64(uint64_t(e->clockOffsetNs));
      w.u64(e->clockErrorNs);
      w.u8(e->railsTotal < 0 ? 0xff : uint8_t(std::min(e->railsTotal, 0xfe)));
      w.u8(e->railsUnhealthy < 0 ? 0xff : uint8_t(std::min(e->railsUnhealthy, 0xfe)));
    }
    for (size_t k = peers_.size(); k > 0; --k) {
      Peer& p = *peers_[k - 1];
      if (p.stage == Peer::Stage::kReady && !sendSealed(p, kReport, w.str())) {
        dropPeer(k - 1, "the channel failed", false);
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  report_ = std::move(rep);
}

std::unique_ptr<ArrivalExchange> makeArrivalExchange(uint64_t commId, const std::string& label,
                                                     int rank, int nRanks, int nNodes) {
  const std::string& mode = gReport.get();
  if (mode == "off" || nRanks < 2 || rank < 0 || rank >= nRanks) return nullptr;
  ExchangeConfig c;
  c.commId = commId;
  c.label = label;
  c.rank = rank;
  c.nRanks = nRanks;
  std::string why;
  c.endpoint = tuner::resolveEndpoint(commId, nNodes, &why, tuner::Channel::kArrivals);
  if (c.endpoint.kind == tuner::Endpoint::Kind::kNone) {
    AP_INFO(kFlags, "profiler: comm %s: no arrival exchange (no stragglers named): %s",
            label.c_str(), why.c_str());
    return nullptr;
  }
  std::optional<std::string> secret = tuner::readRendezvousSecret();
  if (!secret) return nullptr;  // warned there
  if (secret->empty() && c.endpoint.kind == tuner::Endpoint::Kind::kTcp) {
    tuner::noteUnauthenticatedRendezvous(rank, c.endpoint);
  }
  c.key = tuner::wire::channelKey(tuner::wire::jobKey(commId, nRanks, nNodes, *secret),
                                  "nccl-autopilot arrivals v1");
  c.reportAll = mode == "all";
  c.clockSkewNs = int64_t(gClockSkewUs.get()) * 1000 * rank;
  const uint64_t ms = 1000000;
  c.analysis.nRanks = nRanks;
  c.analysis.windowNs = uint64_t(gWindowMs.get()) * ms;
  c.analysis.minLagNs = uint64_t(gMinLagUs.get()) * 1000;
  c.analysis.minLagShare = gMinLagShare.get();
  c.analysis.lateFraction = gLateFraction.get();
  // About 1 MiB of waiting arrivals whatever the size of the communicator.
  c.analysis.maxPending = std::clamp<size_t>((size_t(1) << 20) / (size_t(nRanks) * 25), 64, 4096);
  c.analysis.pendingTimeoutNs = std::max<uint64_t>(5 * c.analysis.windowNs, 2000 * ms);
  auto exchange = std::make_unique<ArrivalExchange>(c);
  if (!exchange->start()) return nullptr;
  return exchange;
}

}  // namespace autopilot::profiler

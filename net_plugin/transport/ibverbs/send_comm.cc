#include "net_plugin/transport/ibverbs/send_comm.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "net_plugin/core/fault_injector.h"
#include "net_plugin/transport/ibverbs/completion.h"
#include "net_plugin/transport/ibverbs/ib_config.h"

namespace autopilot::net::ib {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
constexpr int kPollBatch = 32;
// A FIFO slot that carries its marker but does not decode is being rewritten (the receiver
// re-announces after a rail failure: same bytes); one that stays broken this long is corrupt.
constexpr uint64_t kCtsCorruptNs = 100'000'000;

// Work request ids: the kind in the top byte.
enum class Work : uint8_t { kData = 1, kProbe = 2, kLiveness = 3 };
uint64_t workId(Work w) { return uint64_t(w) << 56; }
Work workOf(uint64_t id) { return Work(id >> 56); }

using core::formatBytes;

double nominalBytesPerSec(int global) {
  int speed = IbRails::instance().rails()[size_t(global)].speedMbps;
  return double(speed > 0 ? speed : 100000) * 1e6 / 8;
}

std::vector<core::SendEngine::RailInfo> railInfos(const SendCommSetup& setup) {
  std::vector<core::SendEngine::RailInfo> out;
  for (const RailSetup& rs : setup.rails) {
    const IbRail& rail = IbRails::instance().rails()[size_t(rs.global)];
    out.push_back({rail.telemetryId, rail.name, rail.standby, nominalBytesPerSec(rs.global)});
  }
  return out;
}

// The comm's tunables, fitted to its ports: a chunk is one RDMA write, never larger than the
// smallest port's message limit; the stall timeout follows the verbs retry budget.
core::CommConfig fittedConfig(const SendCommSetup& setup) {
  core::CommConfig config = core::commConfig();
  uint64_t maxMessage = UINT64_MAX;
  for (const RailSetup& rs : setup.rails) {
    maxMessage = std::min<uint64_t>(maxMessage,
                                    IbRails::instance().rails()[size_t(rs.global)].maxMessageBytes);
  }
  config.chunks.maxChunkBytes = std::min<uint64_t>(config.chunks.maxChunkBytes, maxMessage);
  config.chunks.minChunkBytes = std::min(config.chunks.minChunkBytes, config.chunks.maxChunkBytes);
  config.health.failure.stallTimeoutNs = stallTimeoutNs(config.health.failure.stallTimeoutNs);
  return config;
}

}  // namespace

SendComm::SendComm(SendCommSetup setup)
    : SendEngine(kMagic, setup.commId, "ib send", fittedConfig(setup), railInfos(setup),
                 kQueueDepth, uint32_t(wire::kSlots)),
      connectionId_(setup.connectionId),
      trafficClass_(setup.trafficClass),
      rails_(new Rail[setup.rails.size()]),
      control_(std::move(setup.control)),
      area_(std::move(setup.area)),
      probeAddress_(setup.probeAddress),
      targets_(new Target[pool_.size()]) {
  IbRails& ib = IbRails::instance();
  uint64_t now = monotonicNs();
  auto& events = ib.events();
  auto& injector = core::FaultInjector::instance();
  for (int r = 0; r < nRails_; ++r) {
    RailSetup& rs = setup.rails[size_t(r)];
    Rail& rail = rails_[r];
    railIds_[r] = rs.global;
    rail.global = rs.global;
    rail.probeKey = rs.remoteKey;
    rail.seenDown = events.downEvents(rs.global);
    rail.seenUp = events.upEvents(rs.global);
    rail.seenReset = injector.qpResetSequence(rs.global);
    rail.nominalBytesPerSec = nominalBytesPerSec(rs.global);
    if (rs.qp && rs.qp->connected()) {
      rail.qp = std::move(rs.qp);
      health_.connected(r, now);
    } else {
      health_.connectFailed(r, now, rs.error);
      // The receiver may have connected its half: it must not wait on it.
      control_->sendRailDown(connectionId_, r, rail.generation);
    }
    striper_.setMode(r, health_.mode(r));
  }
}

SendComm::~SendComm() {
  std::string summary;
  for (int r = 0; r < nRails_; ++r) {
    summary += railSummary(r);
    rails_[r].qp.reset();  // QPs (and their CQs) before the registered area they write from
  }
  AP_INFO(kFlags, "comm 0x%llx ib send closed:%s", (unsigned long long)commId_, summary.c_str());
}

// ---------------------------------------------------------------------------- requests

abi::Result SendComm::isend(const void* data, size_t size, int tag, const void* mhandle,
                            void** request) {
  *request = nullptr;
  const MemoryHandle* mh = nullptr;
  if (size > 0 && failed_ == abi::kSuccess) {
    mh = memoryOf(this, mhandle);
    if (mh == nullptr || !mh->covers(data, size)) {
      AP_WARN(kFlags, "isend of %zu bytes at %p: the buffer is not inside a registration made "
              "with regMr on this comm", size, data);
      return abi::kInvalidArgument;
    }
  }
  SendRequest* q = nullptr;
  abi::Result rc = postSend(data, size, tag, &q);
  if (q == nullptr) return rc;
  targets_[q->index].memory = mh;
  *request = static_cast<RequestHeader*>(q);
  progress(monotonicNs());
  return rc;
}

// ---------------------------------------------------------------------------- progress

void SendComm::progress(uint64_t nowNs) {
  IbRails::instance().events().poll(nowNs);
  core::FaultInjector::instance().refresh(nowNs);
  if (failed_ != abi::kSuccess) return;
  pollControl(nowNs);
  pollFifo(nowNs);
  matchRequests();
  placeChunks(nowNs);
  for (int r = 0; r < nRails_; ++r) postChunks(r, nowNs);
  if (pollCompletions(nowNs)) {
    // Completions freed room on the rails: refill them in the same pass.
    placeChunks(nowNs);
    for (int r = 0; r < nRails_; ++r) postChunks(r, nowNs);
  }
  checkHealth(nowNs);
}

void SendComm::pollControl(uint64_t nowNs) {
  std::string error;
  bool protocolError = false;
  ControlLink::Status status = control_->service(
      connectionId_,
      [&](const wire::ControlMessage& m) {
        if (m.type == wire::ControlType::kReplaced) {
          replaced(m, nowNs);
        } else if (m.type == wire::ControlType::kRailDown) {
          if (m.rail < nRails_ && m.generation == rails_[m.rail].generation) {
            if (health_.live(m.rail)) {
              failRail(m.rail, nowNs, "the receiver gave the rail up", false);
            } else {
              abandonReplace(m.rail, nowNs, "the receiver gave the new queue pair up", false);
            }
          }
        } else {
          failComm(abi::kRemoteError, "protocol error: unexpected control message");
        }
        return failed_ == abi::kSuccess;
      },
      &error, &protocolError);
  if (protocolError) {
    failComm(abi::kRemoteError, error);
  } else if (status != ControlLink::Status::kOk) {
    control_->close();
    peerClosedNs_ = nowNs;
    AP_INFO(kFlags, "comm 0x%llx ib send: %s", (unsigned long long)commId_, error.c_str());
  }
}

void SendComm::pollFifo(uint64_t nowNs) {
  for (;;) {
    const uint8_t* slot = area_->data() + (nextCts_ % wire::kSlots) * wire::kCtsBytes;
    // The marker is the last word the receiver's RDMA write places; read it before the rest.
    uint64_t marker = __atomic_load_n(reinterpret_cast<const uint64_t*>(slot + wire::kCtsMarkerAt),
                                      __ATOMIC_ACQUIRE);
    if (marker != wire::ctsMarker(nextCts_)) return;
    uint8_t snapshot[wire::kCtsBytes];
    std::memcpy(snapshot, slot, sizeof(snapshot));
    wire::CtsEntry& entry = cts_[nextCts_ % wire::kSlots];
    wire::DecodeError e = wire::decodeCts(snapshot, sizeof(snapshot), nextCts_, nRails_, &entry);
    if (e != wire::DecodeError::kOk) {
      if (ctsCorruptSinceNs_ == 0) ctsCorruptSinceNs_ = nowNs;
      if (nowNs - ctsCorruptSinceNs_ >= kCtsCorruptNs) {
        failComm(abi::kRemoteError, std::string("the receiver's clear-to-send entry ") +
                                        std::to_string(nextCts_) + " is corrupt: " +
                                        wire::decodeErrorText(e));
      }
      return;
    }
    ctsCorruptSinceNs_ = 0;
    if (matcher_.offer(wire::postedReceive(entry)) == core::ReceiveMatcher::Offer::kInvalid) {
      failComm(abi::kRemoteError, "protocol error: a clear-to-send entry beyond the window");
      return;
    }
    nextCts_++;
  }
}

void SendComm::onMatched(SendRequest& q, const core::ReceiveMatcher::Slot& slot) {
  const wire::CtsBuffer& b = cts_[slot.seq % wire::kSlots].buffers[slot.buffer];
  Target& t = targets_[q.index];
  t.remoteAddress = b.address;
  std::copy(b.rkeys, b.rkeys + wire::kMaxRails, t.remoteKeys);
}

bool SendComm::replayOverlaps(const core::SendTracker::Entry& e) const {
  uint64_t lo = targets_[e.message].remoteAddress + tracker_.plan(e.message).offset(e.chunk);
  uint64_t hi = lo + e.bytes;
  for (int r = 0; r < nRails_; ++r) {
    for (uint32_t i = 0; i < tracker_.queued(r); ++i) {
      const core::SendTracker::Entry& x = tracker_.entry(r, i);
      if (!x.resend) continue;
      uint64_t a = targets_[x.message].remoteAddress + tracker_.plan(x.message).offset(x.chunk);
      if (a < hi && lo < a + x.bytes + (x.bytes == 0)) return true;
    }
  }
  return false;
}

uint32_t SendComm::railsClosedForPlacing() const {
  uint32_t closed = 0;
  for (int r = 0; r < nRails_; ++r) {
    if (!rails_[r].qp) closed |= 1u << r;
  }
  return closed;
}

// The guard lifts when no replayed chunk is left to place or in flight.
void SendComm::beforePlacing() {
  if (!replayGuard_) return;
  bool any = tracker_.resendQueued() > 0;
  for (int r = 0; r < nRails_ && !any; ++r) {
    for (uint32_t i = 0; i < tracker_.queued(r) && !any; ++i) any = tracker_.entry(r, i).resend;
  }
  replayGuard_ = any;
}

bool SendComm::mustWait(const core::SendTracker::Entry& e) {
  return replayGuard_ && !e.resend && replayOverlaps(e);  // after the replays land
}

void SendComm::postChunks(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  if (!health_.live(r) || !rail.qp) return;
  while (tracker_.posted(r) < tracker_.queued(r)) {
    const core::SendTracker::Entry& e = tracker_.entry(r, tracker_.posted(r));
    const SendRequest& q = pool_[e.message];
    const Target& t = targets_[e.message];
    const core::ChunkPlan& plan = tracker_.plan(e.message);
    uint64_t offset = plan.offset(e.chunk);
    wire::ImmFields imm{wire::immEpoch(q.recvSeq), wire::immSlot(q.recvSeq), q.buffer, e.chunk,
                        plan.count};
    int rc = rail.qp->postWriteImm(workId(Work::kData), q.data + offset, uint32_t(e.bytes),
                                   t.memory ? t.memory->lkey[r] : 0, t.remoteAddress + offset,
                                   t.remoteKeys[r], wire::encodeImm(imm));
    if (rc == ENOMEM) return;  // the send queue is full: the next pass
    if (rc != 0) {
      failRail(r, nowNs, std::string("ibv_post_send failed: ") + std::strerror(rc));
      return;
    }
    tracker_.setPosted(r, tracker_.posted(r) + 1);
  }
}

// True when chunks completed (room for more).
bool SendComm::pollCompletions(uint64_t nowNs) {
  bool completed = false;
  ibv_wc wc[kPollBatch];
  for (int r = 0; r < nRails_; ++r) {
    Rail& rail = rails_[r];
    if (!rail.qp) continue;
    int n = rail.qp->poll(wc, kPollBatch);
    if (n < 0) {
      failRail(r, nowNs, "ibv_poll_cq failed");
      continue;
    }
    // The pass's clock can be old by now (posting can complete work synchronously on some
    // providers): the bandwidth estimate needs when these completions were seen.
    if (n > 0) nowNs = monotonicNs();
    for (int i = 0; i < n; ++i) {
      const ibv_wc& c = wc[i];
      CompletionClass cls = classifyCompletion(c.status);
      Work work = workOf(c.wr_id);
      if (cls == CompletionClass::kUsageError) {
        char why[256];
        std::snprintf(why, sizeof(why),
                      "rail %d (%s): %s (%s, vendor error 0x%x) on a %s: a protection, length or "
                      "access violation is a bug, not a path failure; replaying it would fail "
                      "again",
                      r, health_.info(r).name.c_str(), statusName(c.status),
                      IbRails::instance().lib()->statusText(c.status), c.vendor_err,
                      work == Work::kData ? "data write" : "probe");
        failComm(abi::kInternalError, why);
        return completed;
      }
      if (cls == CompletionClass::kPathFailed) {
        std::string why = std::string(statusName(c.status)) + " (" +
                          IbRails::instance().lib()->statusText(c.status) + ")";
        if (health_.live(r)) {
          failRail(r, nowNs, why);
        } else {
          abandonReplace(r, nowNs, "the probe failed: " + why, true);
        }
        break;  // the QP and its CQ are gone
      }
      switch (work) {
        case Work::kData: {
          tracker_.acknowledge(r, 1, [&](const core::SendTracker::Entry& e) {
            striper_.onCompleted(r, e.bytes, nowNs);
            if (e.resend && replayFailedNs_ != 0) {
              AP_INFO(kFlags, "comm 0x%llx ib send: the first replayed chunk completed on rail %d "
                      "%.1f ms after rail %d failed", (unsigned long long)commId_, r,
                      double(monotonicNs() - replayFailedNs_) * 1e-6, replayFailedRail_);
              replayFailedNs_ = 0;
            }
            if (auto* m = metrics_.at(r)) {
              core::RailMetrics::add(m->chunksSent, 1);
              core::RailMetrics::add(m->bytesSent, e.bytes);
            }
            if (tracker_.done(e.message)) pool_[e.message].state = SendRequest::State::kDone;
          });
          health_.failure(r).onProgress(nowNs);
          completed = true;
          break;
        }
        case Work::kProbe:
          rejoin(r, nowNs);
          break;
        case Work::kLiveness:
          rail.livenessOutstanding = false;
          health_.failure(r).onProgress(nowNs);
          break;
      }
    }
  }
  return completed;
}

// ---------------------------------------------------------------------------- failure handling

void SendComm::requestLiveness(int r, uint64_t nowNs) {
  const uint64_t stallStart = health_.failure(r).stallStartNs();
  for (int q = 0; q < nRails_; ++q) {
    Rail& rail = rails_[q];
    // Only idle rails: a rail carrying data shows the peer's life through its completions.
    // Evidence must be recent to count (RailHealth::stallBlamesRail): ping again when the last
    // answer is getting old.
    if (q == r || !health_.live(q) || !rail.qp || tracker_.queued(q) != 0 ||
        rail.livenessOutstanding || !livenessDue(rail.livenessSentNs, stallStart, nowNs)) {
      continue;
    }
    if (rail.qp->postWrite(workId(Work::kLiveness), area_->data() + kProbeSourceAt, 8,
                           area_->memory().lkey[q], probeAddress_, rail.probeKey) == 0) {
      rail.livenessOutstanding = true;
      rail.livenessSentNs = nowNs;
    }
  }
}

void SendComm::failRail(int r, uint64_t nowNs, const std::string& reason, bool notifyPeer) {
  Rail& rail = rails_[r];
  if (!health_.fail(r, nowNs, reason)) return;
  // Destroying the QP stops the NIC retransmitting its writes: after this none of them can
  // land, so replaying them elsewhere cannot race with a late original.
  rail.qp.reset();
  uint64_t bytes = 0;
  bool proceed = false;
  uint32_t moved = moveChunksOff(r, false, &bytes, &proceed);
  if (!proceed) return;
  rail.livenessOutstanding = false;
  rail.failback = Failback::kIdle;
  if (moved > 0) {
    replayGuard_ = true;
    if (replayFailedNs_ == 0) {
      replayFailedNs_ = nowNs;
      replayFailedRail_ = r;
    }
  }
  // The monotonic time lets tests and operators line the failover up with external events.
  AP_INFO(kFlags, "comm 0x%llx ib send: rail %d failed at monotonic %.6f s; replaying %u "
          "unacknowledged chunk%s (%s) on the other rails", (unsigned long long)commId_, r,
          double(nowNs) * 1e-9, moved, moved == 1 ? "" : "s", formatBytes(bytes).c_str());
  if (notifyPeer) control_->sendRailDown(connectionId_, r, rail.generation);
}

void SendComm::startReplace(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  core::FailbackScheduler& fb = health_.failback(r);
  fb.onAttemptStarted();
  rail.attempts++;
  std::string error;
  if (!control_->up()) {
    fb.onAttemptFailed(nowNs);
    return;
  }
  auto qp = std::make_unique<RailQp>();
  if (!qp->create(rail.global, {kSendDepth, 0}, &error)) {
    fb.onAttemptFailed(nowNs);
    AP_INFO(kFlags, "comm 0x%llx ib send rail %d: re-creation attempt %llu failed: %s",
            (unsigned long long)commId_, r, (unsigned long long)rail.attempts, error.c_str());
    return;
  }
  wire::ControlMessage m;
  m.type = wire::ControlType::kReplace;
  m.connectionId = connectionId_;
  m.rail = uint8_t(r);
  m.generation = rail.generation + 1;
  m.endpoints[0] = qp->endpoint(area_->memory().rkey[r]);
  if (!control_->send(m)) {
    fb.onAttemptFailed(nowNs);
    return;
  }
  rail.generation++;
  rail.qp = std::move(qp);
  rail.failback = Failback::kAwaitingPeer;
  rail.attemptDeadlineNs = nowNs + config_.probeTimeoutNs;
}

void SendComm::replaced(const wire::ControlMessage& m, uint64_t nowNs) {
  if (m.rail >= nRails_) return;
  int r = m.rail;
  Rail& rail = rails_[r];
  if (m.generation != rail.generation || rail.failback != Failback::kAwaitingPeer) return;
  if (m.status != wire::ControlStatus::kOk) {
    abandonReplace(r, nowNs, std::string("the receiver: ") + wire::controlStatusText(m.status),
                   false);
    return;
  }
  std::string error;
  if (!rail.qp->connect(m.endpoints[0], trafficClass_, &error)) {
    abandonReplace(r, nowNs, error, true);
    return;
  }
  // The rail re-joins only when a write crosses it end to end.
  rail.probeKey = m.endpoints[0].rkey;
  if (rail.qp->postWrite(workId(Work::kProbe), area_->data() + kProbeSourceAt, 8,
                         area_->memory().lkey[r], probeAddress_, rail.probeKey) != 0) {
    abandonReplace(r, nowNs, "the probe could not be posted", true);
    return;
  }
  rail.failback = Failback::kProbing;
}

void SendComm::abandonReplace(int r, uint64_t nowNs, const std::string& why, bool notifyPeer) {
  Rail& rail = rails_[r];
  if (rail.failback == Failback::kIdle) return;
  rail.qp.reset();
  rail.failback = Failback::kIdle;
  health_.failback(r).onAttemptFailed(nowNs);
  if (notifyPeer) control_->sendRailDown(connectionId_, r, rail.generation);
  // Attempts repeat for as long as the comm lives: log the 1st, 2nd, 4th, 8th, ...
  if ((rail.attempts & (rail.attempts - 1)) == 0) {
    AP_INFO(kFlags, "comm 0x%llx ib send rail %d: re-creation attempt %llu failed: %s; next in "
            "%llu ms", (unsigned long long)commId_, r, (unsigned long long)rail.attempts,
            why.c_str(), (unsigned long long)(health_.failback(r).backoffNs() / 1000000));
  }
}

void SendComm::rejoin(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  if (rail.failback != Failback::kProbing) return;
  rail.failback = Failback::kIdle;
  IbRails& ib = IbRails::instance();
  rail.seenDown = ib.events().downEvents(rail.global);
  rail.seenUp = ib.events().upEvents(rail.global);
  rejoinRail(r, nowNs, rail.nominalBytesPerSec);
}

void SendComm::checkHealth(uint64_t nowNs) {
  IbRails& ib = IbRails::instance();
  auto& events = ib.events();
  auto& injector = core::FaultInjector::instance();
  for (int r = 0; r < nRails_; ++r) {
    Rail& rail = rails_[r];
    uint32_t reset = injector.qpResetSequence(rail.global);
    if (reset != rail.seenReset) {
      rail.seenReset = reset;
      if (health_.live(r)) {
        failRail(r, nowNs, "SIMULATED queue pair reset", false);  // the peer is not told
        continue;
      }
    }
    uint32_t up = events.upEvents(rail.global);
    if (up != rail.seenUp) {
      rail.seenUp = up;
      health_.failback(r).expedite(nowNs);  // the link is back: try now, not at the backoff
    }
    if (!health_.live(r)) {
      if (rail.failback != Failback::kIdle) {
        if (nowNs >= rail.attemptDeadlineNs) {
          abandonReplace(r, nowNs,
                         rail.failback == Failback::kProbing ? "the probe write did not complete"
                                                             : "no answer from the receiver",
                         true);
        }
      } else if (health_.failback(r).due(nowNs)) {
        if (events.active(rail.global)) {
          startReplace(r, nowNs);
        } else {
          health_.failback(r).onAttemptStarted();  // the port is down: nothing to try yet
          health_.failback(r).onAttemptFailed(nowNs);
        }
      }
      continue;
    }
    uint32_t down = events.downEvents(rail.global);
    if (down != rail.seenDown) {
      rail.seenDown = down;
      failRail(r, nowNs, "port down (asynchronous event)");
      continue;
    }
    // Without failover (the baseline mode) nothing is declared dead from silence: like a
    // transport without failure detection, a dead path stalls until the NIC reports it.
    if (!config_.failover) continue;
    core::FailureDetector& fd = health_.failure(r);
    bool outstanding = tracker_.queued(r) > 0;
    fd.setOutstanding(outstanding, nowNs);
    if (!outstanding) continue;
    uint64_t held = tracker_.queuedBytes(r);
    double bw = detectorBandwidth(r);
    if (!fd.failed(nowNs, held, bw)) continue;
    if (!health_.stallBlamesRail(r, nowNs)) {
      requestLiveness(r, nowNs);
      continue;
    }
    char why[192];
    std::snprintf(why, sizeof(why),
                  "no completion for %llu ms while holding %s in %u chunks, %u posted (allowed "
                  "%llu ms at %.2f Gbit/s)",
                  (unsigned long long)(fd.stalledForNs(nowNs) / 1000000), formatBytes(held).c_str(),
                  tracker_.queued(r), tracker_.posted(r),
                  (unsigned long long)(fd.timeoutNs(held, bw) / 1000000), bw * 8e-9);
    failRail(r, nowNs, why);
  }
  // As on the receiving side: a closed control connection is an orderly teardown racing with
  // sends still posted, or a dead receiver; sends fail when it stays closed for the peer timeout.
  if (peerClosedNs_ != 0 && pending() && nowNs - peerClosedNs_ >= config_.peerTimeoutNs) {
    failComm(abi::kRemoteError, "the receiver closed the connection " +
                                    std::to_string((nowNs - peerClosedNs_) / 1000000) +
                                    " ms ago (its side is closed or its process is gone)");
  }
  evaluateHealth(nowNs);
}

}  // namespace autopilot::net::ib

#include "net_plugin/transport/ibverbs/send_comm.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "net_plugin/transport/ibverbs/completion.h"
#include "net_plugin/transport/ibverbs/ib_config.h"

namespace autopilot::net::ib {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
constexpr int kPollBatch = 32;
// A FIFO slot that carries its marker but does not decode is being rewritten (the receiver
// re-announces after a rail failure: same bytes); one that stays broken this long is corrupt.
constexpr uint64_t kCtsCorruptNs = 100'000'000;

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
  // No slow start on RDMA: a large chunk measures the rail's rate even when it went alone.
  config.striper.loneSampleMinBytes = core::RailStriper::kRdmaLoneSampleMinBytes;
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
  uint64_t now = monotonicNs();
  for (int r = 0; r < nRails_; ++r) {
    RailSetup& rs = setup.rails[size_t(r)];
    Rail& rail = rails_[r];
    railIds_[r] = rs.global;
    rail.global = rs.global;
    rail.probeKey = rs.remoteKey;
    rail.port.start(rs.global, setup.faults);
    rail.nominalBytesPerSec = nominalBytesPerSec(rs.global);
    if (rs.qp && rs.qp->connected()) {
      rail.qp = std::move(rs.qp);
      health_.connected(r, now);
    } else {
      health_.connectFailed(r, now, rs.error);
      // The receiver may have connected its half: it must not wait on it.
      announceDown(r, rail.generation);
    }
    striper_.setMode(r, health_.mode(r));
  }
  faults_ = core::FaultView(setup.faults, railIds_, nRails_);
}

SendComm::~SendComm() {
  std::string summary;
  for (int r = 0; r < nRails_; ++r) {
    summary += railSummary(r);
    rails_[r].qp.reset();  // QPs (and their CQs) before the registered area they write from
  }
  AP_INFO(kFlags, "comm 0x%llx ib send closed:%s", (unsigned long long)commId_, summary.c_str());
  if (fencesConfirmed_ + fencesWaitedOut_ > 0) {
    AP_INFO(kFlags,
            "comm 0x%llx ib send closed: %llu fence%s confirmed by the receiver, %llu waited "
            "out; %llu chunk%s found landed through a failed rail (not replayed)",
            (unsigned long long)commId_, (unsigned long long)fencesConfirmed_,
            fencesConfirmed_ == 1 ? "" : "s", (unsigned long long)fencesWaitedOut_,
            (unsigned long long)fencedLanded_, fencedLanded_ == 1 ? "" : "s");
  }
  if (rejectedReplays_ > 0) {
    AP_INFO(kFlags,
            "comm 0x%llx ib send closed: %llu chunk%s replayed after the receiver's NIC "
            "rejected a write",
            (unsigned long long)commId_, (unsigned long long)rejectedReplays_,
            rejectedReplays_ == 1 ? "" : "s");
  }
}

// ---------------------------------------------------------------------------- requests

abi::Result SendComm::isend(const void* data, size_t size, int tag, const void* mhandle,
                            void** request) {
  *request = nullptr;
  const MemoryHandle* mh = nullptr;
  if (size > 0 && failed_ == abi::kSuccess) {
    mh = memoryOf(this, mhandle);
    if (mh == nullptr || !mh->covers(data, size)) {
      AP_WARN(kFlags,
              "isend of %zu bytes at %p: the buffer is not inside a registration made "
              "with regMr on this comm",
              size, data);
      return abi::kInvalidArgument;
    }
  }
  SendRequest* q = nullptr;
  abi::Result rc = postSend(data, size, tag, &q);
  if (q == nullptr) return rc;
  targets_[q->index].memory = mh;
  progress(monotonicNs());
  if (!withdrawIfUnmatched(q)) *request = static_cast<RequestHeader*>(q);
  return rc;
}

// ---------------------------------------------------------------------------- progress

void SendComm::progress(uint64_t nowNs) {
  IbRails::instance().events().poll(nowNs);
  faults_.refresh(nowNs);
  if (failed_ != abi::kSuccess) return;
  const auto pass = beginPass(nowNs);  // ends with this pass
  followRailNews(nowNs);  // before anything is placed: a rail found dead elsewhere gets nothing
  pollControl(nowNs);
  pollFifo(nowNs);
  matchRequests();
  placeChunks(nowNs);
  for (int r = 0; r < nRails_; ++r) postChunks(r, nowNs);
  // pollCompletions moves the pass's clock to when it saw completions: what it recorded (a
  // rail failed, bandwidth samples) must not lie in the future of the rest of the pass.
  if (pollCompletions(nowNs)) {
    // Completions freed room on the rails: refill them in the same pass, at the clock the
    // completions were stamped with (the striper's times never go backwards).
    nowNs = std::max(nowNs, monotonicNs());
    placeChunks(nowNs);
    for (int r = 0; r < nRails_; ++r) postChunks(r, nowNs);
  }
  checkHealth(nowNs);
}

void SendComm::pollControl(uint64_t nowNs) {
  control_->serve(
      connectionId_, nowNs, commId_, "ib send",
      [&](const wire::ControlMessage& m) {
        if (m.type == wire::ControlType::kReplaced) {
          replaced(m, nowNs);
        } else if (m.type == wire::ControlType::kRailDown) {
          peerDown(m, nowNs);
        } else {
          failComm(abi::kRemoteError, "protocol error: unexpected control message");
        }
        return failed_ == abi::kSuccess;
      },
      [&](const std::string& error) { failComm(abi::kRemoteError, error); });
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
                                        std::to_string(nextCts_) +
                                        " is corrupt: " + wire::decodeErrorText(e));
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

bool SendComm::atRiskOverlaps(const core::SendTracker::Entry& e) const {
  uint64_t lo = targets_[e.message].remoteAddress + tracker_.plan(e.message).offset(e.chunk);
  uint64_t hi = lo + e.bytes;
  for (int r = 0; r < nRails_; ++r) {
    for (uint32_t i = 0; i < tracker_.queued(r); ++i) {
      const core::SendTracker::Entry& x = tracker_.entry(r, i);
      if (!atRisk(r, x)) continue;
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
  oldestAtRiskSeq_ = UINT64_MAX;
  bool fenced = fencePending();
  if (!replayGuard_ && !fenced) return;
  bool replays = tracker_.resendQueued() > 0;
  for (int r = 0; r < nRails_; ++r) {
    for (uint32_t i = 0; i < tracker_.queued(r); ++i) {
      const core::SendTracker::Entry& e = tracker_.entry(r, i);
      replays = replays || e.resend;
      if (atRisk(r, e)) oldestAtRiskSeq_ = std::min(oldestAtRiskSeq_, pool_[e.message].recvSeq);
    }
  }
  replayGuard_ = replayGuard_ && replays;
  // Re-sends still to place come before any new chunk (SendTracker::peek): a new chunk is
  // looked at only once they all sit in rail queues, where the scan above finds them.
}

bool SendComm::mustWait(const core::SendTracker::Entry& e) {
  if (e.resend || oldestAtRiskSeq_ == UINT64_MAX) return false;
  // A receive that far ahead shares the slot and epoch of a chunk at risk, or leads to one.
  if (pool_[e.message].recvSeq >= oldestAtRiskSeq_ + wire::kAliasFreeAhead) return true;
  return atRiskOverlaps(e);  // after the replays land, or the fence says they need not
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
    uint32_t key = t.remoteKeys[r];
    // Simulated rejection (fault_plan.h, `reject`): mlx5 and rxe keep a key's variant in its
    // low byte, so this names the same memory region with a key it does not answer to.
    if (faults_.reject(r)) key ^= 0x80;
    int rc = rail.qp->postWriteImm(workId(Work::kData), q.data + offset, uint32_t(e.bytes),
                                   t.memory ? t.memory->lkey[r] : 0, t.remoteAddress + offset, key,
                                   wire::encodeImm(imm));
    if (rc == ENOMEM) return;  // the send queue is full: the next pass
    if (rc != 0) {
      failRail(r, nowNs, std::string("ibv_post_send failed: ") + std::strerror(rc));
      return;
    }
    tracker_.setPosted(r, tracker_.posted(r) + 1);
    rail.writesPosted++;
  }
}

// The receiver's NIC rejected the oldest data write of rail r. Once per chunk it is handled as a
// path failure (the rail fails, the fence settles what landed, the chunk is replayed): a
// responder can reject a sound write through a fault of its own (docs/net-contract.md). The
// same chunk rejected a second time, on any rail, is ours to fix: the comm fails with the
// status named. False when the comm failed.
bool SendComm::replayRejected(int r, const ibv_wc& c) {
  uint32_t times = tracker_.rejectOldest(r);
  char why[320];
  std::snprintf(why, sizeof(why),
                "rail %d (%s): %s (%s, vendor error 0x%x) on a data write: the receiver's NIC "
                "rejected it",
                r, health_.info(r).name.c_str(), statusName(c.status),
                IbRails::instance().lib()->statusText(c.status), c.vendor_err);
  if (times >= 2) {
    failComm(abi::kInternalError,
             std::string(why) +
                 ", and it had rejected the same chunk before: the key, address or length is "
                 "wrong (a bug, not a path failure), and replaying it would fail again");
    return false;
  }
  rejectedReplays_++;
  AP_WARN(kFlags,
          "comm 0x%llx ib send %s; the rail fails and the chunk is replayed (a second rejection "
          "of it fails the comm)",
          (unsigned long long)commId_, why);
  return true;
}

// True when chunks completed (room for more).
bool SendComm::pollCompletions(uint64_t& nowNs) {
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
      if (cls == CompletionClass::kLocalError) {
        char why[256];
        std::snprintf(why, sizeof(why),
                      "rail %d (%s): %s (%s, vendor error 0x%x) on a %s: a local protection, "
                      "length or access violation is a bug, not a path failure; replaying it "
                      "would fail again",
                      r, health_.info(r).name.c_str(), statusName(c.status),
                      IbRails::instance().lib()->statusText(c.status), c.vendor_err,
                      work == Work::kData ? "data write" : "probe");
        failComm(abi::kInternalError, why);
        return completed;
      }
      if (cls == CompletionClass::kRejected && work == Work::kData && !replayRejected(r, c)) {
        return completed;
      }
      if (cls != CompletionClass::kSuccess) {  // a path failure, or a rejection to replay
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
          rail.writesAcked++;
          tracker_.acknowledge(r, 1, [&](const core::SendTracker::Entry& e) {
            striper_.onCompleted(r, e.bytes, nowNs);
            if (e.resend && replayFailedNs_ != 0) {
              AP_INFO(kFlags,
                      "comm 0x%llx ib send: the first replayed chunk completed on rail %d "
                      "%.1f ms after rail %d failed",
                      (unsigned long long)commId_, r,
                      double(monotonicNs() - replayFailedNs_) * 1e-6, replayFailedRail_);
              replayFailedNs_ = 0;
            }
            delivered(r, e);
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

}  // namespace autopilot::net::ib

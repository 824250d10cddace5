#include "net_plugin/transport/ibverbs/recv_comm.h"

#include <arpa/inet.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "net_plugin/transport/ibverbs/completion.h"
#include "net_plugin/transport/ibverbs/ib_config.h"

namespace autopilot::net::ib {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
constexpr int kPollBatch = 32;
constexpr int kReplenishBatch = 16;

// Work request ids: the kind in the top byte, the request slot below.
enum class Work : uint8_t { kReceive = 1, kCts = 2, kFlush = 3 };
uint64_t workId(Work w, uint64_t low = 0) { return uint64_t(w) << 56 | low; }
Work workOf(uint64_t id) { return Work(id >> 56); }

std::vector<core::RailHealth::RailInfo> railInfos(const RecvCommSetup& setup) {
  std::vector<core::RailHealth::RailInfo> out;
  for (const RailSetup& rs : setup.rails) {
    const IbRail& rail = IbRails::instance().rails()[size_t(rs.global)];
    out.push_back({rail.telemetryId, rail.name, rail.standby});
  }
  return out;
}

core::CommConfig fittedConfig() {
  core::CommConfig config = core::commConfig();
  config.health.failure.stallTimeoutNs = stallTimeoutNs(config.health.failure.stallTimeoutNs);
  return config;
}

}  // namespace

std::unique_ptr<RecvComm> RecvComm::create(RecvCommSetup setup) {
  std::unique_ptr<RecvComm> comm(new RecvComm(setup));
  wire::ControlMessage accept;
  accept.type = wire::ControlType::kAccept;
  accept.connectionId = comm->connectionId_;
  accept.railCount = uint8_t(comm->nRails_);
  accept.regionAddress = comm->area_->address(kProbeAreaAt);
  uint64_t now = monotonicNs();
  for (int r = 0; r < comm->nRails_; ++r) {
    Rail& rail = comm->rails_[r];
    if (!rail.qp) continue;
    comm->replenish(r, now);  // receives are posted before the sender learns the QP
    if (rail.qp) accept.endpoints[r] = rail.qp->endpoint(comm->area_->memory().rkey[r]);
  }
  comm->control_->send(accept);
  return comm;
}

RecvComm::RecvComm(RecvCommSetup& setup)
    : RecvEngine(kMagic, setup.commId, "ib recv", fittedConfig(), railInfos(setup), kSlots),
      connectionId_(setup.connectionId),
      trafficClass_(setup.trafficClass),
      rails_(new Rail[setup.rails.size()]),
      control_(std::move(setup.control)),
      area_(std::move(setup.area)),
      fifoAddress_(setup.fifoAddress),
      cts_(new CtsState[kSlots]),
      flushes_(new FlushReq[kFlushes]) {
  uint64_t now = monotonicNs();
  for (int r = 0; r < nRails_; ++r) {
    RailSetup& rs = setup.rails[size_t(r)];
    Rail& rail = rails_[r];
    railIds_[r] = rs.global;
    rail.global = rs.global;
    rail.fifoKey = rs.remoteKey;
    rail.port.start(rs.global, setup.faults);
    if (rs.qp && rs.qp->connected()) {
      rail.qp = std::move(rs.qp);
      health_.connected(r, now);
    }
    // Rails not connected are the sender's to re-create (REPLACE).
  }
  faults_ = core::FaultView(setup.faults, railIds_, nRails_);
  for (int i = 0; i < kFlushes; ++i) flushes_[i].owner = this;
}

RecvComm::~RecvComm() {
  for (int r = 0; r < nRails_; ++r) {
    rails_[r].qp.reset();  // before the area they write from
    rails_[r].flushQp.reset();
  }
  if (fences_ > 0) {
    AP_INFO(kFlags,
            "comm 0x%llx ib recv closed: %llu fence%s; of the writes the sender gave up on, "
            "%llu landed late (before the fence) and %llu were cut off by it",
            (unsigned long long)commId_, (unsigned long long)fences_, fences_ == 1 ? "" : "s",
            (unsigned long long)lateWrites_, (unsigned long long)cutWrites_);
  }
  if (staleChunks_ > 0) {
    AP_INFO(kFlags, "comm 0x%llx ib recv closed: %llu late duplicate chunk%s ignored",
            (unsigned long long)commId_, (unsigned long long)staleChunks_,
            staleChunks_ == 1 ? "" : "s");
  }
}

// ---------------------------------------------------------------------------- requests

bool RecvComm::slotReusable(const RecvRequest& q) const {
  const CtsState& cts = ctsOf(q);
  if (cts.rail >= 0) return false;
  return cts.fenceRail < 0 || rails_[cts.fenceRail].senderDownGen >= cts.fenceGen;
}

abi::Result RecvComm::irecv(int n, void** data, const size_t* sizes, const int* tags,
                            void* const* mhandles, void** request) {
  *request = nullptr;
  const MemoryHandle* memory[core::kMaxRecvsPerRequest] = {};
  for (int i = 0; i < n && i < config_.maxRecvs && failed_ == abi::kSuccess; ++i) {
    memory[i] = mhandles ? memoryOf(this, mhandles[i]) : nullptr;
    if (sizes[i] > 0 && (memory[i] == nullptr || !memory[i]->covers(data[i], sizes[i]))) {
      AP_WARN(kFlags,
              "irecv buffer %d (%zu bytes at %p) is not inside a registration made with "
              "regMr on this comm",
              i, sizes[i], data[i]);
      return abi::kInvalidArgument;
    }
  }
  RecvRequest* q = nullptr;
  abi::Result rc = postReceive(n, data, sizes, tags, &q);
  if (q == nullptr) return rc;
  if (failed_ != abi::kSuccess) {
    *request = static_cast<RequestHeader*>(q);  // test() reports the comm's error
    return rc;
  }
  wire::CtsEntry entry;
  entry.seq = q->seq;
  entry.n = n;
  entry.railCount = nRails_;
  for (int i = 0; i < n; ++i) {
    entry.buffers[i].address = reinterpret_cast<uintptr_t>(data[i]);
    entry.buffers[i].size = sizes[i];
    entry.buffers[i].tag = tags[i];
    for (int r = 0; r < nRails_ && memory[i]; ++r) entry.buffers[i].rkeys[r] = memory[i]->rkey[r];
  }
  wire::encodeCts(entry, area_->data() + (q->seq % kSlots) * wire::kCtsBytes);
  CtsState& cts = ctsOf(*q);
  cts.landed = false;
  cts.pending = true;
  cts.fenceRail = -1;
  *request = static_cast<RequestHeader*>(q);
  progress(monotonicNs());
  return rc;
}

// ---------------------------------------------------------------------------- flush

abi::Result RecvComm::iflush(int n, void* const* data, const int* sizes, void* const* mhandles,
                             RequestHeader* done, void** request) {
  *request = nullptr;
  if (failed_ != abi::kSuccess) return failed_;
  if (n < 1 || n > core::kMaxRecvsPerRequest || data == nullptr || sizes == nullptr ||
      mhandles == nullptr) {
    AP_WARN(kFlags, "iflush with %d buffers: invalid arguments", n);
    return abi::kInvalidArgument;
  }
  FlushReq* q = nullptr;
  for (int i = 0; i < kFlushes && q == nullptr; ++i) {
    if (!flushes_[i].inUse) q = &flushes_[i];
  }
  if (q == nullptr) return abi::kSuccess;  // NULL: retry later
  // NCCL flushes only GPU memory; the reads are the same for any registered buffer (which is
  // how the tests exercise them on Soft-RoCE).
  int posted = 0;
  for (int r = 0; r < nRails_; ++r) {
    Rail& rail = rails_[r];
    if (!(railsWithData_ & (1u << r)) || !health_.live(r) || rail.flushBroken) continue;
    if (!rail.flushQp) {
      auto qp = std::make_unique<RailQp>();
      std::string error;
      if (!qp->create(rail.global, {kFlushDepth, 0}, &error, RailQp::kFlushAccess) ||
          !qp->connect(qp->endpoint(0), trafficClass_, &error)) {
        AP_WARN(kFlags, "comm 0x%llx ib recv rail %d: no loopback queue pair for flushes: %s",
                (unsigned long long)commId_, r, error.c_str());
        continue;
      }
      rail.flushQp = std::move(qp);
      AP_INFO(kFlags, "comm 0x%llx ib recv rail %d: loopback queue pair for flushes ready",
              (unsigned long long)commId_, r);
    }
    for (int i = 0; i < n; ++i) {
      const MemoryHandle* mh = memoryOf(this, mhandles[i]);
      if (sizes[i] <= 0 || mh == nullptr || !mh->covers(data[i], 1)) continue;
      int rc = rail.flushQp->postRead(workId(Work::kFlush, uint64_t(q - flushes_.get())),
                                      area_->data() + kFlushScratchAt, 1, area_->memory().lkey[r],
                                      reinterpret_cast<uintptr_t>(data[i]), mh->rkey[r]);
      if (rc != 0) {
        AP_WARN_ONCE(kFlags, "iflush: ibv_post_send on a flush queue pair failed: %s",
                     std::strerror(rc));
        continue;
      }
      posted++;
      rail.flushReads++;
    }
  }
  railsWithData_ = 0;
  if (posted == 0) {
    *request = done;
    return abi::kSuccess;
  }
  q->inUse = true;
  q->outstanding = posted;
  flushesOutstanding_ += posted;
  *request = static_cast<RequestHeader*>(q);
  return abi::kSuccess;
}

void RecvComm::pollFlushes() {
  ibv_wc wc[kPollBatch];
  for (int r = 0; r < nRails_; ++r) {
    Rail& rail = rails_[r];
    if (!rail.flushQp || rail.flushReads == 0) continue;
    int n = rail.flushQp->poll(wc, kPollBatch);
    for (int i = 0; i < n; ++i) {
      // Every read reports, successful or not (after an error the device flushes the rest).
      flushes_[wc[i].wr_id & 0xff].outstanding--;
      flushesOutstanding_--;
      rail.flushReads--;
      if (wc[i].status != IBV_WC_SUCCESS && !rail.flushBroken) {
        rail.flushBroken = true;
        // The loopback path of a NIC that just failed: what it wrote was acknowledged before
        // the failure, and nothing else can flush it. The QP is re-created when drained.
        AP_WARN(kFlags,
                "comm 0x%llx ib recv rail %d: a flush read failed (%s); the flush "
                "completes without it",
                (unsigned long long)commId_, r, statusName(wc[i].status));
      }
    }
    if (rail.flushBroken && rail.flushReads == 0) {
      rail.flushQp.reset();
      rail.flushBroken = false;
    }
  }
}

abi::Result RecvComm::testFlush(FlushReq* q, int* done) {
  *done = 0;
  if (!q->inUse) {
    AP_WARN_ONCE(kFlags, "test() on a flush request that is not in flight");
    return abi::kInvalidArgument;
  }
  progress(monotonicNs());
  if (q->outstanding == 0) {
    q->inUse = false;
    *done = 1;
    return abi::kSuccess;
  }
  return failed_;
}

// ---------------------------------------------------------------------------- progress

void RecvComm::progress(uint64_t nowNs) {
  IbRails::instance().events().poll(nowNs);
  faults_.refresh(nowNs);
  if (failed_ != abi::kSuccess) return;
  const auto pass = beginPass(nowNs);  // ends with this pass
  pollControl(nowNs);
  pollCompletions(nowNs);
  if (flushesOutstanding_ > 0) pollFlushes();
  announce(nowNs);
  checkHealth(nowNs);
}

void RecvComm::pollControl(uint64_t nowNs) {
  control_->serve(
      connectionId_, nowNs, commId_, "ib recv",
      [&](const wire::ControlMessage& m) {
        if (m.type == wire::ControlType::kReplace) {
          replace(m, nowNs);
        } else if (m.type == wire::ControlType::kRailDown) {
          senderDown(m, nowNs);
        } else {
          failComm(abi::kRemoteError, "protocol error: unexpected control message");
        }
        return failed_ == abi::kSuccess;
      },
      [&](const std::string& error) { failComm(abi::kRemoteError, error); });
}

void RecvComm::pollCompletions(uint64_t nowNs) {
  ibv_wc wc[kPollBatch];
  for (int r = 0; r < nRails_; ++r) {
    Rail& rail = rails_[r];
    if (!rail.qp) continue;
    int n = rail.qp->poll(wc, kPollBatch);
    if (n < 0) {
      failRail(r, nowNs, "ibv_poll_cq failed");
      continue;
    }
    // A path failure or a protocol error fails the rail after the batch: the entries after it
    // can still be receives that completed before, and each is the only record of its chunk.
    std::string failure;
    for (int i = 0; i < n; ++i) {
      const ibv_wc& c = wc[i];
      CompletionClass cls = classifyCompletion(c.status);
      const bool cts = workOf(c.wr_id) == Work::kCts;
      if (cls == CompletionClass::kLocalError || (cls == CompletionClass::kRejected && cts)) {
        char why[256];
        std::snprintf(why, sizeof(why),
                      "rail %d (%s): %s (%s, vendor error 0x%x) on a %s: a protection, length or "
                      "access violation is a bug, not a path failure",
                      r, health_.info(r).name.c_str(), statusName(c.status),
                      IbRails::instance().lib()->statusText(c.status), c.vendor_err,
                      cts ? "clear-to-send write" : "receive");
        failComm(abi::kInternalError, why);
        return;
      }
      if (cls == CompletionClass::kRejected) {
        // This side's NIC rejected an incoming write (its QP is in the error state now). The
        // sender got the same status: it fails the rail and replays the chunk once, and fails
        // its comm if the chunk is rejected again (send_comm.cc, replayRejected).
        AP_WARN(kFlags,
                "comm 0x%llx ib recv: rail %d (%s): %s (vendor error 0x%x) on a receive: this "
                "NIC rejected a write; the rail fails and the sender replays the chunk",
                (unsigned long long)commId_, r, health_.info(r).name.c_str(), statusName(c.status),
                c.vendor_err);
      }
      if (cls != CompletionClass::kSuccess) {  // a path failure, or a rejected write
        if (failure.empty()) {
          failure = std::string(statusName(c.status)) + " (" +
                    IbRails::instance().lib()->statusText(c.status) + ")";
        }
        continue;
      }
      const char* protocolError = completed(r, c, nowNs, false);
      if (protocolError != nullptr && failure.empty()) failure = protocolError;
    }
    if (!failure.empty()) {
      failRail(r, nowNs, failure);
    } else {
      replenish(r, nowNs);
    }
  }
}

const char* RecvComm::completed(int r, const ibv_wc& c, uint64_t nowNs, bool draining) {
  Rail& rail = rails_[r];
  if (workOf(c.wr_id) == Work::kCts) {
    CtsState& cts = cts_[c.wr_id & 0xff];
    cts.rail = -1;
    cts.landed = true;
    rail.ctsInFlight--;
    if (!draining) health_.failure(r).onProgress(nowNs);
    return nullptr;
  }
  rail.recvsPosted--;
  rail.writesLanded++;
  wire::ImmFields f;
  if (c.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(c.wc_flags & IBV_WC_WITH_IMM) ||
      !wire::decodeImm(ntohl(c.imm_data), &f)) {
    return "protocol error: a receive completion without a valid immediate";
  }
  if (!draining) {
    if (!health_.live(r)) {
      // A re-created rail: the sender verified it with its probe write before sending data.
      rail.port.catchUp();
      health_.rejoin(r, nowNs);
    }
    health_.failure(r).onProgress(nowNs);
    lastDataRail_ = r;
  }
  railsWithData_ |= 1u << r;  // flushed through this NIC even if it fails now
  RecvRequest& q = slots_[f.slot];
  if (q.state != RecvRequest::State::kPosted || wire::immEpoch(q.seq) != f.epoch) {
    staleChunks_++;  // a replayed duplicate of a request that completed from the first copy
    return nullptr;
  }
  if (f.buffer >= uint32_t(q.n)) {
    return "protocol error: data for a buffer the receive does not have";
  }
  if (landChunk(r, q, f.buffer, f.chunk, f.chunks, c.byte_len) ==
      core::ChunkBitmap::Mark::kInvalid) {
    return "protocol error: a chunk outside the message's chunk plan or the posted buffer";
  }
  return nullptr;
}

void RecvComm::drain(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  // In the error state the QP takes nothing more, so what the CQ holds now is everything the
  // sender may have seen acknowledged. Bounded: the CQ holds at most its depth, and the flush
  // of what was posted adds no more than that.
  rail.qp->stop();
  ibv_wc wc[kPollBatch];
  constexpr int kMaxRounds = (kRecvDepth + kSendDepth) / kPollBatch + 2;
  for (int round = 0; round < kMaxRounds; ++round) {
    int n = rail.qp->poll(wc, kPollBatch);
    if (n <= 0) return;
    for (int i = 0; i < n; ++i) {
      if (wc[i].status == IBV_WC_SUCCESS) completed(r, wc[i], nowNs, true);
    }
  }
}

void RecvComm::replenish(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  int missing = kRecvDepth - rail.recvsPosted;
  if (missing < kReplenishBatch && rail.recvsPosted > 0) return;
  rail.recvsPosted += rail.qp->postRecvs(workId(Work::kReceive), missing);
  if (rail.recvsPosted == 0) failRail(r, nowNs, "ibv_post_recv failed");
}

void RecvComm::announce(uint64_t nowNs) {
  // Entries go out in sequence order (the sender consumes its FIFO in that order).
  for (uint64_t s = nextSeq_ - std::min<uint64_t>(nextSeq_, kSlots); s < nextSeq_; ++s) {
    RecvRequest& q = slots_[s % kSlots];
    if (q.state != RecvRequest::State::kPosted || q.seq != s || !ctsOf(q).pending) continue;
    int r = controlRail();
    if (r < 0) return;  // repeated when a rail (re-)joins
    Rail& rail = rails_[r];
    size_t at = (s % kSlots) * wire::kCtsBytes;
    int rc = rail.qp->postWrite(workId(Work::kCts, s % kSlots), area_->data() + at,
                                uint32_t(wire::kCtsBytes), area_->memory().lkey[r],
                                fifoAddress_ + at, rail.fifoKey);
    if (rc == ENOMEM) return;
    if (rc != 0) {
      failRail(r, nowNs, std::string("ibv_post_send failed: ") + std::strerror(rc));
      continue;
    }
    ctsOf(q).pending = false;
    ctsOf(q).rail = r;
    rail.ctsInFlight++;
  }
}

}  // namespace autopilot::net::ib

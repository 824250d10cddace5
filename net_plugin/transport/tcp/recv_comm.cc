#include "net_plugin/transport/tcp/recv_comm.h"

#include <poll.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "net_plugin/core/fault_injector.h"

namespace autopilot::net::tcp {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
constexpr uint64_t kReadBudgetPerPass = 2 << 20;  // per rail: rails take turns (see send_comm.cc)
constexpr uint64_t kDirectReadMin = 16 << 10;  // smaller payload remainders go via staging
constexpr uint64_t kAcceptCheckNs = 1'000'000;
constexpr int kDirectReadRails = 2;
constexpr uint64_t kTcpSampleNs = 5'000'000;
constexpr uint64_t kEvaluateNs = 20'000'000;

}  // namespace

RecvComm::RecvComm(RecvCommSetup setup)
    : CommBase(kMagic),
      commId_(setup.commId),
      connectionId_(setup.connectionId),
      config_(core::commConfig()),
      nRails_(int(setup.rails.size())),
      rails_(new Rail[setup.rails.size()]),
      slots_(new RecvRequest[kSlots]) {
  acceptor_.moveFrom(*setup.acceptor);
  acceptor_.role = "recv comm";
  uint64_t now = monotonicNs();
  std::vector<core::RailHealth::RailInfo> infos;
  std::vector<int> telemetryIds;
  for (const RailSetup& rs : setup.rails) {
    infos.push_back({rs.telemetryId, rs.name, rs.standby});
    telemetryIds.push_back(rs.telemetryId);
  }
  health_.init(commId_, "recv", infos, config_.health, now);
  metrics_.init(telemetryIds);
  for (int r = 0; r < nRails_; ++r) {
    RailSetup& rs = setup.rails[size_t(r)];
    rails_[r].globalIndex = rs.globalIndex;
    if (rs.fd.valid()) {
      rails_[r].link.attach(std::move(rs.fd), rs.generation);
      health_.connected(r, now);
    }
    // Rails not connected yet are the sender's to bring up; nothing to schedule here.
  }
  for (int i = 0; i < kSlots; ++i) {
    RecvRequest& q = slots_[i];
    q.owner = this;
    q.kind = RequestKind::kRecv;
    for (auto& b : q.bitmaps) b = core::ChunkBitmap(config_.chunks.maxChunks);
  }
}

RecvComm::~RecvComm() {
  for (int r = 0; r < nRails_; ++r) rails_[r].link.detach(false);
  acceptor_.close();
}

bool RecvComm::simulatedDown(int r) const {
  return core::FaultInjector::instance().down(rails_[r].globalIndex);
}

bool RecvComm::simulatedDeaf(int r) const {
  return core::FaultInjector::instance().deaf(rails_[r].globalIndex);
}

bool RecvComm::outstanding() const { return posted_ > 0; }

void RecvComm::failComm(abi::Result error, const std::string& reason) {
  if (failed_ != abi::kSuccess) return;
  failed_ = error;
  AP_WARN(kFlags, "comm 0x%llx recv: %s; every pending receive fails", (unsigned long long)commId_,
          reason.c_str());
}

// ---------------------------------------------------------------------------- requests

abi::Result RecvComm::irecv(int n, void** data, const size_t* sizes, const int* tags,
                            void** request) {
  *request = nullptr;
  if (failed_ != abi::kSuccess) return failed_;
  if (n < 1 || n > config_.maxRecvs) {
    AP_WARN(kFlags, "irecv with %d buffers: this plugin takes 1 to %d", n, config_.maxRecvs);
    return abi::kInvalidArgument;
  }
  RecvRequest& q = slots_[nextSeq_ % kSlots];
  if (q.state != RecvRequest::State::kFree) return abi::kSuccess;  // NULL: retry later
  for (int i = 0; i < n; ++i) {
    if (sizes[i] > wire::kMaxMessageBytes) {
      AP_WARN(kFlags, "irecv buffer of %zu bytes: more than a message may have", sizes[i]);
      return abi::kInvalidArgument;
    }
  }
  q.state = RecvRequest::State::kPosted;
  q.seq = nextSeq_++;
  q.n = n;
  q.completeMask = 0;
  for (int i = 0; i < n; ++i) {
    q.data[i] = static_cast<uint8_t*>(data[i]);
    q.sizes[i] = sizes[i];
    q.tags[i] = tags[i];
    q.received[i] = 0;
    q.bitmaps[i].reset();
  }
  posted_++;
  announce(q);
  *request = &q;
  progress(monotonicNs());
  return abi::kSuccess;
}

abi::Result RecvComm::test(RecvRequest* q, int* done, int* sizes) {
  *done = 0;
  if (q->state == RecvRequest::State::kFree) {
    AP_WARN_ONCE(kFlags, "test() on a receive request that is not in flight");
    return abi::kInvalidArgument;
  }
  progress(monotonicNs());
  if (q->state == RecvRequest::State::kDone) {
    *done = 1;
    if (sizes) {
      for (int i = 0; i < q->n; ++i) sizes[i] = int(std::min<uint64_t>(q->received[i], INT_MAX));
    }
    q->state = RecvRequest::State::kFree;
    posted_--;
    return abi::kSuccess;
  }
  return failed_;
}

// ---------------------------------------------------------------------------- announcements

int RecvComm::controlRail() const {
  // Prefer the rail that last delivered data (it works); else the first live one.
  if (lastDataRail_ >= 0 && health_.live(lastDataRail_) && rails_[lastDataRail_].link.up() &&
      !simulatedDown(lastDataRail_)) {
    return lastDataRail_;
  }
  for (int r = 0; r < nRails_; ++r) {
    if (health_.live(r) && rails_[r].link.up() && !simulatedDown(r)) return r;
  }
  return -1;
}

void RecvComm::announce(const RecvRequest& q) {
  int r = controlRail();
  if (r < 0) return;  // repeated when a rail (re-)joins
  core::PostedReceive posted;
  posted.seq = q.seq;
  posted.n = q.n;
  for (int i = 0; i < q.n; ++i) {
    posted.sizes[i] = q.sizes[i];
    posted.tags[i] = q.tags[i];
  }
  uint8_t frame[wire::kFrameHeaderBytes + wire::kMaxCtsBodyBytes];
  size_t len = wire::encodeCts(posted, frame);
  // A full control queue means the peer has not read this rail for a long time; the failure
  // detector will fail it and announceAll() repeats everything on another rail.
  rails_[r].link.queueControl(frame, len);
}

void RecvComm::announceAll() {
  for (uint64_t s = nextSeq_ - std::min<uint64_t>(nextSeq_, kSlots); s < nextSeq_; ++s) {
    const RecvRequest& q = slots_[s % kSlots];
    if (q.state == RecvRequest::State::kPosted && q.seq == s) announce(q);
  }
}

// ---------------------------------------------------------------------------- progress

void RecvComm::progress(uint64_t nowNs) {
  nowNs_ = nowNs;
  core::FaultInjector::instance().refresh(nowNs);
  if (failed_ != abi::kSuccess) return;
  if (nowNs >= nextAcceptNs_) {
    nextAcceptNs_ = nowNs + kAcceptCheckNs;
    uint32_t paused = 0;
    for (int r = 0; r < nRails_; ++r) {
      if (simulatedDown(r)) paused |= 1u << r;
    }
    acceptor_.progress(nowNs, paused, *this);
  }
  pollfd fds[wire::kMaxRails];
  int which[wire::kMaxRails];
  int n = 0;
  firstRail_ = (firstRail_ + 1) % nRails_;  // rotating service order, as on the sender
  for (int i = 0; i < nRails_; ++i) {
    int r = (firstRail_ + i) % nRails_;
    if (health_.live(r) && rails_[r].link.up() && !simulatedDown(r) &&
        !simulatedDeaf(r)) {
      fds[n] = {rails_[r].link.fd(), POLLIN, 0};
      which[n++] = r;
    }
  }
  if (n <= kDirectReadRails) {
    // One or two rails: reading each directly costs no more than poll() when idle, and one
    // system call less on the latency path when data is there.
    for (int i = 0; i < n; ++i) readRail(which[i], nowNs);
  } else if (::poll(fds, nfds_t(n), 0) >= 0) {
    // Bytes already staged (a previous pass stopped at its budget) are parsed even when the
    // socket itself has nothing new.
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents != 0 || rails_[which[i]].link.stagedBytes() > 0) readRail(which[i], nowNs);
    }
  }
  // Acknowledgements go out at the end of every pass: the sender's completions and windows
  // depend on them, and nothing guarantees another call on this comm soon.
  for (int r = 0; r < nRails_; ++r) {
    if (health_.live(r) && rails_[r].link.up() && !simulatedDown(r)) flushRail(r, nowNs);
  }
  checkHealth(nowNs);
}

void RecvComm::readRail(int r, uint64_t nowNs) {
  RailLink& link = rails_[r].link;
  uint64_t budget = kReadBudgetPerPass;
  while (budget > 0) {
    if (link.inPayload) {
      uint64_t take = std::min<uint64_t>(link.remaining, link.stagedBytes());
      if (take > 0) {
        if (link.dst) {
          std::memcpy(link.dst, link.staged(), take);
          link.dst += take;
        }
        link.consume(take);
        link.remaining -= take;
      }
      if (link.remaining > 0) {
        IoResult res;
        if (link.dst && link.remaining >= kDirectReadMin) {
          res = link.readInto(link.dst, link.remaining);
          if (res.status == Io::kOk) {
            link.dst += res.bytes;
            link.remaining -= res.bytes;
          }
        } else {
          res = link.fill();  // small tail or discarded bytes: also picks up following frames
        }
        if (res.status == Io::kError) {
          failRail(r, nowNs, "read: " + errnoText(res.error));
          return;
        }
        if (res.status == Io::kClosed) {
          failRail(r, nowNs, "the sender closed the connection in the middle of a chunk");
          return;
        }
        if (res.status == Io::kWouldBlock) return;
        budget -= std::min<uint64_t>(budget, res.bytes);
        continue;
      }
      finishChunk(r, nowNs);
      continue;
    }
    if (link.stagedBytes() < wire::kFrameHeaderBytes) {
      IoResult res = link.fill();
      if (res.status == Io::kError) {
        failRail(r, nowNs, "read: " + errnoText(res.error));
        return;
      }
      if (res.status == Io::kClosed) {
        failRail(r, nowNs, "the sender closed the connection", outstanding());
        return;
      }
      if (res.status == Io::kWouldBlock) return;
      budget -= std::min<uint64_t>(budget, res.bytes);
      continue;
    }
    wire::FrameHeader h;
    wire::DecodeError e = wire::decodeFrameHeader(link.staged(), link.stagedBytes(), &h);
    if (e == wire::DecodeError::kOk && h.type == wire::FrameType::kPing) {
      // The sender wants proof that we are alive (another rail stalled): answer at once.
      uint8_t pong[wire::kFrameHeaderBytes];
      link.queueControl(pong, wire::encodeLiveness(wire::FrameType::kPong, h.seq, pong));
      link.consume(wire::kFrameHeaderBytes);
      continue;
    }
    if (e != wire::DecodeError::kOk || h.type != wire::FrameType::kData) {
      failRail(r, nowNs, std::string("protocol error from the sender: ") +
                             (e != wire::DecodeError::kOk ? wire::decodeErrorText(e)
                                                          : "unexpected frame type"));
      return;
    }
    link.consume(wire::kFrameHeaderBytes);
    if (!beginChunk(r, h, nowNs)) return;
  }
}

// Decides where a DATA frame's payload goes. False when the rail was failed.
bool RecvComm::beginChunk(int r, const wire::FrameHeader& h, uint64_t nowNs) {
  RailLink& link = rails_[r].link;
  link.frame = h;
  link.inPayload = true;
  link.remaining = h.length;
  link.dst = nullptr;
  link.landingSlot = -1;
  if (h.seq >= nextSeq_) {
    failRail(r, nowNs, "protocol error: data for a receive that was never posted");
    return false;
  }
  int slot = int(h.seq % kSlots);
  RecvRequest& q = slots_[slot];
  if (q.state != RecvRequest::State::kPosted || q.seq != h.seq) return true;  // late duplicate
  if (h.buffer >= q.n) {
    failRail(r, nowNs, "protocol error: data for a buffer the receive does not have");
    return false;
  }
  core::ChunkBitmap::Mark m = q.bitmaps[h.buffer].check(h.chunk, h.chunks);
  if (m == core::ChunkBitmap::Mark::kInvalid || h.offset + h.length > q.sizes[h.buffer]) {
    failRail(r, nowNs, "protocol error: chunk outside the posted buffer");
    return false;
  }
  if (m == core::ChunkBitmap::Mark::kDuplicate || (q.completeMask & (1u << h.buffer))) return true;
  link.dst = q.data[h.buffer] + h.offset;
  link.landingSlot = slot;
  return true;
}

void RecvComm::finishChunk(int r, uint64_t nowNs) {
  RailLink& link = rails_[r].link;
  const wire::FrameHeader& h = link.frame;
  link.inPayload = false;
  link.framesConsumed++;
  lastDataRail_ = r;
  health_.failure(r).onProgress(nowNs);
  int slot = link.landingSlot;
  link.landingSlot = -1;
  link.dst = nullptr;
  if (slot < 0) return;
  RecvRequest& q = slots_[slot];
  if (q.bitmaps[h.buffer].mark(h.chunk, h.chunks) != core::ChunkBitmap::Mark::kNew) return;
  q.received[h.buffer] += h.length;
  if (auto* c = metrics_.at(r)) {
    core::RailMetrics::add(c->chunksReceived, 1);
    core::RailMetrics::add(c->bytesReceived, h.length);
  }
  if (!q.bitmaps[h.buffer].complete()) return;
  q.completeMask |= uint8_t(1u << h.buffer);
  if (q.completeMask != uint8_t((1u << q.n) - 1)) return;
  q.state = RecvRequest::State::kDone;
  while (completedBelow_ < nextSeq_) {
    const RecvRequest& w = slots_[completedBelow_ % kSlots];
    if (w.seq == completedBelow_ && w.state == RecvRequest::State::kPosted) break;
    ++completedBelow_;  // done, or already handed back to NCCL (its slot may be reused)
  }
  // Another rail may be half-way through a duplicate of one of this request's chunks: from
  // now on its bytes are discarded, since NCCL owns the buffer once test() reports done.
  for (int o = 0; o < nRails_; ++o) {
    RailLink& other = rails_[o].link;
    if (other.inPayload && other.landingSlot == slot) {
      other.landingSlot = -1;
      other.dst = nullptr;
    }
  }
}

void RecvComm::flushRail(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  RailLink& link = rail.link;
  // The watermark rides on every acknowledgement. When nothing else is posted, NCCL may not call
  // test() again for a long time, and the sender may still wait for copies of chunks that landed
  // (their rail failed before the acknowledgement got through): then the watermark goes out on
  // every live rail, so that one failed rail cannot hide it.
  bool quiet = completedBelow_ == nextSeq_ && link.watermarkSent != completedBelow_;
  if (link.framesConsumed != link.framesAckSent || quiet) {
    uint8_t ack[wire::kFrameHeaderBytes];
    if (link.queueControl(ack, wire::encodeAck(link.framesConsumed, completedBelow_, ack))) {
      link.framesAckSent = link.framesConsumed;
      link.watermarkSent = completedBelow_;
    }
  }
  if (link.controlQueued() == 0) return;
  IoResult res = link.flushControl();
  if (res.status == Io::kError) {
    failRail(r, nowNs, "write: " + errnoText(res.error));
    return;
  }
  if (res.bytes > 0) rail.tcpWatch = true;
}

// ---------------------------------------------------------------------------- failure handling

void RecvComm::failRail(int r, uint64_t nowNs, const std::string& reason, bool warn) {
  if (!health_.fail(r, nowNs, reason, warn)) return;
  rails_[r].link.detach(true);
  rails_[r].tcpWatch = false;
  if (!config_.failover && warn) {
    failComm(abi::kRemoteError, "rail " + std::to_string(r) + " failed and failover is off "
                                "(NCCL_AUTOPILOT_NET_FAILOVER=0)");
    return;
  }
  if (lastDataRail_ == r) lastDataRail_ = -1;
  // Announcements queued or in flight on that rail may be lost: repeat them elsewhere.
  announceAll();
}

void RecvComm::checkHealth(uint64_t nowNs) {
  for (int r = 0; r < nRails_; ++r) {
    Rail& rail = rails_[r];
    if (!health_.live(r) || !rail.link.up() || !config_.failover) continue;
    // What this side sends (announcements, acknowledgements) must be taken by the peer's TCP;
    // a dead link leaves it queued here or unacknowledged in the kernel.
    // A deaf rail (simulated) has lost its inbound direction, TCP's acknowledgements included.
    if (rail.tcpWatch && nowNs - rail.link.lastTcpSampleNs() >= kTcpSampleNs && !simulatedDown(r) &&
        !simulatedDeaf(r)) {
      if (rail.link.sampleTcp(nowNs)) health_.failure(r).onProgress(nowNs);
      if (rail.link.tcpUnacked() == 0) rail.tcpWatch = false;
    }
    core::FailureDetector& fd = health_.failure(r);
    bool held = rail.link.controlQueued() > 0 || (rail.tcpWatch && rail.link.tcpUnacked() > 0);
    fd.setOutstanding(held, nowNs);
    if (held && fd.failed(nowNs, 0, 0) && health_.stallBlamesRail(r, nowNs)) {
      failRail(r, nowNs, "the sender has taken none of our control frames for " +
                             std::to_string(fd.stalledForNs(nowNs) / 1000000) + " ms");
    }
  }
  if (nowNs >= nextEvaluateNs_) {
    nextEvaluateNs_ = nowNs + kEvaluateNs;
    health_.evaluate(nowNs, nullptr);
  }
  uint64_t since = health_.noLiveRailSinceNs();
  if (since != 0 && nowNs - since >= config_.peerTimeoutNs && outstanding()) {
    failComm(abi::kRemoteError, "no rail left for " + std::to_string((nowNs - since) / 1000000) +
                                    " ms (the sender is gone or every link is down)");
  }
}

wire::AckStatus RecvComm::decide(const wire::Hello& hello, const SockAddr&) {
  if (hello.connectionId != connectionId_) return wire::AckStatus::kWrongConnection;
  if (hello.railCount != nRails_ || hello.railIndex >= nRails_) return wire::AckStatus::kBadRail;
  if (hello.generation <= rails_[hello.railIndex].link.generation()) {
    return wire::AckStatus::kStaleGeneration;
  }
  return wire::AckStatus::kAccepted;
}

void RecvComm::install(const wire::Hello& hello, Fd fd, const SockAddr& peer) {
  int r = hello.railIndex;
  uint64_t now = nowNs_;
  if (health_.live(r)) {
    // The sender gave up on this connection (it saw no progress): follow it.
    failRail(r, now, "the sender re-connected the rail from " + peer.str(), false);
  }
  rails_[r].link.attach(std::move(fd), hello.generation);
  rails_[r].tcpWatch = false;
  health_.rejoin(r, now);
  announceAll();
}

}  // namespace autopilot::net::tcp

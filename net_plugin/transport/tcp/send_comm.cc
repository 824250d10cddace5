#include "net_plugin/transport/tcp/send_comm.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"

namespace autopilot::net::tcp {

namespace {

// Finishes half-written frames of messages the receiver already completed (writeRail).
constexpr uint8_t kZeros[64 << 10] = {};
constexpr unsigned long kFlags = abi::subsys::kNet;
constexpr int kMaxFramesPerWrite = 16;           // frames gathered into one sendmsg
constexpr uint64_t kMaxBytesPerWrite = 2 << 20;  // per sendmsg
// Per rail and pass: small enough that rails take turns at the CPU (a rail served after
// another's 16 MiB would measure slower than it is), large enough to amortise the pass.
constexpr uint64_t kWriteBudgetPerPass = 2 << 20;
constexpr uint64_t kReadBudgetPerPass = 256 << 10;  // control traffic only
constexpr uint64_t kPacingBurstBytes = 64 << 10;
constexpr uint64_t kPacingQuantumBytes = 64 << 10;

double nominalBytesPerSec(int speedMbps) {
  return double(speedMbps > 0 ? speedMbps : 10000) * 1e6 / 8;
}

std::vector<core::SendEngine::RailInfo> railInfos(const SendCommSetup& setup) {
  std::vector<core::SendEngine::RailInfo> out;
  for (const RailSetup& rs : setup.rails) {
    out.push_back({rs.telemetryId, rs.name, rs.standby, nominalBytesPerSec(rs.speedMbps)});
  }
  return out;
}

}  // namespace

SendComm::SendComm(SendCommSetup setup)
    : SendEngine(kMagic, setup.commId, "send", core::commConfig(), railInfos(setup), 512,
                 uint32_t(abi::kNetMaxRequests)),
      connectionId_(setup.connectionId),
      rails_(new Rail[setup.rails.size()]) {
  std::copy(setup.secret, setup.secret + wire::kSecretBytes, secret_);
  uint64_t now = monotonicNs();
  int globals[wire::kMaxRails] = {};
  for (int r = 0; r < nRails_; ++r) globals[r] = setup.rails[size_t(r)].globalIndex;
  faults_ = core::FaultView(setup.faults, globals, nRails_);
  for (int r = 0; r < nRails_; ++r) {
    RailSetup& rs = setup.rails[size_t(r)];
    Rail& rail = rails_[r];
    rail.local = rs.local;
    rail.remote = rs.remote;
    rail.globalIndex = rs.globalIndex;
    rail.generation = rs.generation;
    rail.nominalBytesPerSec = nominalBytesPerSec(rs.speedMbps);
    if (rs.fd.valid()) {
      rail.link.attach(std::move(rs.fd), rs.generation);
      health_.connected(r, now);
    } else {
      health_.connectFailed(r, now, rs.error);
    }
    striper_.setMode(r, health_.mode(r));
  }
}

SendComm::~SendComm() {
  std::string summary;
  for (int r = 0; r < nRails_; ++r) {
    summary += railSummary(r);
    rails_[r].link.detach(false);
  }
  AP_INFO(kFlags, "comm 0x%llx send closed:%s; %llu late cop%s, %llu probe cop%s",
          (unsigned long long)commId_, summary.c_str(), (unsigned long long)lateCopies_,
          lateCopies_ == 1 ? "y" : "ies", (unsigned long long)probeCopies_,
          probeCopies_ == 1 ? "y" : "ies");
}

abi::Result SendComm::isend(const void* data, size_t size, int tag, void** request) {
  SendRequest* q = nullptr;
  abi::Result rc = postSend(data, size, tag, &q);
  *request = nullptr;
  if (q == nullptr) return rc;
  progress(monotonicNs());
  if (!withdrawIfUnmatched(q)) *request = static_cast<RequestHeader*>(q);
  return rc;
}

// ---------------------------------------------------------------------------- progress

void SendComm::progress(uint64_t nowNs) {
  faults_.refresh(nowNs);
  if (failed_ != abi::kSuccess) return;
  const auto pass = beginPass(nowNs);  // ends with this pass
  followRailNews(nowNs);  // before anything is placed: a rail found dead elsewhere gets nothing
  // Rails are served in a rotating order: with the CPU as the bottleneck, always serving rail
  // 0 first would make it look faster than the others, and the striper would believe it.
  firstRail_ = (firstRail_ + 1) % nRails_;
  // Data whose receive is already announced goes out before anything is read: on the latency
  // path (a send posted after its clear-to-send arrived) the first system call is the write.
  sendReady(nowNs);
  bool gotFrames = false;
  // What is read now is stamped now, not when the pass began: the writes above can take as long
  // as the chunks they send. On a fast local path a lone chunk is written, received and
  // acknowledged within one pass; stamped with the time it was placed, its completion added no
  // busy time to its rail, which was then never measured and kept the small share it re-joined
  // with.
  nowNs = std::max(nowNs, monotonicNs());
  // A rail is read on every pass while an acknowledgement is due on it, while a send waits for
  // its receive's announcement (which any rail may bring), or while no rail is active; else as
  // paced (RailLink::readDue).
  bool pace = !pool_.anyWaiting();
  if (pace) {
    bool anyActive = false;
    for (int r = 0; r < nRails_; ++r) anyActive |= rails_[r].link.active(nowNs);
    pace = anyActive;
  }
  for (int i = 0; i < nRails_; ++i) {
    int r = (firstRail_ + i) % nRails_;
    if (rails_[r].dialer.active()) pumpDialer(r, nowNs);
    RailLink& link = rails_[r].link;
    if (health_.live(r) && link.up() && !simulatedDown(r) && !simulatedDeaf(r) &&
        (!pace || tracker_.queued(r) > 0 || link.readDue(nowNs))) {
      const uint64_t before = link.bytesIn();
      gotFrames |= readRail(r, nowNs);
      link.noteRead(nowNs, link.bytesIn() != before);
    }
  }
  if (gotFrames) sendReady(nowNs);
  checkHealth(nowNs);
}

void SendComm::sendReady(uint64_t nowNs) {
  matchRequests();
  placeChunks(nowNs);
  for (int i = 0; i < nRails_; ++i) {
    int r = (firstRail_ + i) % nRails_;
    if (health_.live(r) && rails_[r].link.up() && !simulatedDown(r) &&
        tracker_.posted(r) < tracker_.queued(r)) {
      writeRail(r, nowNs);
    }
  }
}

// True when frames were handled (acknowledgements or announcements arrived).
bool SendComm::readRail(int r, uint64_t nowNs) {
  RailLink& link = rails_[r].link;
  uint64_t budget = kReadBudgetPerPass;
  bool handled = false;
  while (budget > 0) {
    IoResult res = link.fill();
    if (res.status == Io::kError) {
      failRail(r, nowNs, "read: " + errnoText(res.error));
      return true;
    }
    if (res.status == Io::kClosed) {
      bool busy = tracker_.heldBytes(r) > 0 || pool_.anyWaiting();
      failRail(r, nowNs, "the receiver closed the connection", busy);
      return true;
    }
    budget -= std::min<uint64_t>(budget, res.bytes);
    while (link.stagedBytes() >= wire::kFrameHeaderBytes) {
      wire::FrameHeader h;
      wire::DecodeError e = wire::decodeFrameHeader(link.staged(), link.stagedBytes(), &h);
      if (e != wire::DecodeError::kOk) {
        failRail(r, nowNs,
                 std::string("protocol error from the receiver: ") + wire::decodeErrorText(e));
        return true;
      }
      size_t need = wire::kFrameHeaderBytes + wire::controlBodyBytes(h);
      if (link.stagedBytes() < need) break;
      if (!handleFrame(r, h, link.staged() + wire::kFrameHeaderBytes, nowNs)) return true;
      link.consume(need);
      handled = true;
    }
    if (res.status == Io::kWouldBlock || res.bytes == 0) return handled;
  }
  return handled;
}

// False when the rail was failed (the caller must stop using it).
bool SendComm::handleFrame(int r, const wire::FrameHeader& h, const uint8_t* body, uint64_t nowNs) {
  RailLink& link = rails_[r].link;
  switch (h.type) {
    case wire::FrameType::kCts: {
      core::PostedReceive posted;
      if (wire::decodeCtsBody(h, body, wire::controlBodyBytes(h), &posted) !=
              wire::DecodeError::kOk ||
          matcher_.offer(posted) == core::ReceiveMatcher::Offer::kInvalid) {
        failRail(r, nowNs, "protocol error: malformed or out-of-window receive announcement");
        return false;
      }
      return true;
    }
    case wire::FrameType::kAck: {
      if (h.seq < link.peerAcked) {
        failRail(r, nowNs, "protocol error: acknowledgement count went backwards");
        return false;
      }
      uint64_t delta = h.seq - link.peerAcked;
      bool ok = delta <= tracker_.posted(r) &&
                tracker_.acknowledge(r, uint32_t(delta), [&](const core::SendTracker::Entry& e) {
                  striper_.onCompleted(r, e.bytes, nowNs);
                  // A leftover's slot may already serve a newer send.
                  if (!e.leftover && tracker_.done(e.message)) {
                    pool_[e.message].state = SendRequest::State::kDone;
                  }
                });
      if (!ok) {
        failRail(r, nowNs, "protocol error: acknowledgement of data never sent");
        return false;
      }
      link.peerAcked = h.seq;
      if (delta > 0) health_.failure(r).onProgress(nowNs);
      if (h.offset > peerCompletedBelow_) {
        peerCompletedBelow_ = h.offset;
        if (!completeByPeer(r, nowNs)) return false;
      }
      return true;
    }
    case wire::FrameType::kPong:
      health_.failure(r).onProgress(nowNs);  // the peer is alive and reads this rail
      return true;
    default:
      failRail(r, nowNs, "protocol error: unexpected frame type from the receiver");
      return false;
  }
}

// The receiver completed every receive below peerCompletedBelow_: sends into them are done even
// if acknowledgements of re-sent copies are still outstanding (the receiver may not read them
// until NCCL gives it more to do). False when the rail was failed.
bool SendComm::completeByPeer(int r, uint64_t nowNs) {
  for (uint32_t i = 0; i < pool_.size(); ++i) {
    SendRequest& q = pool_[i];
    if (q.state != SendRequest::State::kActive || q.recvSeq >= peerCompletedBelow_) continue;
    // Chunks never sent (originals a copy overtook, mostly) are no longer in flight.
    struct Withdraw {
      core::RailStriper* striper;
      uint64_t nowNs;
    } withdraw{&striper_, nowNs};
    auto onDropped = [](void* context, int rail, uint64_t bytes) {
      auto* w = static_cast<Withdraw*>(context);
      w->striper->onWithdrawn(rail, bytes, w->nowNs);
    };
    if (!tracker_.completeByPeer(q.index, railsWriting(q.index), onDropped, &withdraw)) {
      failRail(r, nowNs,
               "protocol error: a receive reported complete before all its data was sent");
      return false;
    }
    // Done at once, whatever the rails do next: a copy of one of its chunks half-written on a
    // rail is finished from zeros (writeRail), which the receiver discards, since it completed
    // the receive.
    q.state = SendRequest::State::kDone;
  }
  return true;
}

uint32_t SendComm::railsWriting(uint32_t index) const {
  uint32_t rails = 0;
  for (int k = 0; k < nRails_; ++k) {
    if (rails_[k].link.partialBytes != 0 && tracker_.posted(k) < tracker_.queued(k) &&
        tracker_.entry(k, tracker_.posted(k)).message == index) {
      rails |= 1u << k;
    }
  }
  return rails;
}

void SendComm::writeRail(int r, uint64_t nowNs) {
  Rail& rail = rails_[r];
  RailLink& link = rail.link;
  double rate = faults_.rateBytesPerSec(r);
  core::Pacer* pacer = rate > 0 ? faults_.pacer(r) : nullptr;
  uint64_t budget = kWriteBudgetPerPass;
  if (pacer) {
    // Wait until a worthwhile slice has accumulated: writing the few bytes earned since the
    // previous pass would cost a system call each and cap the paced rate well below its value.
    uint64_t unwritten = tracker_.queuedBytes(r) - tracker_.postedBytes(r);
    // The bucket holds ~5 ms of the rate (at least 64 KiB): a sender descheduled for a moment
    // on a busy machine catches up a little, without bursts that would distort measurements.
    uint64_t burst = std::max<uint64_t>(kPacingBurstBytes, uint64_t(rate * 0.005));
    uint64_t allowance = pacer->allowance(nowNs, rate, burst);
    if (allowance < std::min(unwritten + wire::kFrameHeaderBytes, kPacingQuantumBytes)) return;
    budget = std::min(budget, allowance);
  }
  uint8_t headers[kMaxFramesPerWrite][wire::kFrameHeaderBytes];
  iovec iov[2 * kMaxFramesPerWrite];
  while (budget > 0 && tracker_.posted(r) < tracker_.queued(r)) {
    int iovs = 0;
    uint64_t total = 0;
    uint64_t skip = link.partialBytes;
    uint32_t first = tracker_.posted(r);
    for (int k = 0; k < kMaxFramesPerWrite && first + uint32_t(k) < tracker_.queued(r); ++k) {
      const core::SendTracker::Entry& e = tracker_.entry(r, first + uint32_t(k));
      const SendRequest& q = pool_[e.message];
      const core::ChunkPlan& plan = tracker_.plan(e.message);
      wire::FrameHeader h;
      h.type = wire::FrameType::kData;
      h.buffer = q.buffer;
      h.length = uint32_t(e.bytes);
      h.seq = q.recvSeq;
      h.offset = plan.offset(e.chunk);
      h.chunk = e.chunk;
      h.chunks = plan.count;
      // The first frame may be partly written already: skip what went out, and finish the
      // header that went out.
      if (skip > 0) {
        std::memcpy(headers[k], link.partialHeader, wire::kFrameHeaderBytes);
      } else {
        wire::encodeFrameHeader(h, headers[k]);
      }
      uint64_t hdrSkip = std::min<uint64_t>(skip, wire::kFrameHeaderBytes);
      if (hdrSkip < wire::kFrameHeaderBytes) {
        iov[iovs++] = {headers[k] + hdrSkip, wire::kFrameHeaderBytes - hdrSkip};
        total += wire::kFrameHeaderBytes - hdrSkip;
      }
      uint64_t paySkip = skip - hdrSkip;
      skip = 0;
      if (e.leftover) {
        // The half-written copy of a chunk whose message the receiver completed (the only
        // leftover that is written at all): its message is done and NCCL owns the buffer, so
        // the frame is finished from zeros, which the receiver discards.
        uint64_t n = std::min<uint64_t>(e.bytes - paySkip, sizeof(kZeros));
        if (n > 0) iov[iovs++] = {const_cast<uint8_t*>(kZeros), n};
        total += n;
        break;
      }
      if (e.bytes > paySkip) {
        iov[iovs++] = {const_cast<uint8_t*>(q.data + h.offset + paySkip), e.bytes - paySkip};
        total += e.bytes - paySkip;
      }
      if (total >= kMaxBytesPerWrite) break;
    }
    // Respect the byte budget (pacing) by trimming the tail of the gather list.
    uint64_t allowed = std::min(total, budget);
    uint64_t acc = 0;
    int use = 0;
    for (; use < iovs && acc < allowed; ++use) {
      if (acc + iov[use].iov_len > allowed) iov[use].iov_len = allowed - acc;
      acc += iov[use].iov_len;
    }
    if (use == 0) return;
    IoResult res = writeVec(link.fd(), iov, use);
    if (res.status == Io::kError) {
      failRail(r, nowNs, "write: " + errnoText(res.error));
      return;
    }
    if (res.status == Io::kWouldBlock || res.bytes == 0) return;
    if (pacer) pacer->consume(res.bytes, nowNs, rate);
    budget -= std::min<uint64_t>(budget, res.bytes);
    uint64_t n = res.bytes;
    auto* counters = metrics_.at(r);
    for (int k = 0; n > 0; ++k) {
      const core::SendTracker::Entry& e = tracker_.entry(r, tracker_.posted(r));
      uint64_t frame = wire::kFrameHeaderBytes + e.bytes;
      uint64_t left = frame - link.partialBytes;
      if (n < left) {
        link.partialBytes += n;
        std::memcpy(link.partialHeader, headers[k], wire::kFrameHeaderBytes);
        break;
      }
      n -= left;
      link.partialBytes = 0;
      if (counters) {
        core::RailMetrics::add(counters->chunksSent, 1);
        core::RailMetrics::add(counters->bytesSent, e.bytes);
      }
      tracker_.setPosted(r, tracker_.posted(r) + 1);
    }
    if (res.bytes < acc) return;  // the socket is full
  }
}

}  // namespace autopilot::net::tcp

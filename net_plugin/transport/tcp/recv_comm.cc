#include "net_plugin/transport/tcp/recv_comm.h"

#include <poll.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"

namespace autopilot::net::tcp {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
constexpr uint64_t kReadBudgetPerPass = 2 << 20;  // per rail: rails take turns (see send_comm.cc)
constexpr uint64_t kDirectReadMin = 16 << 10;     // smaller payload remainders go via staging
constexpr uint64_t kAcceptCheckNs = 1'000'000;
constexpr int kDirectReadRails = 2;
// The repetition of announcements backs off to this (an idle comm whose receives wait for
// sends that come late then costs a few frames a second).
constexpr uint64_t kMaxReannounceGapNs = 2'000'000'000;

std::vector<core::RailHealth::RailInfo> railInfos(const RecvCommSetup& setup) {
  std::vector<core::RailHealth::RailInfo> out;
  for (const RailSetup& rs : setup.rails) out.push_back({rs.telemetryId, rs.name, rs.standby});
  return out;
}

}  // namespace

RecvComm::RecvComm(RecvCommSetup setup)
    : RecvEngine(kMagic, setup.commId, "recv", core::commConfig(), railInfos(setup), kSlots),
      connectionId_(setup.connectionId),
      rails_(new Rail[setup.rails.size()]),
      hub_(std::move(setup.hub)),
      mailbox_(setup.mailbox) {
  uint64_t now = monotonicNs();
  int globals[wire::kMaxRails] = {};
  for (int r = 0; r < nRails_; ++r) globals[r] = setup.rails[size_t(r)].globalIndex;
  faults_ = core::FaultView(setup.faults, globals, nRails_);
  for (int r = 0; r < nRails_; ++r) {
    RailSetup& rs = setup.rails[size_t(r)];
    rails_[r].globalIndex = rs.globalIndex;
    news_[r].start(&core::RailNews::instance(), rs.telemetryId);
    if (rs.fd.valid()) {
      rails_[r].link.attach(std::move(rs.fd), rs.generation);
      health_.connected(r, now);
    }
    // Rails not connected yet are the sender's to bring up; nothing to schedule here.
  }
}

RecvComm::~RecvComm() {
  for (int r = 0; r < nRails_; ++r) rails_[r].link.detach(false);
  hub_->release(mailbox_);  // the hub closes its listeners with its last owner
}

bool RecvComm::railCarries(int r) const { return rails_[r].link.up() && !simulatedDown(r); }

// ---------------------------------------------------------------------------- requests

abi::Result RecvComm::irecv(int n, void** data, const size_t* sizes, const int* tags,
                            void** request) {
  RecvRequest* q = nullptr;
  abi::Result rc = postReceive(n, data, sizes, tags, &q);
  *request = q ? static_cast<RequestHeader*>(q) : nullptr;
  if (q == nullptr || failed_ != abi::kSuccess) return rc;  // test() reports the comm's error
  if (posted_ == 1) lastArrivalNs_ = monotonicNs();         // the quiet period starts now
  announce(*q);
  progress(monotonicNs());
  return rc;
}

// ---------------------------------------------------------------------------- announcements

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

void RecvComm::reannounceIfQuiet(uint64_t nowNs) {
  if (!outstanding()) return;
  uint64_t gap = reannounceGapNs_ != 0 ? reannounceGapNs_ : config_.health.failure.stallTimeoutNs;
  uint64_t since = std::max(lastArrivalNs_, reannouncedNs_);
  if (nowNs - since < gap) return;
  announceAll();
  reannouncedNs_ = nowNs;
  reannounceGapNs_ = std::min(gap * 2, kMaxReannounceGapNs);
  if (++reannouncements_ == 1) {
    AP_INFO(kFlags,
            "comm 0x%llx recv: nothing arrived for %llu ms with receives posted: "
            "announcing them again (repeated at a growing interval while it stays quiet)",
            (unsigned long long)commId_, (unsigned long long)((nowNs - since) / 1000000));
  }
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
  faults_.refresh(nowNs);
  if (failed_ != abi::kSuccess) return;
  const auto pass = beginPass(nowNs);  // ends with this pass
  if (nowNs >= nextAcceptNs_) {
    nextAcceptNs_ = nowNs + kAcceptCheckNs;
    uint32_t paused = 0;
    for (int r = 0; r < nRails_; ++r) {
      if (simulatedDown(r)) paused |= 1u << r;
    }
    hub_->serve(nowNs, paused);
  }
  if (mailbox_->any.load(std::memory_order_acquire)) {
    hub_->takeArrivals(*mailbox_, [&](int r, Fd fd, uint32_t generation, const SockAddr& peer) {
      installRail(r, std::move(fd), generation, peer);
    });
  }
  pollfd fds[wire::kMaxRails];
  int which[wire::kMaxRails];
  int n = 0;
  firstRail_ = (firstRail_ + 1) % nRails_;  // rotating service order, as on the sender
  // Quiet rails are read as paced while another rail is active (RailLink::readDue).
  bool pace = false;
  for (int r = 0; r < nRails_; ++r) pace |= rails_[r].link.active(nowNs);
  for (int i = 0; i < nRails_; ++i) {
    int r = (firstRail_ + i) % nRails_;
    RailLink& link = rails_[r].link;
    if (health_.live(r) && link.up() && !simulatedDown(r) && !simulatedDeaf(r) &&
        (!pace || link.readDue(nowNs))) {
      fds[n] = {link.fd(), POLLIN, 0};
      which[n++] = r;
    }
  }
  auto read = [&](int r) {
    RailLink& link = rails_[r].link;
    const uint64_t before = link.bytesIn();
    readRail(r, nowNs);
    link.noteRead(nowNs, link.bytesIn() != before);
  };
  if (n <= kDirectReadRails) {
    // One or two rails: reading each directly costs no more than poll() when idle, and one
    // system call less on the latency path when data is there.
    for (int i = 0; i < n; ++i) read(which[i]);
  } else if (::poll(fds, nfds_t(n), 0) >= 0) {
    // Bytes already staged (a previous pass stopped at its budget) are parsed even when the
    // socket itself has nothing new.
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents != 0 || rails_[which[i]].link.stagedBytes() > 0) read(which[i]);
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
      failRail(
          r, nowNs,
          std::string("protocol error from the sender: ") +
              (e != wire::DecodeError::kOk ? wire::decodeErrorText(e) : "unexpected frame type"));
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
  lastArrivalNs_ = nowNs;
  reannounceGapNs_ = 0;
  health_.failure(r).onProgress(nowNs);
  int slot = link.landingSlot;
  link.landingSlot = -1;
  link.dst = nullptr;
  if (slot < 0) return;
  RecvRequest& q = slots_[slot];
  // beginChunk checked the chunk against the plan and the buffer: it lands once.
  if (landChunk(r, q, h.buffer, h.chunk, h.chunks, h.length) != core::ChunkBitmap::Mark::kNew ||
      q.state != RecvRequest::State::kDone) {
    return;
  }
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

}  // namespace autopilot::net::tcp

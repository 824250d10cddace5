#include "net_plugin/transport/tcp/rail_link.h"

#include <cstring>

namespace autopilot::net::tcp {

RailLink::RailLink() : staging_(new uint8_t[kStagingBytes]), out_(new uint8_t[kControlBytes]) {}

void RailLink::attach(Fd fd, uint32_t generation) {
  detach(false);
  fd_ = std::move(fd);
  generation_ = generation;
}

void RailLink::detach(bool abort) {
  if (abort) {
    fd_.closeWithReset();
  } else {
    fd_.reset();
  }
  head_ = tail_ = 0;
  outHead_ = outTail_ = 0;
  inPayload = false;
  dst = nullptr;
  remaining = 0;
  landingSlot = -1;
  framesConsumed = framesAckSent = peerAcked = watermarkSent = 0;
  partialBytes = 0;
  tcp_ = TcpProgress{};
  lastTcpSampleNs_ = 0;
  lastReadNs_ = lastDataNs_ = 0;
}

IoResult RailLink::fill() {
  if (head_ == tail_) head_ = tail_ = 0;
  // Keep room for a whole control frame at the end; move the unparsed bytes to the front.
  if (kStagingBytes - tail_ < wire::kFrameHeaderBytes + wire::kMaxCtsBodyBytes && head_ > 0) {
    std::memmove(staging_.get(), staging_.get() + head_, tail_ - head_);
    tail_ -= head_;
    head_ = 0;
  }
  if (tail_ == kStagingBytes) return {Io::kOk, 0, 0};
  IoResult r = readSome(fd_.get(), staging_.get() + tail_, kStagingBytes - tail_);
  tail_ += r.bytes;
  bytesIn_ += r.bytes;
  return r;
}

bool RailLink::readDue(uint64_t nowNs) const {
  return inPayload || stagedBytes() > 0 || active(nowNs) || nowNs - lastReadNs_ >= kQuietReadNs;
}

bool RailLink::queueControl(const uint8_t* bytes, size_t n) {
  if (outHead_ == outTail_) outHead_ = outTail_ = 0;
  if (kControlBytes - outTail_ < n && outHead_ > 0) {
    std::memmove(out_.get(), out_.get() + outHead_, outTail_ - outHead_);
    outTail_ -= outHead_;
    outHead_ = 0;
  }
  if (kControlBytes - outTail_ < n) return false;
  std::memcpy(out_.get() + outTail_, bytes, n);
  outTail_ += n;
  return true;
}

IoResult RailLink::flushControl() {
  if (outHead_ == outTail_ || !fd_.valid()) return {Io::kOk, 0, 0};
  IoResult r = writeSome(fd_.get(), out_.get() + outHead_, outTail_ - outHead_);
  outHead_ += r.bytes;
  return r;
}

void RailLink::informDetector(core::FailureDetector& fd, uint64_t nowNs) const {
  const bool fresh = nowNs - lastTcpSampleNs_ <= kTcpFreshNs;
  fd.setRetransmitTimeout(fresh ? tcp_.rtoNs : 0);
  fd.setLocallyQueued(fresh && tcp_.localQueued > 0);
}

bool RailLink::sampleTcp(uint64_t nowNs) {
  lastTcpSampleNs_ = nowNs;
  TcpProgress now;
  if (!fd_.valid() || !tcpProgress(fd_.get(), &now)) return false;
  bool advanced = now.bytesAcked > tcp_.bytesAcked;
  tcp_ = now;
  return advanced;
}

std::string RailLink::interfaceDownReason(const std::string& ifname, bool onNews) {
  std::string why = "its interface " + ifname + " is down or lost its carrier";
  if (onNews) why += " (checked when another connection of this process found the rail dead)";
  return why;
}

}  // namespace autopilot::net::tcp

// RailLink: one rail's TCP connection during the data phase, as seen by one comm: the socket,
// an inbound staging buffer (frames are parsed from it; large DATA payloads bypass it and are
// read straight into the user's buffer), an outbound queue for small control frames, the
// inbound frame being parsed, and the TCP-level progress counters the failure detector uses.
// Buffers are allocated once when the comm is created, never on the data path.
#pragma once

#include <cstdint>
#include <memory>

#include "net_plugin/core/failure_detector.h"
#include "net_plugin/transport/tcp/socket.h"
#include "net_plugin/transport/tcp/wire.h"

namespace autopilot::net::tcp {

class RailLink {
 public:
  static constexpr size_t kStagingBytes = 64 << 10;
  static constexpr size_t kControlBytes = 16 << 10;
  static constexpr uint64_t kTcpFreshNs = 50'000'000;  // how long a kernel sample counts
  // Read pacing. NCCL's proxy calls test() in a loop, and each pass read every rail: a rail
  // with nothing to say cost a system call per pass on both sides (two loopback rails made
  // 12-14 reads per 8-byte message where one rail made 7.5; with small messages kept on one
  // rail, RailStriper::Config::stickyBelowBytes, and this pacing, 9-11). While another rail of
  // the comm is active, a rail that delivered bytes within kActiveNs is read on every pass, a
  // quiet one at most every kQuietReadNs: the first bytes to reach it then wait up to that
  // long, while the active rail keeps the comm's traffic flowing.
  static constexpr uint64_t kActiveNs = 1'000'000;
  static constexpr uint64_t kQuietReadNs = 20'000;

  RailLink();
  RailLink(const RailLink&) = delete;
  RailLink& operator=(const RailLink&) = delete;

  // A new connection replaces whatever was there; all per-connection state starts over.
  void attach(Fd fd, uint32_t generation);
  // Closes the connection: `abort` sends a reset (the rail was declared failed) instead of an
  // orderly end.
  void detach(bool abort);
  bool up() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  uint32_t generation() const { return generation_; }

  // ---- inbound
  // Reads what is available into the staging buffer.
  IoResult fill();
  const uint8_t* staged() const { return staging_.get() + head_; }
  size_t stagedBytes() const { return tail_ - head_; }
  void consume(size_t n) { head_ += n; }
  // Reads directly into `dst` (large payloads).
  IoResult readInto(void* dst, size_t len) {
    IoResult r = readSome(fd_.get(), dst, len);
    bytesIn_ += r.bytes;
    return r;
  }
  uint64_t bytesIn() const { return bytesIn_; }
  // Read pacing: whether a pass should read this rail now, while another rail of the comm is
  // active. A rail that delivered bytes within kActiveNs, or holds a frame in progress, is read
  // on every pass; a quiet one at most every kQuietReadNs. A caller that expects bytes on the
  // rail reads it regardless, and so does a comm whose rails are all quiet (the first message
  // after a pause must not wait).
  bool active(uint64_t nowNs) const { return nowNs - lastDataNs_ < kActiveNs; }
  bool readDue(uint64_t nowNs) const;
  // A pass read the rail at `nowNs`; `got`: bytes arrived.
  void noteRead(uint64_t nowNs, bool got) {
    lastReadNs_ = nowNs;
    if (got) lastDataNs_ = nowNs;
  }

  // The inbound frame being parsed: after its header, `remaining` payload bytes go to `dst`
  // (or are discarded when dst is NULL).
  bool inPayload = false;
  wire::FrameHeader frame;
  uint8_t* dst = nullptr;
  uint64_t remaining = 0;
  int landingSlot = -1;  // receiver: request slot the payload lands in (-1: discarded)

  // ---- outbound control frames
  bool queueControl(const uint8_t* bytes, size_t n);
  size_t controlQueued() const { return outTail_ - outHead_; }
  IoResult flushControl();

  // ---- acknowledgement bookkeeping (per connection)
  uint64_t framesConsumed = 0;  // receiver: DATA frames fully read on this connection
  uint64_t framesAckSent = 0;   // receiver: the count last announced to the sender
  uint64_t watermarkSent = 0;   // receiver: the receive watermark last announced on this rail
  uint64_t peerAcked = 0;       // sender: the count the receiver last announced
  uint64_t partialBytes = 0;    // sender: bytes of the next frame already written
  // Sender: that frame's header as it went out. The rest of a frame is written from here and
  // never re-encoded: once the receiver completed the message, its send slot may already
  // carry another message.
  uint8_t partialHeader[wire::kFrameHeaderBytes] = {};

  // ---- TCP-level progress (checked every few milliseconds, not per call)
  // Re-reads the kernel counters; returns true when the peer's TCP acknowledged new bytes.
  bool sampleTcp(uint64_t nowNs);
  uint64_t tcpUnacked() const { return tcp_.unacked; }
  uint64_t lastTcpSampleNs() const { return lastTcpSampleNs_; }
  // The kernel's view at the last sample (retransmission timeout, bytes still on this host).
  const TcpProgress& tcp() const { return tcp_; }
  // Tells the rail's failure detector that view while it is recent (kTcpFreshNs): a lost
  // segment is resent only when TCP's retransmission timer expires, and bytes still in this
  // host's queue have not reached the path yet.
  void informDetector(core::FailureDetector& fd, uint64_t nowNs) const;
  // Whether the local interface `ifname` carrying this link is down or lost its carrier.
  bool interfaceDown(const std::string& ifname) const {
    return fd_.valid() && tcp::interfaceDown(fd_.get(), ifname.c_str());
  }
  // Why a rail is failed when interfaceDown(ifname): `onNews`, checked because another
  // connection of this process found the rail dead.
  static std::string interfaceDownReason(const std::string& ifname, bool onNews);

 private:
  Fd fd_;
  uint32_t generation_ = 0;
  std::unique_ptr<uint8_t[]> staging_;
  size_t head_ = 0, tail_ = 0;
  std::unique_ptr<uint8_t[]> out_;
  size_t outHead_ = 0, outTail_ = 0;
  TcpProgress tcp_;
  uint64_t lastTcpSampleNs_ = 0;
  uint64_t bytesIn_ = 0;
  uint64_t lastReadNs_ = 0, lastDataNs_ = 0;
};

}  // namespace autopilot::net::tcp

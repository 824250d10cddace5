// SendComm: the sending end of a connection. isend() takes a request from a fixed pool; the
// request waits until the receiver has announced the matching receive (a CTS frame: its
// buffer sizes and tags), is cut into chunks (core/chunk_plan.h), and the striper places the
// chunks on rails (earliest predicted completion). Chunks stay tracked until the receiver
// acknowledges them (core/send_tracker.h); a rail that errors or stops making progress is
// failed and its unacknowledged chunks are re-sent on the others; a request completes only
// when every chunk is acknowledged, because NCCL reuses the buffer at once.
//
// Failed rails are re-connected in the background (from test()/isend() calls, with backoff,
// forever) and re-join with a small share that grows as they deliver. NCCL sees an error only
// when no rail has been left for NCCL_AUTOPILOT_NET_PEER_TIMEOUT_MS, or at once when every
// rail's re-connection is refused (the receiving side is gone).
//
// Threading: NCCL drives a comm from one thread at a time (its proxy threads); nothing here
// takes a lock. Hot paths (isend, test) allocate nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/abi/net_abi.h"
#include "net_plugin/core/send_engine.h"
#include "net_plugin/transport/tcp/handshake.h"
#include "net_plugin/transport/tcp/rail_link.h"
#include "net_plugin/transport/tcp/requests.h"

namespace autopilot::net::tcp {

// One rail as connection setup leaves it.
struct RailSetup {
  std::string name;
  int globalIndex = -1;  // index in the process's rail list (fault injection)
  int telemetryId = -1;
  bool standby = false;
  int speedMbps = 0;
  SockAddr local, remote;
  Fd fd;  // invalid when the rail could not be connected
  uint32_t generation = 0;
  std::string error;  // why it could not be connected
};

struct SendCommSetup : core::CommSetup {
  uint8_t secret[wire::kSecretBytes] = {};
  std::vector<RailSetup> rails;
};

class SendComm final : public core::SendEngine {
 public:
  static constexpr uint32_t kMagic = 0x53504e41;  // "ANPS"
  static constexpr const char* kKind = "send";

  explicit SendComm(SendCommSetup setup);
  ~SendComm() override;

  abi::Result isend(const void* data, size_t size, int tag, void** request);

 private:
  struct Rail {
    RailLink link;
    RailDialer dialer;
    SockAddr local, remote;
    int globalIndex = -1;
    uint32_t generation = 0;
    double nominalBytesPerSec = 0;
    bool refused = false;        // the last re-connection attempt was refused outright
    bool lostLocalLink = false;  // failed because this host's interface went down
    uint64_t linkCheckNs = 0;    // ... last checked for its return
    uint64_t attempts = 0;
    uint64_t pingSentNs = 0;  // last liveness ping written on this rail
  };

  void progress(uint64_t nowNs) override;
  // The receiver reads a chunk that lands after its receive completed, or twice, and drops it
  // (RecvComm::beginChunk); the sender's copy of it is then acknowledged like any frame.
  bool lateCopiesAllowed() const override { return true; }
  void sendReady(uint64_t nowNs);
  bool readRail(int r, uint64_t nowNs);
  bool handleFrame(int r, const wire::FrameHeader& h, const uint8_t* body, uint64_t nowNs);
  bool completeByPeer(int r, uint64_t nowNs);
  // The rails in the middle of writing a frame of message `index`.
  uint32_t railsWriting(uint32_t index) const;
  void writeRail(int r, uint64_t nowNs);
  void checkHealth(uint64_t nowNs);
  // Rail r stalls and no other rail shows the peer alive: ping the idle ones.
  void requestLiveness(int r, uint64_t nowNs);
  bool canPing(int r) const;
  void pingRail(int r, uint64_t nowNs) override;
  void failRail(int r, uint64_t nowNs, const std::string& reason, bool warn = true);
  void failRailFor(int r, uint64_t nowNs, const std::string& reason) override {
    failRail(r, nowNs, reason);
  }
  bool failIfLocalLinkDown(int r, uint64_t nowNs) override;
  void startReconnect(int r, uint64_t nowNs);
  void retryWhenLinkReturns(int r, uint64_t nowNs);
  void pumpDialer(int r, uint64_t nowNs);
  bool simulatedDown(int r) const { return faults_.down(r); }
  bool simulatedDeaf(int r) const { return faults_.deaf(r); }  // nothing read from the rail

  uint64_t connectionId_;
  uint8_t secret_[wire::kSecretBytes];
  std::unique_ptr<Rail[]> rails_;
  uint64_t peerCompletedBelow_ = 0;  // the receiver's watermark: receives below it are complete
  int firstRail_ = 0;                // service order rotates every pass
};

}  // namespace autopilot::net::tcp

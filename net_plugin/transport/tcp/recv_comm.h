// RecvComm: the receiving end of a connection. irecv() takes a slot (indexed by the request's
// sequence number) and announces the receive to the sender (a CTS frame with each buffer's size
// and tag) on a live rail, so the sender never sends data that has nowhere to go: nothing is
// buffered here beyond one staging buffer per rail. DATA frames land at their offset in the
// posted buffer, straight from the socket for large payloads; a bitmap per buffer records the
// chunks that landed, so a chunk re-sent after a rail failure is harmless, and a request
// completes exactly once. Every DATA frame consumed is acknowledged on its rail (cumulative
// counts, flushed once per progress pass).
//
// The listening sockets stay open for the comm's lifetime: the sender re-connects failed rails
// through them (RailAcceptor validates each newcomer). When the rail that carried the
// announcements fails, or a rail re-joins, every pending announcement is repeated on a live
// rail (the sender ignores duplicates). When a request completes while another rail is still
// reading a duplicate of one of its chunks, that reader is redirected to discard: NCCL owns
// the buffer again as soon as test() reports completion.
//
// Threading: one NCCL thread at a time per comm; no locks; hot paths allocate nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/abi/net_abi.h"
#include "net_plugin/core/comm_config.h"
#include "net_plugin/core/rail_health.h"
#include "net_plugin/core/rail_metrics.h"
#include "net_plugin/transport/tcp/acceptor.h"
#include "net_plugin/transport/tcp/rail_link.h"
#include "net_plugin/transport/tcp/requests.h"
#include "net_plugin/transport/tcp/send_comm.h"

namespace autopilot::net::tcp {

struct RecvCommSetup {
  uint64_t commId = 0;
  uint64_t connectionId = 0;
  RailAcceptor* acceptor = nullptr;  // listeners and pending handshakes move into the comm
  std::vector<RailSetup> rails;      // fd invalid: not connected (yet)
};

class RecvComm final : public CommBase, private RailAcceptor::Owner {
 public:
  static constexpr uint32_t kMagic = 0x52504e41;  // "ANPR"
  static constexpr const char* kKind = "receive";
  static constexpr int kSlots = abi::kNetMaxRequests;

  explicit RecvComm(RecvCommSetup setup);
  ~RecvComm();
  RecvComm(const RecvComm&) = delete;
  RecvComm& operator=(const RecvComm&) = delete;

  abi::Result irecv(int n, void** data, const size_t* sizes, const int* tags, void** request);
  abi::Result test(RecvRequest* request, int* done, int* sizes);

 private:
  struct Rail {
    RailLink link;
    int globalIndex = -1;
    bool tcpWatch = false;  // control bytes were written: watch for the peer's TCP to take them
  };

  void progress(uint64_t nowNs);
  void readRail(int r, uint64_t nowNs);
  bool beginChunk(int r, const wire::FrameHeader& h, uint64_t nowNs);
  void finishChunk(int r, uint64_t nowNs);
  void flushRail(int r, uint64_t nowNs);
  void checkHealth(uint64_t nowNs);
  void failRail(int r, uint64_t nowNs, const std::string& reason, bool warn = true);
  void announce(const RecvRequest& q);
  void announceAll();
  int controlRail() const;
  bool simulatedDown(int r) const;
  bool simulatedDeaf(int r) const;  // `deaf` fault: nothing read from the rail
  bool outstanding() const;
  void failComm(abi::Result error, const std::string& reason);

  // RailAcceptor::Owner: rails re-connected (or connected late) by the sender.
  wire::AckStatus decide(const wire::Hello& hello, const SockAddr& peer) override;
  void install(const wire::Hello& hello, Fd fd, const SockAddr& peer) override;

  uint64_t commId_;
  uint64_t connectionId_;
  core::CommConfig config_;
  int nRails_;
  std::unique_ptr<Rail[]> rails_;
  RailAcceptor acceptor_;
  core::RailHealth health_;
  core::RailMetrics metrics_;
  std::unique_ptr<RecvRequest[]> slots_;
  uint64_t nextSeq_ = 0;
  // Every receive with a lower seq is complete; sent with every acknowledgement so that the
  // sender can complete a send whose re-sent copies this side no longer needs to read.
  uint64_t completedBelow_ = 0;
  int posted_ = 0;  // requests posted and not yet returned to NCCL
  int lastDataRail_ = -1;
  uint64_t nowNs_ = 0;  // time of the current pass (for the acceptor callbacks)
  uint64_t nextAcceptNs_ = 0;
  uint64_t nextEvaluateNs_ = 0;
  int firstRail_ = 0;
  abi::Result failed_ = abi::kSuccess;
};

}  // namespace autopilot::net::tcp

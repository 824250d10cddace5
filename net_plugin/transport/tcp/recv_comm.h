// RecvComm: the receiving end of a connection. irecv() takes a slot (indexed by the request's
// sequence number) and announces the receive to the sender (a CTS frame with each buffer's size
// and tag) on a live rail, so the sender never sends data that has nowhere to go: nothing is
// buffered here beyond one staging buffer per rail. DATA frames land at their offset in the
// posted buffer, straight from the socket for large payloads; a bitmap per buffer records the
// chunks that landed, so a chunk re-sent after a rail failure is harmless, and a request
// completes exactly once. Every DATA frame consumed is acknowledged on its rail (cumulative
// counts, flushed once per progress pass).
//
// The listening sockets stay open for the comm's lifetime (the AcceptHub it shares with its
// listen comm and that comm's other connections): the sender re-connects failed rails through
// them, and the hub hands each newcomer to this comm's mailbox. When the rail that carried the
// announcements fails, or a rail re-joins, every pending announcement is repeated on a live
// rail (the sender ignores duplicates). An announcement can also be lost without any rail
// failing here: the sender fails a rail (its data stalled) and closes it with our frames
// still unread in its socket, while our TCP had them acknowledged. So when receives stay
// posted with nothing arriving, every pending announcement is repeated, at a backoff that
// starts at the stall timeout and doubles while nothing arrives. When a request completes while
// another rail is still reading a duplicate of one of its chunks, that reader is redirected to
// discard: NCCL owns the buffer again as soon as test() reports completion.
//
// Threading: one NCCL thread at a time per comm; the only lock is the shared hub's, which a
// pass only tries (AcceptHub); hot paths allocate nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/abi/net_abi.h"
#include "net_plugin/core/rail_news.h"
#include "net_plugin/core/recv_engine.h"
#include "net_plugin/transport/tcp/accept_hub.h"
#include "net_plugin/transport/tcp/rail_link.h"
#include "net_plugin/transport/tcp/requests.h"
#include "net_plugin/transport/tcp/send_comm.h"

namespace autopilot::net::tcp {

struct RecvCommSetup : core::CommSetup {
  std::shared_ptr<AcceptHub> hub;         // the listening sockets, shared
  AcceptHub::Mailbox* mailbox = nullptr;  // where the hub puts this connection's rails
  std::vector<RailSetup> rails;           // fd invalid: not connected (yet)
};

class RecvComm final : public core::RecvEngine {
 public:
  static constexpr uint32_t kMagic = 0x52504e41;  // "ANPR"
  static constexpr const char* kKind = "receive";
  static constexpr int kSlots = abi::kNetMaxRequests;

  explicit RecvComm(RecvCommSetup setup);
  ~RecvComm() override;

  abi::Result irecv(int n, void** data, const size_t* sizes, const int* tags, void** request);

 private:
  struct Rail {
    RailLink link;
    int globalIndex = -1;
    bool tcpWatch = false;  // control bytes were written: watch for the peer's TCP to take them
  };

  void progress(uint64_t nowNs) override;
  bool railCarries(int r) const override;
  void readRail(int r, uint64_t nowNs);
  bool beginChunk(int r, const wire::FrameHeader& h, uint64_t nowNs);
  void finishChunk(int r, uint64_t nowNs);
  void flushRail(int r, uint64_t nowNs);
  void checkHealth(uint64_t nowNs);
  void failRail(int r, uint64_t nowNs, const std::string& reason, bool warn = true);
  // Fails rail r if this host's own link of it is down; returns whether it did (as the send
  // comm's, on news from another connection).
  bool failIfLocalLinkDown(int r, uint64_t nowNs);
  void announce(const RecvRequest& q);
  void announceAll();
  // Repeats every pending announcement when receives are posted and nothing arrived for the
  // current backoff.
  void reannounceIfQuiet(uint64_t nowNs);
  bool simulatedDown(int r) const { return faults_.down(r); }
  bool simulatedDeaf(int r) const { return faults_.deaf(r); }  // nothing read from the rail

  // A rail the sender re-connected (or connected late), from the mailbox.
  void installRail(int r, Fd fd, uint32_t generation, const SockAddr& peer);

  uint64_t connectionId_;
  std::unique_ptr<Rail[]> rails_;
  // What other connections of this process found out about each rail (checkHealth).
  core::RailNewsWatch news_[wire::kMaxRails];
  std::shared_ptr<AcceptHub> hub_;
  AcceptHub::Mailbox* mailbox_;
  // Every receive with a lower seq is complete; sent with every acknowledgement so that the
  // sender can complete a send whose re-sent copies this side no longer needs to read.
  uint64_t completedBelow_ = 0;
  uint64_t nowNs_ = 0;            // time of the current pass
  uint64_t lastArrivalNs_ = 0;    // a DATA frame was consumed, or receives were first posted
  uint64_t reannounceGapNs_ = 0;  // current backoff of the repetition
  uint64_t reannouncedNs_ = 0;    // last repetition
  uint64_t reannouncements_ = 0;
  uint64_t nextAcceptNs_ = 0;
  int firstRail_ = 0;
};

}  // namespace autopilot::net::tcp

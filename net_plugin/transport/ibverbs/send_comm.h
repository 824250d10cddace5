// SendComm: the sending end of a verbs connection: one RC queue pair per rail (NIC).
//
// The receiver announces each posted receive by RDMA-writing a clear-to-send entry (buffer
// addresses, sizes, tags, rkeys per rail) into this comm's FIFO (wire.h); isend() takes a
// request from a fixed pool and, once the matching entry is there (core/receive_matcher.h), the
// message is cut into chunks (core/chunk_plan.h) that the striper places on rails by earliest
// predicted completion from measured bandwidth (core/rail_striper.h). Each chunk is one RDMA
// WRITE WITH IMMEDIATE into the receive buffer at the chunk's offset; the immediate names the
// request, buffer and chunk, so the receiver completes its request exactly once from a bitmap
// of landed chunks. A chunk stays tracked until its own completion arrives here (an RC
// completion means the data is placed at the receiver), and a send completes only when every
// chunk has, because NCCL reuses the buffer at once.
//
// A rail fails on an error completion that means the path is gone (completion.h), a port-down
// event (port_events.h), the receiver's RAIL_DOWN message, or no completion for the software
// timeout while it holds chunks (core::FailureDetector, with the liveness probes that tell a
// dead rail from a paused peer). Its QP is destroyed first, which stops the NIC
// retransmitting; but a write already in the fabric can still land through the receiver's QP.
// So its unacknowledged chunks wait for the fence (docs/net-contract.md): the receiver's
// RAIL_DOWN says that its QP of that generation is destroyed and how many data writes landed
// through it. RC places writes in posting order, so exactly the first ones landed: they count
// as delivered, the rest are replayed on the other rails, and no copy of any chunk can land
// after its request completed. Without an answer (the control connection is lost too) the
// chunks wait out the NIC's whole retry window instead and are all replayed (duplicates of
// landed ones are then possible: the replay guard below); while the control connection is
// open the answer is awaited up to the peer timeout. While a fence is pending, new data that
// would land in the memory of the fenced chunks waits (the same guard). A write the receiver's
// NIC rejects (remote access or invalid request) fails its rail the same way, once per chunk: the
// same chunk rejected again, or a local protection, length or access error, fails the comm with
// the status named instead (completion.h): replaying it would loop.
//
// Failed rails are re-created in the background for as long as the comm lives
// (core::FailbackScheduler backoff, skipped while the local port is down): a new QP is
// exchanged with the receiver over the control connection (REPLACE / REPLACED), then a small
// RDMA write into the receiver's probe area must complete before the rail re-joins with a
// small share that grows with what it delivers. NCCL sees an error only when no rail is left
// for NCCL_AUTOPILOT_NET_PEER_TIMEOUT_MS, when the receiver is gone (its control connection
// closed with sends pending), or on a local error or a chunk rejected twice.
//
// Threading: one NCCL thread at a time per comm (its proxy threads); no locks. Hot paths
// (isend, test) allocate nothing; bounded: 32 x maxRecvs requests, kQueueDepth chunks posted
// per rail.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/abi/net_abi.h"
#include "net_plugin/core/send_engine.h"
#include "net_plugin/transport/ibverbs/control_link.h"
#include "net_plugin/transport/ibverbs/memory.h"
#include "net_plugin/transport/ibverbs/rail_qp.h"
#include "net_plugin/transport/ibverbs/requests.h"

namespace autopilot::net::ib {

// One rail as connection setup leaves it (either end).
struct RailSetup {
  int global = -1;             // index in IbRails::rails()
  std::unique_ptr<RailQp> qp;  // connected; NULL when the rail could not be set up
  uint32_t remoteKey = 0;      // the peer's region on this rail (probe area, or FIFO)
  std::string error;           // why the rail is not connected
};

struct SendCommSetup : core::CommSetup {
  int trafficClass = -1;
  std::unique_ptr<ControlLink> control;
  std::unique_ptr<RegisteredArea> area;  // the FIFO, then the probe source (layout below)
  uint64_t probeAddress = 0;             // the receiver's probe area
  std::vector<RailSetup> rails;
};

class SendComm final : public core::SendEngine {
 public:
  static constexpr uint32_t kMagic = 0x53494941;  // "AIIS"
  static constexpr const char* kKind = "send";
  static constexpr uint32_t kQueueDepth = 64;              // chunks posted per rail
  static constexpr int kSendDepth = int(kQueueDepth) + 4;  // + probes
  // The registered area: the FIFO (one clear-to-send entry per receive slot), then 64 bytes the
  // probes are written from.
  static constexpr size_t kFifoBytes = wire::kSlots * wire::kCtsBytes;
  static constexpr size_t kProbeSourceAt = kFifoBytes;
  static constexpr size_t kAreaBytes = kFifoBytes + 64;

  explicit SendComm(SendCommSetup setup);
  ~SendComm() override;

  abi::Result isend(const void* data, size_t size, int tag, const void* mhandle, void** request);
  // Global rail indices, in the connection's rail order (for memory registration).
  const int* railIds() const { return railIds_; }
  int railCount() const { return nRails_; }

 private:
  enum class Failback : uint8_t { kIdle, kAwaitingPeer, kProbing };
  // Work request ids: the kind in the top byte.
  enum class Work : uint8_t { kData = 1, kProbe = 2, kLiveness = 3 };
  static uint64_t workId(Work w) { return uint64_t(w) << 56; }
  static Work workOf(uint64_t id) { return Work(id >> 56); }
  // Where a send's chunks go: the receive buffer the clear-to-send entry announced, and the
  // local registration they are read from (one per request slot).
  struct Target {
    const MemoryHandle* memory = nullptr;  // NULL for 0 bytes
    uint64_t remoteAddress = 0;
    uint32_t remoteKeys[wire::kMaxRails] = {};
  };
  struct Rail {
    std::unique_ptr<RailQp> qp;
    int global = -1;
    uint32_t generation = 1;
    uint32_t probeKey = 0;  // the receiver's probe area on this rail
    PortWatch port;
    Failback failback = Failback::kIdle;
    uint64_t attemptDeadlineNs = 0;
    uint64_t attempts = 0;
    bool livenessOutstanding = false;
    uint64_t livenessSentNs = 0;
    double nominalBytesPerSec = 0;
    // Data writes on the QP of this generation: posted, and completed here.
    uint32_t writesPosted = 0;
    uint32_t writesAcked = 0;
    uint32_t downSentGen = 0;  // the newest generation announced with RAIL_DOWN
    // The fence: the generation whose chunks wait (0: none), since when, and until when
    // without an answer: the retry window when the control connection is closed, the peer
    // timeout (at least the window) while it is open and the answer may still come.
    uint32_t fenceGen = 0;
    uint64_t fenceSinceNs = 0;
    uint64_t fenceWindowEndNs = 0;
    uint64_t fenceGiveUpNs = 0;
  };

  void progress(uint64_t nowNs) override;
  void onMatched(SendRequest& q, const core::ReceiveMatcher::Slot& slot) override;
  uint32_t railsClosedForPlacing() const override;
  void beforePlacing() override;
  bool mustWait(const core::SendTracker::Entry& e) override;
  void pollControl(uint64_t nowNs);
  void pollFifo(uint64_t nowNs);
  void postChunks(int r, uint64_t nowNs);
  // True when chunks completed. Advances nowNs to when it saw completions.
  bool pollCompletions(uint64_t& nowNs);
  bool replayRejected(int r, const ibv_wc& c);
  void checkHealth(uint64_t nowNs);
  void requestLiveness(int r, uint64_t nowNs);
  void pingRail(int r, uint64_t nowNs) override;
  // `notifyPeer`: tell the receiver (RAIL_DOWN) so it drops its half at once.
  void failRail(int r, uint64_t nowNs, const std::string& reason, bool notifyPeer = true);
  void failRailFor(int r, uint64_t nowNs, const std::string& reason) override {
    failRail(r, nowNs, reason);
  }
  // RAIL_DOWN for generation `gen` of rail r, at most once per generation: this side's QP of
  // it is destroyed (also the answer to the receiver's).
  void announceDown(int r, uint32_t gen);
  void peerDown(const wire::ControlMessage& m, uint64_t nowNs);
  // The fence of rail r is up: `landed` of the failed QP's data writes landed (known: from the
  // receiver) or nothing is known (the retry window passed). The landed chunks count as
  // delivered, the others are replayed.
  void resolveFence(int r, uint64_t nowNs, bool known, uint32_t landed);
  bool fencePending() const;
  // A chunk the receiver has: the request may complete.
  void delivered(int r, const core::SendTracker::Entry& e);
  void startReplace(int r, uint64_t nowNs);
  void replaced(const wire::ControlMessage& m, uint64_t nowNs);
  void abandonReplace(int r, uint64_t nowNs, const std::string& why, bool notifyPeer);
  void rejoin(int r, uint64_t nowNs);
  // Whether chunk e would land in receive memory that a chunk at risk of landing twice also
  // targets: a replayed chunk in flight after an unconfirmed fence, or a chunk of a failed rail
  // whose fence is pending.
  bool atRiskOverlaps(const core::SendTracker::Entry& e) const;
  bool atRisk(int r, const core::SendTracker::Entry& x) const {
    return rails_[r].fenceGen != 0 || (replayGuard_ && x.resend);
  }

  uint64_t connectionId_;
  int trafficClass_;
  int railIds_[wire::kMaxRails] = {};
  std::unique_ptr<Rail[]> rails_;
  std::unique_ptr<ControlLink> control_;
  std::unique_ptr<RegisteredArea> area_;
  uint64_t probeAddress_;
  std::unique_ptr<Target[]> targets_;  // by request slot

  // Clear-to-send entries, copied out of the FIFO as they arrive (the FIFO slot is rewritten
  // for the receive 32 later; a matched request keeps its own copy of its buffer's keys).
  wire::CtsEntry cts_[wire::kSlots];
  uint64_t nextCts_ = 0;            // sequence number of the next entry expected
  uint64_t ctsCorruptSinceNs_ = 0;  // the expected slot carries its marker but does not decode

  // Set when chunks were replayed: new data must not overtake a replay into the same receive
  // memory (the receiver may have completed the request from the first copy and re-posted the
  // buffer). Cleared when no replayed chunk is left in flight.
  bool replayGuard_ = false;
  // The oldest receive a chunk at risk (atRiskOverlaps) is for. No chunk of a receive
  // wire::kAliasFreeAhead or more after it is placed, so a late duplicate can never be taken
  // for a chunk of a later receive in its slot (wire.h, the immediate's epoch).
  uint64_t oldestAtRiskSeq_ = UINT64_MAX;
  // When a rail failed with chunks to replay, until the first replayed chunk completes (logged:
  // the failover's own latency, without the time to detect the failure).
  uint64_t replayFailedNs_ = 0;
  int replayFailedRail_ = -1;
  // Fences, for the summary at close: confirmed by the receiver or waited out, and the chunks
  // they found landed (not replayed).
  uint64_t fencesConfirmed_ = 0;
  uint64_t fencesWaitedOut_ = 0;
  uint64_t fencedLanded_ = 0;
  // Chunks the receiver's NIC rejected once and that were replayed (replayRejected).
  uint64_t rejectedReplays_ = 0;
};

}  // namespace autopilot::net::ib

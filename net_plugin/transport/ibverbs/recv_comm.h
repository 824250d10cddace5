// RecvComm: the receiving end of a verbs connection: one RC queue pair per rail, each with
// receives posted for the sender's writes with immediate.
//
// irecv() takes the slot of its sequence number (seq mod 32), encodes the clear-to-send entry
// (wire.h: each buffer's address, size, tag and rkey per rail) into its staging bytes and
// RDMA-writes it into the sender's FIFO on a live rail, so the sender never writes where no
// receive is posted. Data arrives as writes with immediate straight into the posted buffers;
// each completion names the request slot and epoch, the buffer and the chunk: a bitmap per
// buffer records the chunks that landed (a replayed duplicate is harmless, a late one for an
// older request in the same slot is recognised by its epoch), and the request completes exactly
// once, when every chunk of every buffer is there.
//
// When a rail fails (an error completion, a port-down event, the sender's RAIL_DOWN, or a
// clear-to-send write without completion for the software timeout), its QP is moved to the
// error state, what its CQ still holds is recorded, and it is destroyed; then RAIL_DOWN tells
// the sender how many data writes landed through it (the fence, docs/net-contract.md: the
// sender replays only the others, and only now). Every entry whose write was in flight on it
// is written again on another rail (identical bytes in the same FIFO slot), and that slot is
// not given to a later receive until the sender's RAIL_DOWN says that its QP of the rail is
// destroyed too (or the NIC's retry window passed): a late write of the old entry would
// otherwise overwrite the later receive's entry. The sender re-creates failed rails: on its REPLACE
// message this side builds a new QP, connects it and answers REPLACED; the sender's probe write
// verifies it, and this side counts the rail live again when data lands through it.
//
// Threading: one NCCL thread at a time per comm; no locks; hot paths allocate nothing.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/abi/net_abi.h"
#include "net_plugin/core/recv_engine.h"
#include "net_plugin/transport/ibverbs/control_link.h"
#include "net_plugin/transport/ibverbs/memory.h"
#include "net_plugin/transport/ibverbs/rail_qp.h"
#include "net_plugin/transport/ibverbs/requests.h"
#include "net_plugin/transport/ibverbs/send_comm.h"

namespace autopilot::net::ib {

struct RecvCommSetup : core::CommSetup {
  int trafficClass = -1;
  std::unique_ptr<ControlLink> control;
  std::unique_ptr<RegisteredArea> area;  // staging of the entries, then the probe area
  uint64_t fifoAddress = 0;              // the sender's FIFO
  std::vector<RailSetup> rails;          // remoteKey: the FIFO's rkey on the rail
};

class RecvComm final : public core::RecvEngine {
 public:
  static constexpr uint32_t kMagic = 0x52494941;  // "AIIR"
  static constexpr const char* kKind = "receive";
  static constexpr int kSlots = wire::kSlots;
  static constexpr int kRecvDepth = 256;  // receives posted per rail (writes in flight to us)
  static constexpr int kSendDepth = kSlots + 8;          // entry writes (at most one per slot)
  static constexpr int kFlushes = abi::kNetMaxRequests;  // iflush requests in flight
  static constexpr int kFlushDepth = kFlushes * core::kMaxRecvsPerRequest;  // reads per rail
  // The registered area: one staged entry per slot, the sender's probe target (64 bytes), and
  // where the flush reads land (64 bytes, never looked at).
  static constexpr size_t kStagingBytes = kSlots * wire::kCtsBytes;
  static constexpr size_t kProbeAreaAt = kStagingBytes;
  static constexpr size_t kFlushScratchAt = kProbeAreaAt + 64;
  static constexpr size_t kAreaBytes = kFlushScratchAt + 64;

  // Builds the comm around QPs connected by the listener and queues the ACCEPT answer (its
  // endpoints and probe area) on the control link.
  static std::unique_ptr<RecvComm> create(RecvCommSetup setup);
  ~RecvComm() override;

  abi::Result irecv(int n, void** data, const size_t* sizes, const int* tags, void* const* mhandles,
                    void** request);
  // *request: a FlushReq, or NULL when the pool is full (retry later); `done` is the shared
  // completed request when nothing needs flushing.
  abi::Result iflush(int n, void* const* data, const int* sizes, void* const* mhandles,
                     RequestHeader* done, void** request);
  abi::Result testFlush(FlushReq* request, int* done);
  const int* railIds() const { return railIds_; }
  int railCount() const { return nRails_; }

 private:
  struct Rail {
    std::unique_ptr<RailQp> qp;
    int global = -1;
    uint32_t generation = 1;
    uint32_t fifoKey = 0;  // the sender's FIFO on this rail
    PortWatch port;
    int recvsPosted = 0;
    int ctsInFlight = 0;
    std::unique_ptr<RailQp> flushQp;  // connected to itself, created at the first flush
    int flushReads = 0;               // reads posted on it and not yet completed
    bool flushBroken = false;         // a read failed: drop the QP once drained
    uint32_t writesLanded = 0;        // data writes that landed through the QP of this generation
    uint32_t downSentGen = 0;         // the newest generation announced with RAIL_DOWN
    // The sender's QPs up to this generation are destroyed: nothing of theirs lands any more
    // (its RAIL_DOWN, or the retry window passed since ours failed).
    uint32_t senderDownGen = 0;
    uint32_t ctsFenceGen = 0;          // a generation whose entry writes slots wait for (0: none)
    uint64_t ctsFenceWindowEndNs = 0;  // then, with the control connection closed
    uint64_t ctsFenceGiveUpNs = 0;     // then in any case
  };

  // Clear-to-send bookkeeping of a slot: at most one write of its entry is in flight at a
  // time, so the slot (and its staging bytes) is reused only when none is.
  struct CtsState {
    int rail = -1;         // rail carrying the write in flight, -1 when none
    bool landed = false;   // a write completed: the sender has the entry
    bool pending = false;  // must be written (first time, or again after its rail failed)
    // A write of this entry was in flight on rail fenceRail's QP of generation fenceGen when
    // it failed: the slot waits for that QP's fence before a later receive takes it.
    int fenceRail = -1;
    uint32_t fenceGen = 0;
  };

  explicit RecvComm(RecvCommSetup& setup);
  void progress(uint64_t nowNs) override;
  bool slotReusable(const RecvRequest& q) const override;
  bool railCarries(int r) const override { return bool(rails_[r].qp); }
  void pollControl(uint64_t nowNs);
  void pollCompletions(uint64_t nowNs);
  // A successful completion on rail r: a clear-to-send write done, or a chunk landed. Null, or
  // the protocol error it shows (the caller fails the rail). `draining`: the rail is being
  // failed; only what landed is recorded, its health is left alone.
  const char* completed(int r, const ibv_wc& wc, uint64_t nowNs, bool draining);
  // Stops rail r's QP and records every successful completion its CQ still holds.
  void drain(int r, uint64_t nowNs);
  void announce(uint64_t nowNs);
  void pollFlushes();
  void replenish(int r, uint64_t nowNs);
  void checkHealth(uint64_t nowNs);
  void failRail(int r, uint64_t nowNs, const std::string& reason, bool notifyPeer = true,
                bool warn = true);
  void replace(const wire::ControlMessage& m, uint64_t nowNs);
  // RAIL_DOWN for generation `gen` of rail r, at most once per generation, with the writes
  // that landed through it (only once this side's QP of it is destroyed).
  void announceDown(int r, uint32_t gen);
  void senderDown(const wire::ControlMessage& m, uint64_t nowNs);
  // By slot position (a slot's seq is that of its last receive, not yet the next one's).
  CtsState& ctsOf(const RecvRequest& q) const { return cts_[&q - slots_.get()]; }

  uint64_t connectionId_;
  int trafficClass_;
  int railIds_[wire::kMaxRails] = {};
  std::unique_ptr<Rail[]> rails_;
  std::unique_ptr<ControlLink> control_;
  std::unique_ptr<RegisteredArea> area_;
  uint64_t fifoAddress_;
  std::unique_ptr<CtsState[]> cts_;  // by slot
  uint64_t staleChunks_ = 0;         // late duplicates of completed requests (harmless, counted)
  // Fences, for the summary at close: writes the sender gave up on that landed here anyway
  // (late), and those that had not landed when the QP stopped (cut off).
  uint64_t fences_ = 0;
  uint64_t lateWrites_ = 0;
  uint64_t cutWrites_ = 0;
  uint32_t railsWithData_ = 0;  // rails that delivered data since the last flush
  std::unique_ptr<FlushReq[]> flushes_;
  int flushesOutstanding_ = 0;
};

}  // namespace autopilot::net::ib

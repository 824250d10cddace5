// RecvEngine: the half of a receive comm that does not depend on the transport, written once
// for TCP and RDMA: the request slots (indexed by the receive's sequence number, the order the
// sender matches them in), posting and completing receives, landing a chunk exactly once
// (a bitmap per buffer), the rails' health and the comm's sticky error. A transport's RecvComm
// derives from it and adds how the receive is announced to the sender and how chunks arrive.
//
// Threading: NCCL drives a comm from one thread at a time; nothing here locks. Nothing
// allocates after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/abi/net_abi.h"
#include "net_plugin/core/chunk_bitmap.h"
#include "net_plugin/core/comm_config.h"
#include "net_plugin/core/fault_injector.h"
#include "net_plugin/core/lateness_meter.h"
#include "net_plugin/core/opaque_handles.h"
#include "net_plugin/core/rail_health.h"
#include "net_plugin/core/rail_metrics.h"
#include "net_plugin/core/receive_matcher.h"

namespace autopilot::net::core {

struct RecvRequest : RequestHeader {
  enum class State : uint8_t { kFree, kPosted, kDone };
  State state = State::kFree;
  uint64_t seq = 0;
  int n = 0;
  uint8_t* data[kMaxRecvsPerRequest] = {};
  uint64_t sizes[kMaxRecvsPerRequest] = {};
  int32_t tags[kMaxRecvsPerRequest] = {};
  uint64_t received[kMaxRecvsPerRequest] = {};
  uint8_t completeMask = 0;
  ChunkBitmap bitmaps[kMaxRecvsPerRequest];
};

class RecvEngine : public CommBase {
 public:
  abi::Result test(RecvRequest* request, int* done, int* sizes);

 protected:
  // `label` prefixes this comm's log lines ("recv", "ib recv"); `slots` receives in flight.
  RecvEngine(uint32_t magic, uint64_t commId, const char* label, const CommConfig& config,
             const std::vector<RailHealth::RailInfo>& rails, int slots);
  virtual ~RecvEngine();
  RecvEngine(const RecvEngine&) = delete;
  RecvEngine& operator=(const RecvEngine&) = delete;

  virtual void progress(uint64_t nowNs) = 0;
  // Whether the transport can reuse slot q now (RDMA: no write of its old entry in flight).
  virtual bool slotReusable(const RecvRequest& /*q*/) const { return true; }
  // Whether rail r can carry the transport's control traffic now (connected, not paused).
  virtual bool railCarries(int r) const = 0;

  // The checks of irecv and the next slot, filled in (NULL in *request when it is busy: NCCL
  // retries). The transport announces it, then runs a progress pass. On a broken comm the
  // request is handed out all the same and the transport announces nothing: test() reports
  // the error.
  abi::Result postReceive(int n, void* const* data, const size_t* sizes, const int* tags,
                          RecvRequest** request);
  // Chunk `chunk` of `chunks` (`bytes` long) of buffer `buffer` of slot `slot` landed on rail r.
  // kNew when it counted; kDuplicate when a copy had landed before; kInvalid (a protocol
  // error: the caller fails the rail) when it is outside the plan or overfills the buffer.
  ChunkBitmap::Mark landChunk(int r, RecvRequest& q, uint32_t buffer, uint32_t chunk,
                              uint32_t chunks, uint64_t bytes);
  // The rail for control traffic: the one that last delivered data (it works), else a healthy
  // or degraded one (a re-joined rail is still on probation), else any that carries; -1.
  int controlRail() const;
  // Sticky: every pending and later receive fails with `error`.
  void failComm(abi::Result error, const std::string& reason);
  // The periodic part of the health check: rail states (every kEvaluateNs), then the comm fails
  // when no rail has been left for the peer timeout while receives are posted.
  void evaluateHealth(uint64_t nowNs);
  bool outstanding() const { return posted_ > 0; }
  // The start of every progress pass: this process's lateness, measured and allowed for.
  // The pass ends when the returned scope does.
  PassClock::Scope beginPass(uint64_t nowNs) {
    health_.setLateness(passes_.begin(nowNs, outstanding()));
    return PassClock::Scope(passes_);
  }

  const uint64_t commId_;
  const char* const label_;
  CommConfig config_;
  const int nRails_;
  const int nSlots_;
  RailHealth health_;
  FaultView faults_;  // the simulated faults on this comm's rails (set by the transport)
  RailMetrics metrics_;
  std::unique_ptr<RecvRequest[]> slots_;
  uint64_t nextSeq_ = 0;
  int posted_ = 0;  // requests posted and not yet returned to NCCL
  int lastDataRail_ = -1;
  uint64_t nextEvaluateNs_ = 0;
  abi::Result failed_ = abi::kSuccess;
  PassClock passes_;
};

}  // namespace autopilot::net::core

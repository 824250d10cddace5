// The verbs transport's requests (core/opaque_handles.h: how they are handed to NCCL). They live
// in fixed pools inside their comm, so a full pool makes isend/irecv/iflush return a NULL
// request ("retry later"), never an allocation.
#pragma once

#include <cstdint>

#include "common/abi/net_abi.h"
#include "net_plugin/core/chunk_bitmap.h"
#include "net_plugin/core/receive_matcher.h"
#include "net_plugin/transport/ibverbs/memory.h"
#include "net_plugin/core/opaque_handles.h"

namespace autopilot::net::ib {

using core::CommBase;
using core::FlushRequest;
using core::RequestHeader;
using core::RequestKind;
using core::kRequestMagic;

struct SendRequest : RequestHeader {
  enum class State : uint8_t { kFree, kWaitingForReceive, kActive, kDone, kFailed };
  uint32_t index = 0;  // slot in the pool, also the SendTracker message id
  State state = State::kFree;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  int32_t tag = 0;
  const MemoryHandle* memory = nullptr;  // NULL for 0 bytes
  uint64_t recvSeq = 0;  // the matched receive
  uint8_t buffer = 0;    // buffer within it
  uint64_t remoteAddress = 0;
  uint32_t remoteKeys[wire::kMaxRails] = {};
  uint32_t failovers = 0;  // rails that failed while holding some of its chunks
};

struct RecvRequest : RequestHeader {
  enum class State : uint8_t { kFree, kPosted, kDone };
  State state = State::kFree;
  uint64_t seq = 0;
  int n = 0;
  uint8_t* data[core::kMaxRecvsPerRequest] = {};
  uint64_t sizes[core::kMaxRecvsPerRequest] = {};
  int32_t tags[core::kMaxRecvsPerRequest] = {};
  uint64_t received[core::kMaxRecvsPerRequest] = {};
  uint8_t completeMask = 0;
  core::ChunkBitmap bitmaps[core::kMaxRecvsPerRequest];
  // Clear-to-send bookkeeping: at most one write of the entry is in flight at a time, so the
  // slot (and its staging bytes) is reused only when none is.
  int ctsRail = -1;         // rail carrying the write in flight, -1 when none
  bool ctsLanded = false;   // a write completed: the sender has the entry
  bool ctsPending = false;  // must be written (first time, or again after its rail failed)
};

// iflush: RDMA reads through every NIC that delivered data since the previous flush (one per
// rail and buffer), each through that NIC's loopback queue pair; done when all completed.
struct FlushReq : RequestHeader {
  FlushReq() { kind = RequestKind::kFlush; }
  bool inUse = false;
  int outstanding = 0;
};

}  // namespace autopilot::net::ib

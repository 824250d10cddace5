// The TCP transport's requests (core/opaque_handles.h: how they are handed to NCCL). Requests
// live in fixed pools inside their comm: NCCL_NET_MAX_REQUESTS (32) receives per receive comm,
// 32 x maxRecvs sends per send comm; a full pool makes isend/irecv return a NULL request
// ("retry later"), never an allocation.
#pragma once

#include <cstdint>

#include "common/abi/net_abi.h"
#include "net_plugin/core/chunk_bitmap.h"
#include "net_plugin/core/opaque_handles.h"
#include "net_plugin/core/receive_matcher.h"

namespace autopilot::net::tcp {

using core::CommBase;
using core::FlushRequest;
using core::RequestHeader;
using core::RequestKind;
using core::kRequestMagic;

class SendComm;
class RecvComm;

struct SendRequest : RequestHeader {
  enum class State : uint8_t { kFree, kWaitingForReceive, kActive, kDone, kFailed };
  uint32_t index = 0;  // slot in the pool, also the SendTracker message id
  State state = State::kFree;
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  int32_t tag = 0;
  uint64_t recvSeq = 0;  // the matched receive
  uint8_t buffer = 0;    // buffer within it
  abi::Result error = abi::kSuccess;
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
};

}  // namespace autopilot::net::tcp

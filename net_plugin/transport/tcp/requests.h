// Objects handed to NCCL as opaque pointers. Comms derive from CommBase and requests from
// RequestHeader, and NCCL gets the base-class pointer: converting back is a static_cast after
// the magic was checked, so a pointer of the wrong kind (a recv comm given to isend, a stale
// request) is recognised instead of misused. Requests
// live in fixed pools inside their comm: NCCL_NET_MAX_REQUESTS (32) receives per receive comm,
// 32 x maxRecvs sends per send comm; a full pool makes isend/irecv return a NULL request
// ("retry later"), never an allocation.
#pragma once

#include <cstdint>

#include "common/abi/net_abi.h"
#include "net_plugin/core/chunk_bitmap.h"
#include "net_plugin/core/receive_matcher.h"

namespace autopilot::net::tcp {

struct CommBase {
  explicit CommBase(uint32_t m) : magic(m) {}
  ~CommBase() { magic = 0; }
  uint32_t magic;
};

inline constexpr uint32_t kRequestMagic = 0x51504e41;  // "ANPQ"
enum class RequestKind : uint8_t { kSend = 1, kRecv = 2, kFlush = 3 };

class SendComm;
class RecvComm;

struct RequestHeader {
  uint32_t magic = kRequestMagic;
  RequestKind kind = RequestKind::kSend;
  CommBase* owner = nullptr;  // the comm
};

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

// iflush on host memory has nothing to do: one shared, already-complete request.
struct FlushRequest : RequestHeader {
  FlushRequest() { kind = RequestKind::kFlush; }
};

}  // namespace autopilot::net::tcp

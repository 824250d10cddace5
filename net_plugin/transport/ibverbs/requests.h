// The verbs transport's requests (core/opaque_handles.h: how they are handed to NCCL). They live
// in fixed pools inside their comm, so a full pool makes isend/irecv/iflush return a NULL
// request ("retry later"), never an allocation.
#pragma once

#include <cstdint>

#include "common/abi/net_abi.h"
#include "net_plugin/core/chunk_bitmap.h"
#include "net_plugin/core/opaque_handles.h"
#include "net_plugin/core/receive_matcher.h"
#include "net_plugin/core/recv_engine.h"
#include "net_plugin/core/send_engine.h"
#include "net_plugin/transport/ibverbs/memory.h"

namespace autopilot::net::ib {

using core::CommBase;
using core::FlushRequest;
using core::kRequestMagic;
using core::RequestHeader;
using core::RequestKind;

using core::SendRequest;

using core::RecvRequest;

// iflush: RDMA reads through every NIC that delivered data since the previous flush (one per
// rail and buffer), each through that NIC's loopback queue pair; done when all completed.
struct FlushReq : RequestHeader {
  FlushReq() { kind = RequestKind::kFlush; }
  bool inUse = false;
  int outstanding = 0;
};

}  // namespace autopilot::net::ib

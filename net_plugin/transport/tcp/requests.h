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
#include "net_plugin/core/recv_engine.h"
#include "net_plugin/core/send_engine.h"

namespace autopilot::net::tcp {

using core::CommBase;
using core::FlushRequest;
using core::kRequestMagic;
using core::RequestHeader;
using core::RequestKind;

class SendComm;
class RecvComm;

using core::SendRequest;

using core::RecvRequest;

}  // namespace autopilot::net::tcp

// What a work completion's status means for the transport. A pure function of the status, so
// the policy is unit-tested without hardware.
//
//  - kPathFailed: the path to the peer is gone or unusable (retries exhausted, RNR retries
//    exhausted, the responder aborted or failed, a flush because the QP already went to the
//    error state, a fatal device error). Data on that QP may or may not have landed: the
//    transport fails the rail and replays its unacknowledged chunks on the others (idempotent
//    RDMA writes at fixed offsets).
//  - kRejected: the responder's NIC rejected the request (a remote access, invalid request or
//    invalid read error): a key, address or length it does not accept, or a fault of its own.
//    Both QPs go to the error state. Our own bug would be rejected again, a responder's
//    transient fault would not (docs/net-contract.md). The sender fails the rail and replays
//    the rejected chunk once; the same chunk rejected again fails the comm with the status
//    named (SendTracker::rejectOldest), so nothing loops.
//  - kLocalError: a local protection, length or access violation, an operation error: a bug
//    (ours, or a buffer NCCL deregistered under a transfer) that every replay would repeat: the
//    transport fails with a clear error instead.
#pragma once

#include <infiniband/verbs.h>

namespace autopilot::net::ib {

enum class CompletionClass { kSuccess, kPathFailed, kRejected, kLocalError };

CompletionClass classifyCompletion(ibv_wc_status status);
const char* completionClassName(CompletionClass c);
// The status's IBV_WC_* name (independent of the loaded library, for logs and tests).
const char* statusName(ibv_wc_status status);

}  // namespace autopilot::net::ib

// What a work completion's status means for the transport. A pure function of the status, so
// the policy is unit-tested without hardware.
//
//  - kPathFailed: the path to the peer is gone or unusable (retries exhausted, RNR retries
//    exhausted, the responder aborted or failed, a flush because the QP already went to the
//    error state, a fatal device error). Data on that QP may or may not have landed: the
//    transport fails the rail and replays its unacknowledged chunks on the others (idempotent
//    RDMA writes at fixed offsets).
//  - kUsageError: a local or remote protection, length or access violation, an invalid
//    request: a bug (ours, or a buffer NCCL deregistered under a transfer). Replaying it
//    elsewhere would fail the same way, forever: the transport fails with a clear error
//    instead of looping.
#pragma once

#include <infiniband/verbs.h>

namespace autopilot::net::ib {

enum class CompletionClass { kSuccess, kPathFailed, kUsageError };

CompletionClass classifyCompletion(ibv_wc_status status);
const char* completionClassName(CompletionClass c);
// The status's IBV_WC_* name (independent of the loaded library, for logs and tests).
const char* statusName(ibv_wc_status status);

}  // namespace autopilot::net::ib

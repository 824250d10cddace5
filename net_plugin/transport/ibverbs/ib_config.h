// The verbs transport's own tunables (NCCL_AUTOPILOT_IB_*), resolved once per load of the
// library; the shared ones (chunking, striping, detectors, failback) are core::commConfig().
//
// Failure detection does not rely on the QP's retry budget: RC retries take
// 4.096 us x 2^timeout x retry_cnt (0.47 s at timeout 14 and 7 retries on real NICs), and
// Soft-RoCE (rdma_rxe) treats retry_cnt 7 as "retry forever". The primary signals are the
// port events (link down) and the software timeouts of core::FailureDetector (no completion
// for NCCL_AUTOPILOT_NET_STALL_TIMEOUT_MS plus the time the rail's queued bytes need); the QP
// is then destroyed, which also stops any further retransmission of its data.
#pragma once

#include <cstdint>

namespace autopilot::net::ib {

struct IbConfig {
  uint8_t timeout = 14;      // ibv_qp_attr.timeout: 4.096 us x 2^timeout per retry
  uint8_t retryCnt = 7;      // ibv_qp_attr.retry_cnt
  uint8_t rnrRetry = 7;      // receiver not ready: retry forever (flow control, not a failure)
  uint8_t minRnrTimer = 12;  // 0.64 ms
  bool gpuDirect = false;    // NCCL_AUTOPILOT_IB_GPU_DIRECT
  bool fence = true;         // NCCL_AUTOPILOT_IB_FENCE
};

const IbConfig& ibConfig();

// The no-progress time after which a rail holding data is declared failed: the shared stall
// timeout (NCCL_AUTOPILOT_NET_STALL_TIMEOUT_MS), but never less than three of the NIC's own
// retransmission timeouts, so that a dropped packet the NIC is about to resend is not taken for
// a dead path.
uint64_t stallTimeoutNs(uint64_t sharedStallNs);

// How long a write of a destroyed queue pair may still be in the fabric when the peer cannot
// confirm the fence (docs/net-contract.md): the NIC's whole retry window, 4.096 us x 2^timeout
// x (retry_cnt + 1), plus a quarter of it and at least 50 ms. Past it, the NIC that sent the
// write would itself have given it up.
uint64_t retryWindowNs();

}  // namespace autopilot::net::ib

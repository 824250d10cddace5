#include "net_plugin/transport/ibverbs/ib_config.h"

#include <algorithm>

#include "common/params.h"

namespace autopilot::net::ib {

namespace {

params::IntParam gTimeout(
    "NCCL_AUTOPILOT_IB_TIMEOUT", 14, 1, 31,
    "QP transport timeout exponent (4.096 us x 2^value per retry). Failures are detected by port "
    "events and software timeouts first; this only bounds the NIC's own retransmissions.");
params::IntParam gRetryCnt(
    "NCCL_AUTOPILOT_IB_RETRY_CNT", 7, 0, 7,
    "QP retry count. Soft-RoCE (rdma_rxe) treats 7 as infinite; detection never relies on it "
    "(port events and software timeouts come first).");
params::BoolParam gFence(
    "NCCL_AUTOPILOT_IB_FENCE", true,
    "Replay a failed rail's unacknowledged writes only after the peer confirmed that its queue "
    "pair of that rail is destroyed (or the NIC's retry window passed), and replay only those "
    "that did not land. 0 replays at once: a late write of the failed rail can then overwrite a "
    "buffer NCCL already reused (for tests that show what the fence prevents).");
params::BoolParam gGpuDirect(
    "NCCL_AUTOPILOT_IB_GPU_DIRECT", false,
    "Offer GPU memory to NCCL (NCCL_PTR_CUDA|NCCL_PTR_DMABUF, registered as dma-buf) when the "
    "provider supports ibv_reg_dmabuf_mr and a CUDA driver loads. Off by default: untested "
    "without GPUs.");

IbConfig load() {
  IbConfig c;
  c.timeout = uint8_t(gTimeout.get());
  c.retryCnt = uint8_t(gRetryCnt.get());
  c.gpuDirect = gGpuDirect.get();
  c.fence = gFence.get();
  return c;
}

}  // namespace

uint64_t stallTimeoutNs(uint64_t sharedStallNs) {
  uint64_t retransmitNs = uint64_t(4096.0 * double(1ull << ibConfig().timeout));  // 4.096 us x 2^t
  return std::max(sharedStallNs, 3 * retransmitNs);
}

uint64_t retryWindowNs() {
  const IbConfig& c = ibConfig();
  uint64_t retransmitNs = uint64_t(4096.0 * double(1ull << c.timeout));
  uint64_t windowNs = retransmitNs * (uint64_t(c.retryCnt) + 1);
  return windowNs + std::max<uint64_t>(windowNs / 4, 50'000'000);
}

const IbConfig& ibConfig() {
  static const IbConfig config = load();
  return config;
}

}  // namespace autopilot::net::ib

#include "net_plugin/transport/ibverbs/rail_qp.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "net_plugin/transport/ibverbs/ib_config.h"

namespace autopilot::net::ib {

namespace {

std::string failure(const char* what, int err) {
  return std::string(what) + " failed: " + std::strerror(err);
}

uint32_t randomPsn() {
  thread_local std::mt19937 gen{std::random_device{}()};
  return gen() & 0xffffff;
}

}  // namespace

bool RailQp::create(int rail, Depths depths, std::string* error, int access) {
  destroy();
  IbRails& ib = IbRails::instance();
  lib_ = ib.lib();
  rail_ = rail;
  const IbRail& r = ib.rails()[size_t(rail)];
  IbDevice& dev = ib.device(r.device);
  int cqe = depths.send + depths.recv + 1;
  cq_ = CompletionQueue(lib_, lib_->createCq(dev.context.get(), cqe, nullptr, nullptr, 0));
  if (!cq_) {
    *error = failure("ibv_create_cq", errno);
    return false;
  }
  ibv_qp_init_attr init{};
  init.send_cq = cq_.get();
  init.recv_cq = cq_.get();
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = uint32_t(depths.send);
  init.cap.max_recv_wr = uint32_t(depths.recv > 0 ? depths.recv : 1);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.sq_sig_all = 0;
  qp_ = QueuePair(lib_, lib_->createQp(dev.pd.get(), &init));
  if (!qp_) {
    *error = failure("ibv_create_qp", errno);
    cq_.reset();
    return false;
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = r.port;
  attr.qp_access_flags = unsigned(access);
  int rc = lib_->modifyQp(qp_.get(), &attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) {
    *error = failure("ibv_modify_qp(INIT)", rc);
    destroy();
    return false;
  }
  psn_ = randomPsn();
  return true;
}

wire::QpEndpoint RailQp::endpoint(uint32_t rkey) const {
  const IbRail& r = IbRails::instance().rails()[size_t(rail_)];
  wire::QpEndpoint e;
  e.qpn = qp_ ? qp_->qp_num : 0;
  e.psn = psn_;
  e.lid = r.lid;
  e.linkLayer = r.linkLayer;
  e.mtu = uint8_t(r.activeMtu);
  std::memcpy(e.gid, r.gid.raw, sizeof(e.gid));
  e.rkey = rkey;
  return e;
}

bool RailQp::connect(const wire::QpEndpoint& peer, int trafficClass, std::string* error) {
  const IbRail& r = IbRails::instance().rails()[size_t(rail_)];
  if (!qp_) {
    *error = "no queue pair";
    return false;
  }
  if (peer.linkLayer != r.linkLayer) {
    *error = std::string("the peer's rail is ") +
             (peer.linkLayer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand") +
             ", ours is not: rails are paired by position, check NCCL_AUTOPILOT_IB_HCA";
    return false;
  }
  const IbConfig& cfg = ibConfig();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = ibv_mtu(std::min<int>(int(r.activeMtu), int(peer.mtu)));
  attr.dest_qp_num = peer.qpn;
  attr.rq_psn = peer.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = cfg.minRnrTimer;
  attr.ah_attr.port_num = r.port;
  attr.ah_attr.dlid = peer.lid;
  attr.ah_attr.sl = 0;
  if (r.roce()) {
    // RoCE is routed by GID (RoCE v2: UDP/IP); InfiniBand within a subnet by LID.
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, peer.gid, sizeof(peer.gid));
    attr.ah_attr.grh.sgid_index = uint8_t(r.gidIndex);
    attr.ah_attr.grh.hop_limit = 255;
    attr.ah_attr.grh.traffic_class = uint8_t(trafficClass >= 0 ? trafficClass : 0);
  }
  int rc = lib_->modifyQp(qp_.get(), &attr,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    *error = failure("ibv_modify_qp(RTR)", rc);
    return false;
  }
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = cfg.timeout;
  attr.retry_cnt = cfg.retryCnt;
  attr.rnr_retry = cfg.rnrRetry;
  attr.sq_psn = psn_;
  attr.max_rd_atomic = 1;
  rc = lib_->modifyQp(qp_.get(), &attr,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) {
    *error = failure("ibv_modify_qp(RTS)", rc);
    return false;
  }
  connected_ = true;
  return true;
}

int RailQp::stop() {
  if (!qp_) return 0;
  connected_ = false;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return lib_->modifyQp(qp_.get(), &attr, IBV_QP_STATE);
}

void RailQp::destroy() {
  connected_ = false;
  qp_.reset();  // first: the CQ it reports to is released after it
  cq_.reset();
}

int RailQp::post(ibv_send_wr* wr) {
  ibv_send_wr* bad = nullptr;
  return VerbsLibrary::postSend(qp_.get(), wr, &bad);
}

int RailQp::postWrite(uint64_t wrId, const void* local, uint32_t length, uint32_t lkey,
                      uint64_t remote, uint32_t rkey) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(local), length, lkey};
  ibv_send_wr wr{};
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = length > 0 ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  return post(&wr);
}

int RailQp::postWriteImm(uint64_t wrId, const void* local, uint32_t length, uint32_t lkey,
                         uint64_t remote, uint32_t rkey, uint32_t immHostOrder) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(local), length, lkey};
  ibv_send_wr wr{};
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = length > 0 ? 1 : 0;  // a zero-byte message is one empty write with immediate
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(immHostOrder);
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  return post(&wr);
}

int RailQp::postRead(uint64_t wrId, void* local, uint32_t length, uint32_t lkey, uint64_t remote,
                     uint32_t rkey) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(local), length, lkey};
  ibv_send_wr wr{};
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  return post(&wr);
}

int RailQp::postRecvs(uint64_t wrId, int count) {
  constexpr int kBatch = 32;
  ibv_recv_wr wrs[kBatch];
  int posted = 0;
  while (posted < count) {
    int n = std::min(count - posted, kBatch);
    for (int i = 0; i < n; ++i) {
      wrs[i] = ibv_recv_wr{};
      wrs[i].wr_id = wrId;
      wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    if (VerbsLibrary::postRecv(qp_.get(), wrs, &bad) != 0) {
      return posted + (bad != nullptr ? int(bad - wrs) : 0);
    }
    posted += n;
  }
  return posted;
}

}  // namespace autopilot::net::ib

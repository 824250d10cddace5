#include "net_plugin/transport/ibverbs/completion.h"

namespace autopilot::net::ib {

CompletionClass classifyCompletion(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS:
      return CompletionClass::kSuccess;
    case IBV_WC_RETRY_EXC_ERR:      // no ACK after retry_cnt attempts: link, switch or peer gone
    case IBV_WC_RNR_RETRY_EXC_ERR:  // the peer stopped posting receives (its process is stuck)
    case IBV_WC_RESP_TIMEOUT_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_REM_OP_ERR:    // the responder's QP failed
    case IBV_WC_WR_FLUSH_ERR:  // the QP is in the error state already
    case IBV_WC_FATAL_ERR:
    case IBV_WC_BAD_RESP_ERR:  // a corrupted or unexpected response on the wire
    case IBV_WC_GENERAL_ERR:
      return CompletionClass::kPathFailed;
    case IBV_WC_REM_INV_REQ_ERR:  // the responder's NAK: invalid request (length, opcode order)
    case IBV_WC_REM_ACCESS_ERR:   // ... remote access error (key, address range, rights)
    case IBV_WC_REM_INV_RD_REQ_ERR:
      return CompletionClass::kRejected;
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_EEC_OP_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_MW_BIND_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_LOC_RDD_VIOL_ERR:
    case IBV_WC_INV_EECN_ERR:
    case IBV_WC_INV_EEC_STATE_ERR:
    case IBV_WC_TM_ERR:
    case IBV_WC_TM_RNDV_INCOMPLETE:
      return CompletionClass::kLocalError;
  }
  // A status newer than this code: not known to be harmless, not known to be a path problem.
  // Failing loudly is the one choice that cannot loop.
  return CompletionClass::kLocalError;
}

const char* completionClassName(CompletionClass c) {
  switch (c) {
    case CompletionClass::kSuccess:
      return "success";
    case CompletionClass::kPathFailed:
      return "path failed";
    case CompletionClass::kRejected:
      return "rejected by the responder";
    case CompletionClass::kLocalError:
      return "local error";
  }
  return "?";
}

const char* statusName(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS:
      return "IBV_WC_SUCCESS";
    case IBV_WC_LOC_LEN_ERR:
      return "IBV_WC_LOC_LEN_ERR";
    case IBV_WC_LOC_QP_OP_ERR:
      return "IBV_WC_LOC_QP_OP_ERR";
    case IBV_WC_LOC_EEC_OP_ERR:
      return "IBV_WC_LOC_EEC_OP_ERR";
    case IBV_WC_LOC_PROT_ERR:
      return "IBV_WC_LOC_PROT_ERR";
    case IBV_WC_WR_FLUSH_ERR:
      return "IBV_WC_WR_FLUSH_ERR";
    case IBV_WC_MW_BIND_ERR:
      return "IBV_WC_MW_BIND_ERR";
    case IBV_WC_BAD_RESP_ERR:
      return "IBV_WC_BAD_RESP_ERR";
    case IBV_WC_LOC_ACCESS_ERR:
      return "IBV_WC_LOC_ACCESS_ERR";
    case IBV_WC_REM_INV_REQ_ERR:
      return "IBV_WC_REM_INV_REQ_ERR";
    case IBV_WC_REM_ACCESS_ERR:
      return "IBV_WC_REM_ACCESS_ERR";
    case IBV_WC_REM_OP_ERR:
      return "IBV_WC_REM_OP_ERR";
    case IBV_WC_RETRY_EXC_ERR:
      return "IBV_WC_RETRY_EXC_ERR";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "IBV_WC_RNR_RETRY_EXC_ERR";
    case IBV_WC_LOC_RDD_VIOL_ERR:
      return "IBV_WC_LOC_RDD_VIOL_ERR";
    case IBV_WC_REM_INV_RD_REQ_ERR:
      return "IBV_WC_REM_INV_RD_REQ_ERR";
    case IBV_WC_REM_ABORT_ERR:
      return "IBV_WC_REM_ABORT_ERR";
    case IBV_WC_INV_EECN_ERR:
      return "IBV_WC_INV_EECN_ERR";
    case IBV_WC_INV_EEC_STATE_ERR:
      return "IBV_WC_INV_EEC_STATE_ERR";
    case IBV_WC_FATAL_ERR:
      return "IBV_WC_FATAL_ERR";
    case IBV_WC_RESP_TIMEOUT_ERR:
      return "IBV_WC_RESP_TIMEOUT_ERR";
    case IBV_WC_GENERAL_ERR:
      return "IBV_WC_GENERAL_ERR";
    case IBV_WC_TM_ERR:
      return "IBV_WC_TM_ERR";
    case IBV_WC_TM_RNDV_INCOMPLETE:
      return "IBV_WC_TM_RNDV_INCOMPLETE";
  }
  return "IBV_WC_(unknown)";
}

}  // namespace autopilot::net::ib

// The verbs (RDMA) transport behind net_api.h (core/transport.h): devices and properties,
// connection setup, the data path and teardown. net_api.cc uses it when it chose RDMA
// (NCCL_AUTOPILOT_TRANSPORT, or RDMA rails present).
#pragma once

#include "net_plugin/core/transport.h"

namespace autopilot::net::ib {

// The process's RDMA transport (its rails live in IbRails).
core::Transport& transport();

}  // namespace autopilot::net::ib

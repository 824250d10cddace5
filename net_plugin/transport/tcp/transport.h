// The TCP transport behind net_api.h (core/transport.h): devices and properties, connection
// setup, the data path and teardown.
#pragma once

#include "net_plugin/core/transport.h"

namespace autopilot::net::tcp {

// The process's TCP transport (it holds no state of its own: rails live in TcpRails).
core::Transport& transport();

}  // namespace autopilot::net::tcp

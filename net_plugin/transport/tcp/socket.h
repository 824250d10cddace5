// The TCP transport speaks through the library's one socket layer (common/socket/socket.h);
// its types and calls are named here in the transport's namespace.
#pragma once

#include "common/socket/socket.h"

namespace autopilot::net::tcp {

using sockets::acceptOne;
using sockets::bindTo;
using sockets::connectStatus;
using sockets::errnoText;
using sockets::Fd;
using sockets::interfaceDown;
using sockets::Io;
using sockets::IoResult;
using sockets::makeListener;
using sockets::makeStreamSocket;
using sockets::readSome;
using sockets::SockAddr;
using sockets::startConnect;
using sockets::TcpProgress;
using sockets::tcpProgress;
using sockets::writeSome;
using sockets::writeVec;

}  // namespace autopilot::net::tcp

#include "net_plugin/transport/tcp/connection.h"

#include <algorithm>

#include "common/clock.h"
#include "common/log.h"
#include "net_plugin/core/comm_config.h"
#include "net_plugin/core/fault_injector.h"
#include "net_plugin/core/transport_glue.h"
#include "net_plugin/transport/tcp/discovery.h"
#include "net_plugin/transport/tcp/recv_comm.h"

namespace autopilot::net::tcp {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;

RailSetup railSetup(int globalIndex) {
  const TcpRail& rail = TcpRails::instance().rails()[size_t(globalIndex)];
  RailSetup rs;
  rs.name = rail.name;
  rs.globalIndex = globalIndex;
  rs.telemetryId = rail.telemetryId;
  rs.standby = rail.standby;
  rs.speedMbps = rail.speedMbps;
  rs.local = rail.address;
  return rs;
}

}  // namespace

// ---------------------------------------------------------------------------- ListenComm

ListenComm::ListenComm(uint64_t commId, int device)
    : CommBase(kMagic), commId_(commId), device_(device), hub_(std::make_shared<AcceptHub>()) {}

// The receive comms keep the hub (and its listening sockets) for their re-connected rails.
ListenComm::~ListenComm() { hub_->stopAccepting(); }

abi::Result ListenComm::listen(void* handle) {
  nRails_ = core::connectionRails(TcpRails::instance().devices(), device_, wire::kMaxRails,
                                  wire::kMaxRails, railIds_, "listen");
  if (nRails_ <= 0) return abi::kInvalidArgument;
  const auto& rails = TcpRails::instance().rails();
  SockAddr addrs[wire::kMaxRails];
  for (int r = 0; r < nRails_; ++r) addrs[r] = rails[size_t(railIds_[r])].address;
  Handle h;
  if (!randomBytes(h.secret, sizeof(h.secret))) {
    AP_WARN(kFlags, "listen: no random bytes for the connection secret");
    return abi::kSystemError;
  }
  std::string error;
  if (!hub_->open(addrs, nRails_, h.secret, &error)) {
    AP_WARN(kFlags, "listen on device %d: %s", device_, error.c_str());
    return abi::kSystemError;
  }
  h.railCount = nRails_;
  for (int r = 0; r < nRails_; ++r) h.rails[r] = hub_->bound(r);
  if (!encodeHandle(h, static_cast<uint8_t*>(handle), &error)) {
    AP_WARN(kFlags, "listen on device %d: %s", device_, error.c_str());
    return abi::kInternalError;
  }
  return abi::kSuccess;
}

abi::Result ListenComm::accept(RecvComm** recvComm) {
  uint64_t now = monotonicNs();
  auto& injector = core::FaultInjector::instance();
  injector.refresh(now);
  uint32_t paused = 0;
  for (int r = 0; r < nRails_; ++r) {
    if (injector.down(railIds_[r])) paused |= 1u << r;
  }
  AcceptHub::Accepted a;
  if (!hub_->acceptOne(now, paused, core::commConfig().stragglerNs, &a)) return abi::kSuccess;

  RecvCommSetup setup;
  setup.commId = commId_;
  setup.faults = &core::FaultInjector::instance();
  setup.connectionId = a.connectionId;
  setup.hub = hub_;
  setup.mailbox = a.mailbox;
  for (int r = 0; r < a.rails; ++r) {
    RailSetup rs = railSetup(railIds_[r]);
    rs.fd = std::move(a.fds[r]);
    rs.generation = a.generations[r];
    setup.rails.push_back(std::move(rs));
  }
  AP_INFO(kFlags, "comm 0x%llx: accepted a connection on %d of %d rails",
          (unsigned long long)commId_, a.connected, a.rails);
  *recvComm = new RecvComm(std::move(setup));
  return abi::kSuccess;
}

// ---------------------------------------------------------------------------- Connector

Connector::Connector(uint64_t commId, int device) : commId_(commId), device_(device) {}

abi::Result Connector::start(const uint8_t* handle) {
  wire::DecodeError e = decodeHandle(handle, kHandleBytes, &peer_);
  if (e == wire::DecodeError::kBadVersion) {
    AP_WARN(kFlags,
            "connect: the peer's handle is protocol version %u, we speak %u (a different "
            "nccl-autopilot version on the other side?)",
            peer_.version, wire::kProtocolVersion);
    return abi::kInvalidUsage;
  }
  if (e != wire::DecodeError::kOk) {
    AP_WARN(kFlags, "connect: the handle is not from this plugin's listen(): %s",
            wire::decodeErrorText(e));
    return abi::kInvalidUsage;
  }
  nRails_ = core::connectionRails(TcpRails::instance().devices(), device_, peer_.railCount,
                                  wire::kMaxRails, railIds_, "connect");
  if (nRails_ <= 0) return abi::kInvalidArgument;
  if (!randomBytes(&connectionId_, sizeof(connectionId_))) return abi::kSystemError;
  connectionId_ |= 1;  // never 0
  uint64_t now = monotonicNs();
  const auto& rails = TcpRails::instance().rails();
  for (int r = 0; r < nRails_; ++r) {
    wire::Hello hello;
    std::copy(peer_.secret, peer_.secret + wire::kSecretBytes, hello.secret);
    hello.railIndex = uint8_t(r);
    hello.railCount = uint8_t(nRails_);
    hello.connectionId = connectionId_;
    hello.generation = 1;
    dialers_[r].start(rails[size_t(railIds_[r])].address, peer_.rails[r], hello, now,
                      core::commConfig().connectTimeoutNs);
  }
  return abi::kSuccess;
}

abi::Result Connector::progress(SendComm** sendComm) {
  uint64_t now = monotonicNs();
  int connected = 0, resolved = 0;
  for (int r = 0; r < nRails_; ++r) {
    if (!resolved_[r]) {
      RailDialer::State s = dialers_[r].progress(now);
      if (s == RailDialer::State::kDone) {
        connected_[r] = dialers_[r].take();
        resolved_[r] = true;
        if (firstConnectedNs_ == 0) firstConnectedNs_ = now;
      } else if (s == RailDialer::State::kFailed) {
        errors_[r] = dialers_[r].error();
        resolved_[r] = true;
      }
    }
    resolved += resolved_[r];
    connected += connected_[r].valid();
  }
  bool late = connected > 0 && now - firstConnectedNs_ >= core::commConfig().stragglerNs;
  if (resolved < nRails_ && !late) return abi::kSuccess;
  const auto& rails = TcpRails::instance().rails();
  if (connected == 0) {
    std::string why;
    for (int r = 0; r < nRails_; ++r) {
      why += (r ? "; " : "") + std::string("rail ") + std::to_string(r) + " (" +
             rails[size_t(railIds_[r])].name + " -> " + peer_.rails[r].str() + "): " + errors_[r];
    }
    AP_WARN(kFlags, "connect: no rail could connect to the peer: %s", why.c_str());
    return abi::kSystemError;
  }
  SendCommSetup setup;
  setup.commId = commId_;
  setup.faults = &core::FaultInjector::instance();
  setup.connectionId = connectionId_;
  std::copy(peer_.secret, peer_.secret + wire::kSecretBytes, setup.secret);
  for (int r = 0; r < nRails_; ++r) {
    RailSetup rs = railSetup(railIds_[r]);
    rs.remote = peer_.rails[r];
    rs.generation = 1;
    if (connected_[r].valid()) {
      rs.fd = std::move(connected_[r]);
    } else {
      rs.error = resolved_[r] ? errors_[r] : "no answer within the straggler time";
      dialers_[r].abandon();
    }
    setup.rails.push_back(std::move(rs));
  }
  AP_INFO(kFlags, "comm 0x%llx: connected on %d of %d rails", (unsigned long long)commId_,
          connected, nRails_);
  *sendComm = new SendComm(std::move(setup));
  return abi::kSuccess;
}

}  // namespace autopilot::net::tcp

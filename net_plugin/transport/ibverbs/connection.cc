#include "net_plugin/transport/ibverbs/connection.h"

#include <algorithm>
#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "net_plugin/core/comm_config.h"
#include "net_plugin/core/fault_injector.h"
#include "net_plugin/core/pending_admission.h"
#include "net_plugin/core/transport_glue.h"
#include "net_plugin/transport/tcp/acceptor.h"
#include "net_plugin/transport/tcp/discovery.h"
#include "net_plugin/transport/tcp/handle.h"

namespace autopilot::net::ib {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;

bool sameSecret(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // constant time: no early exit on the first differing byte
  for (size_t i = 0; i < wire::kSecretBytes; ++i) diff |= uint8_t(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

bool controlAddress(tcp::SockAddr* out, std::string* error) {
  tcp::TcpRails& tcpRails = tcp::TcpRails::instance();
  tcpRails.ensureDiscovered();
  if (tcpRails.rails().empty()) {
    *error =
        "no interface for the out-of-band control connection (set NCCL_AUTOPILOT_IFNAME or "
        "NCCL_AUTOPILOT_NET_ADDRS)";
    return false;
  }
  *out = tcpRails.rails()[0].address;
  out->setPort(0);
  return true;
}

// ---------------------------------------------------------------------------- ListenComm

ListenComm::ListenComm(uint64_t commId, int device, int trafficClass)
    : CommBase(kMagic), commId_(commId), device_(device), trafficClass_(trafficClass) {}

abi::Result ListenComm::listen(void* handle) {
  nRails_ = core::connectionRails(IbRails::instance().devices(), device_, wire::kMaxRails,
                                  wire::kMaxRails, railIds_, "listen");
  if (nRails_ <= 0) return abi::kInvalidArgument;
  wire::Handle h;
  std::string error;
  tcp::SockAddr addr;
  if (!controlAddress(&addr, &error)) {
    AP_WARN(kFlags, "listen on device %d: %s", device_, error.c_str());
    return abi::kSystemError;
  }
  int err = 0;
  listener_ = tcp::makeListener(addr, &h.control, &err);
  if (!listener_.valid()) {
    AP_WARN(kFlags, "listen on device %d: control socket on %s: %s", device_, addr.str().c_str(),
            tcp::errnoText(err).c_str());
    return abi::kSystemError;
  }
  if (!tcp::randomBytes(secret_, sizeof(secret_))) {
    AP_WARN(kFlags, "listen: no random bytes for the connection secret");
    return abi::kSystemError;
  }
  std::copy(secret_, secret_ + wire::kSecretBytes, h.secret);
  h.railCount = uint8_t(nRails_);
  if (!wire::encodeHandle(h, static_cast<uint8_t*>(handle))) {
    AP_WARN(kFlags, "listen on device %d: the control address does not fit the handle", device_);
    return abi::kInternalError;
  }
  return abi::kSuccess;
}

void ListenComm::refuse(Pending& p, const wire::ControlMessage& m, wire::ControlStatus status,
                        const std::string& why) {
  AP_WARN_LIMITED(kFlags, "comm 0x%llx: refused a connection from %s: %s",
                  (unsigned long long)commId_, p.peer.str().c_str(), why.c_str());
  wire::ControlMessage answer;
  answer.type = wire::ControlType::kAccept;
  answer.connectionId = m.connectionId != 0 ? m.connectionId : 1;
  answer.railCount = uint8_t(std::clamp(int(m.railCount), 1, wire::kMaxRails));
  answer.status = status;
  uint8_t bytes[wire::kControlBytes];
  wire::encodeControl(answer, bytes);
  tcp::writeSome(p.fd.get(), bytes, sizeof(bytes));  // best effort: a fresh socket has room
  p.fd.reset();
}

std::unique_ptr<RecvComm> ListenComm::admit(Pending& p, const wire::ControlMessage& m) {
  if (!sameSecret(m.secret, secret_)) {
    refuse(p, m, wire::ControlStatus::kBadSecret, "wrong secret (a stale handle, or not ours)");
    return nullptr;
  }
  if (m.railCount > nRails_) {
    refuse(
        p, m, wire::ControlStatus::kBadRails,
        std::to_string(m.railCount) + " rails asked, this device has " + std::to_string(nRails_));
    return nullptr;
  }
  RecvCommSetup setup;
  setup.commId = commId_;
  setup.faults = &core::FaultInjector::instance();
  setup.connectionId = m.connectionId;
  setup.trafficClass = trafficClass_;
  setup.fifoAddress = m.regionAddress;
  std::string error;
  setup.area = std::make_unique<RegisteredArea>();
  if (!setup.area->create(nullptr, railIds_, m.railCount, RecvComm::kAreaBytes, &error)) {
    refuse(p, m, wire::ControlStatus::kNoResources, error);
    return nullptr;
  }
  int connected = 0;
  for (int r = 0; r < m.railCount; ++r) {
    RailSetup rs;
    rs.global = railIds_[r];
    rs.remoteKey = m.endpoints[r].rkey;
    if (m.endpoints[r].qpn == 0) {
      rs.error = "the sender could not set this rail up";
    } else {
      auto qp = std::make_unique<RailQp>();
      if (qp->create(rs.global, {RecvComm::kSendDepth, RecvComm::kRecvDepth}, &rs.error) &&
          qp->connect(m.endpoints[r], trafficClass_, &rs.error)) {
        rs.qp = std::move(qp);
        connected++;
      }
    }
    if (!rs.error.empty()) {
      AP_WARN(kFlags, "comm 0x%llx recv rail %d (%s): %s", (unsigned long long)commId_, r,
              IbRails::instance().rails()[size_t(rs.global)].name.c_str(), rs.error.c_str());
    }
    setup.rails.push_back(std::move(rs));
  }
  if (connected == 0) {
    refuse(p, m, wire::ControlStatus::kNoResources, "no rail could be connected");
    return nullptr;
  }
  setup.control = std::make_unique<ControlLink>();
  setup.control->attach(std::move(p.fd));
  AP_INFO(kFlags, "comm 0x%llx: accepted an RDMA connection from %s on %d of %d rails",
          (unsigned long long)commId_, p.peer.str().c_str(), connected, int(m.railCount));
  return RecvComm::create(std::move(setup));
}

abi::Result ListenComm::accept(RecvComm** recvComm) {
  uint64_t now = monotonicNs();
  for (;;) {
    tcp::Fd fd;
    tcp::SockAddr peer;
    tcp::IoResult r = tcp::acceptOne(listener_.get(), &fd, &peer);
    if (r.status != tcp::Io::kOk) break;
    // Bounded, and never refusing a newcomer (core/pending_admission.h): the oldest goes.
    PendingSlotView views[kMaxPending];
    for (int i = 0; i < kMaxPending; ++i) {
      const Pending& p = pending_[i];
      views[i] = {p.fd.valid(), p.fd.valid() && p.peer.sameHost(peer), p.deadlineNs};
    }
    PendingAdmission a = admitPending(views, kMaxPending, kMaxPendingPerSource);
    Pending* slot = &pending_[a.slot];
    if (a.evicts) {
      AP_WARN_LIMITED(
          kFlags,
          "comm 0x%llx: too many unidentified connections (at most %d); closed the oldest, from "
          "%s",
          (unsigned long long)commId_, kMaxPending, slot->peer.str().c_str());
      slot->fd.reset();
    }
    slot->fd = std::move(fd);
    slot->peer = peer;
    slot->got = 0;
    slot->deadlineNs = now + kHelloTimeoutNs;
  }
  for (Pending& p : pending_) {
    if (!p.fd.valid()) continue;
    tcp::IoResult r = tcp::readSome(p.fd.get(), p.buf + p.got, sizeof(p.buf) - p.got);
    if (r.status == tcp::Io::kOk) p.got += r.bytes;
    if (r.status == tcp::Io::kError || r.status == tcp::Io::kClosed) {
      AP_WARN_LIMITED(kFlags,
                      "comm 0x%llx: a connection from %s closed before identifying "
                      "itself",
                      (unsigned long long)commId_, p.peer.str().c_str());
      p.fd.reset();
      continue;
    }
    if (p.got < sizeof(p.buf)) {
      if (now > p.deadlineNs) {
        AP_WARN_LIMITED(kFlags,
                        "comm 0x%llx: a connection from %s sent %zu of %zu bytes of "
                        "its CONNECT in %llu s; closed",
                        (unsigned long long)commId_, p.peer.str().c_str(), p.got, sizeof(p.buf),
                        (unsigned long long)(kHelloTimeoutNs / 1000000000));
        p.fd.reset();
      }
      continue;
    }
    wire::ControlMessage m;
    wire::DecodeError e = wire::decodeControl(p.buf, sizeof(p.buf), &m);
    if (e != wire::DecodeError::kOk || m.type != wire::ControlType::kConnect) {
      AP_WARN_LIMITED(kFlags, "comm 0x%llx: refused a connection from %s: %s",
                      (unsigned long long)commId_, p.peer.str().c_str(),
                      e == wire::DecodeError::kBadVersion
                          ? "another protocol version (a different "
                            "nccl-autopilot version on the other side?)"
                      : e != wire::DecodeError::kOk ? wire::decodeErrorText(e)
                                                    : "not a CONNECT message");
      p.fd.reset();
      continue;
    }
    std::unique_ptr<RecvComm> comm = admit(p, m);
    if (comm) {
      *recvComm = comm.release();
      return abi::kSuccess;
    }
  }
  return abi::kSuccess;
}

// ---------------------------------------------------------------------------- Connector

Connector::Connector(uint64_t commId, int device, int trafficClass)
    : commId_(commId), device_(device), trafficClass_(trafficClass) {}

abi::Result Connector::fail(const std::string& why) {
  AP_WARN(kFlags, "connect: %s", why.c_str());
  return abi::kSystemError;
}

abi::Result Connector::start(const uint8_t* handle) {
  wire::DecodeError e = wire::decodeHandle(handle, wire::kHandleBytes, &peer_);
  if (e == wire::DecodeError::kBadVersion) {
    AP_WARN(kFlags,
            "connect: the peer's handle is RDMA protocol version %u, we speak %u (a "
            "different nccl-autopilot version on the other side?)",
            peer_.version, wire::kProtocolVersion);
    return abi::kInvalidUsage;
  }
  if (e != wire::DecodeError::kOk) {
    AP_WARN(kFlags, "connect: %s",
            wire::isTcpHandle(handle, wire::kHandleBytes)
                ? "the peer listens with the TCP transport and we use the verbs (RDMA) transport: "
                  "NCCL_AUTOPILOT_TRANSPORT, or the RDMA devices present, differ between the two "
                  "sides"
                : (std::string("the handle is not from this plugin's listen(): ") +
                   wire::decodeErrorText(e))
                      .c_str());
    return abi::kInvalidUsage;
  }
  nRails_ = core::connectionRails(IbRails::instance().devices(), device_, peer_.railCount,
                                  wire::kMaxRails, railIds_, "connect");
  if (nRails_ <= 0) return abi::kInvalidArgument;
  if (!tcp::randomBytes(&connectionId_, sizeof(connectionId_))) return abi::kSystemError;
  connectionId_ |= 1;  // never 0
  std::string error;
  area_ = std::make_unique<RegisteredArea>();
  if (!area_->create(nullptr, railIds_, nRails_, SendComm::kAreaBytes, &error)) {
    return fail("the clear-to-send FIFO: " + error);
  }
  int created = 0;
  for (int r = 0; r < nRails_; ++r) {
    auto qp = std::make_unique<RailQp>();
    if (qp->create(railIds_[r], {SendComm::kSendDepth, 0}, &errors_[r])) {
      qps_[r] = std::move(qp);
      created++;
    }
  }
  if (created == 0) return fail("no queue pair could be created: " + errors_[0]);
  deadlineNs_ = monotonicNs() + core::commConfig().connectTimeoutNs;
  return dial();
}

abi::Result Connector::dial() {
  int err = 0;
  control_.reset();
  fd_ = tcp::makeStreamSocket(peer_.control.family(), &err);
  if (!fd_.valid()) return fail("control socket: " + tcp::errnoText(err));
  // The control connection leaves from this side's own control interface (the one it would
  // listen on), not from wherever the routing table points: NCCL_AUTOPILOT_IFNAME and
  // NCCL_AUTOPILOT_NET_ADDRS name the path for both directions.
  tcp::SockAddr local;
  std::string why;
  if (controlAddress(&local, &why) && local.family() == peer_.control.family() &&
      !tcp::bindTo(fd_.get(), local, &err)) {
    return fail("control socket: bind to " + local.host() + ": " + tcp::errnoText(err));
  }
  tcp::IoResult r = tcp::startConnect(fd_.get(), peer_.control);
  if (r.status == tcp::Io::kError) {
    return fail("cannot reach the listener's control socket " + peer_.control.str() + ": " +
                tcp::errnoText(r.error));
  }
  dialing_ = true;
  return abi::kSuccess;
}

abi::Result Connector::progress(SendComm** sendComm) {
  uint64_t now = monotonicNs();
  if (now > deadlineNs_) {
    return fail("no answer from the receiver at " + peer_.control.str() + " within " +
                std::to_string(core::commConfig().connectTimeoutNs / 1000000) + " ms");
  }
  if (redialAtNs_ != 0) {
    if (now < redialAtNs_) return abi::kSuccess;
    redialAtNs_ = 0;
    if (abi::Result res = dial(); res != abi::kSuccess) return res;
  }
  if (dialing_) {
    tcp::IoResult r = tcp::connectStatus(fd_.get());
    if (r.status == tcp::Io::kWouldBlock) return abi::kSuccess;
    if (r.status != tcp::Io::kOk) {
      return fail("cannot reach the listener's control socket " + peer_.control.str() + ": " +
                  tcp::errnoText(r.error));
    }
    dialing_ = false;
    control_ = std::make_unique<ControlLink>();
    control_->attach(std::move(fd_));
    wire::ControlMessage m;
    m.type = wire::ControlType::kConnect;
    m.connectionId = connectionId_;
    std::copy(peer_.secret, peer_.secret + wire::kSecretBytes, m.secret);
    m.railCount = uint8_t(nRails_);
    m.regionAddress = area_->address(0);
    for (int i = 0; i < nRails_; ++i) {
      if (qps_[i]) m.endpoints[i] = qps_[i]->endpoint(area_->memory().rkey[i]);
    }
    control_->send(m);
  }
  std::string error;
  if (control_->flush(&error) != ControlLink::Status::kOk) return fail(error);
  wire::ControlMessage m;
  wire::DecodeError e;
  ControlLink::Status status;
  if (!control_->receive(&m, &e, &status, &error)) {
    if (status == ControlLink::Status::kOk) return abi::kSuccess;
    // Closed before any answer: a flooded listener evicts its oldest unidentified connection
    // (core/pending_admission.h). Dial again after a short pause, within the same deadline.
    if (now + redialPauseNs_ < deadlineNs_) {
      redialAtNs_ = now + redialPauseNs_;
      redialPauseNs_ = std::min(redialPauseNs_ * 2, kMaxRedialPauseNs);
      control_.reset();
      return abi::kSuccess;
    }
    return fail("the receiver: " + error);
  }
  if (e != wire::DecodeError::kOk || m.type != wire::ControlType::kAccept ||
      m.connectionId != connectionId_) {
    return fail(std::string("the receiver's answer is malformed: ") +
                (e != wire::DecodeError::kOk ? wire::decodeErrorText(e) : "unexpected message"));
  }
  if (m.status != wire::ControlStatus::kOk) {
    return fail(std::string("the receiver refused the connection: ") +
                wire::controlStatusText(m.status));
  }
  SendCommSetup setup;
  setup.commId = commId_;
  setup.faults = &core::FaultInjector::instance();
  setup.connectionId = connectionId_;
  setup.trafficClass = trafficClass_;
  setup.probeAddress = m.regionAddress;
  int connected = 0;
  std::string why;
  for (int r = 0; r < nRails_; ++r) {
    RailSetup rs;
    rs.global = railIds_[r];
    rs.remoteKey = m.endpoints[r].rkey;
    if (!qps_[r]) {
      rs.error = errors_[r];
    } else if (m.endpoints[r].qpn == 0) {
      rs.error = "the receiver could not set this rail up";
    } else if (qps_[r]->connect(m.endpoints[r], trafficClass_, &rs.error)) {
      rs.qp = std::move(qps_[r]);
      connected++;
    }
    if (!rs.error.empty()) {
      why += (why.empty() ? "" : "; ") + std::string("rail ") + std::to_string(r) + " (" +
             IbRails::instance().rails()[size_t(rs.global)].name + "): " + rs.error;
    }
    setup.rails.push_back(std::move(rs));
  }
  if (connected == 0) return fail("no rail could connect to the peer: " + why);
  setup.control = std::move(control_);
  setup.area = std::move(area_);
  AP_INFO(kFlags, "comm 0x%llx: RDMA connection on %d of %d rails", (unsigned long long)commId_,
          connected, nRails_);
  *sendComm = new SendComm(std::move(setup));
  return abi::kSuccess;
}

}  // namespace autopilot::net::ib

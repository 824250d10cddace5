// Connection setup of the verbs transport, non-blocking as NCCL requires (connect/accept return
// success with a NULL comm until ready and are called again; never ncclInProgress).
//
// ListenComm (listen + accept): a TCP listening socket on the control address (the first
// address the TCP transport's interface selection finds: NCCL_AUTOPILOT_IFNAME or
// NCCL_AUTOPILOT_NET_ADDRS), a fresh random secret, and the device's rail count, all in the
// handle. accept() reads the sender's CONNECT (within 2 s per connection), checks the secret,
// creates and connects a QP per rail to the sender's endpoints, and answers ACCEPT with its own
// endpoints; the TCP connection stays open as the comm's control link. Several connections may
// come through one listen comm; accept() hands them out one per call until closeListen (a
// receive comm does not need the listener: its rails are re-created over its own control
// link). A connection with a wrong secret, another version or garbage is answered (when
// possible), closed and logged with the peer's address.
//
// Connector (connect): parses the handle (a TCP-transport handle is recognised and explained),
// pairs local rail i with the listener's rail i, creates the FIFO and a QP per rail, dials the
// control address and sends CONNECT; on ACCEPT it connects each QP and builds the SendComm. A
// rail that cannot be set up on either side starts failed and is re-created later; no rail at
// all is an error naming every rail's reason. NCCL calls connect() again with the same handle
// buffer, whose last 8 bytes hold a token that finds the Connector in the context's registry.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/abi/net_abi.h"
#include "net_plugin/core/pending_connects.h"
#include "net_plugin/transport/ibverbs/control_link.h"
#include "net_plugin/transport/ibverbs/recv_comm.h"
#include "net_plugin/transport/ibverbs/send_comm.h"

namespace autopilot::net::ib {

class ListenComm final : public CommBase {
 public:
  static constexpr uint32_t kMagic = 0x4c494941;  // "AIIL"
  static constexpr const char* kKind = "listen";
  // Unidentified connections to the control listener (core/pending_admission.h): one CONNECT
  // per legitimate peer and connection.
  static constexpr int kMaxPending = 8;
  static constexpr int kMaxPendingPerSource = 4;
  static constexpr uint64_t kHelloTimeoutNs = 2'000'000'000;

  ListenComm(uint64_t commId, int device, int trafficClass);
  // Opens the control listener and writes the handle.
  abi::Result listen(void* handle);
  abi::Result accept(RecvComm** recvComm);

 private:
  struct Pending {
    tcp::Fd fd;
    tcp::SockAddr peer;
    uint8_t buf[wire::kControlBytes];
    size_t got = 0;
    uint64_t deadlineNs = 0;
  };
  // A complete CONNECT from `p`: the comm, or NULL (answered and closed, or resources failed).
  std::unique_ptr<RecvComm> admit(Pending& p, const wire::ControlMessage& m);
  void refuse(Pending& p, const wire::ControlMessage& m, wire::ControlStatus status,
              const std::string& why);

  uint64_t commId_;
  int device_;
  int trafficClass_;
  int nRails_ = 0;
  int railIds_[wire::kMaxRails] = {};
  tcp::Fd listener_;
  uint8_t secret_[wire::kSecretBytes] = {};
  Pending pending_[kMaxPending];
};

class Connector {
 public:
  Connector(uint64_t commId, int device, int trafficClass);
  // Parses the handle, sets up the rails and starts dialing. Error (logged) when unusable.
  abi::Result start(const uint8_t* handle);
  // Success with *sendComm NULL while in progress.
  abi::Result progress(SendComm** sendComm);

 private:
  abi::Result fail(const std::string& why);
  abi::Result dial();  // a new control connection to the listener
  static constexpr uint64_t kMaxRedialPauseNs = 200'000'000;

  uint64_t commId_;
  int device_;
  int trafficClass_;
  uint64_t redialAtNs_ = 0;  // when to dial again after the listener closed on us (0: no)
  uint64_t redialPauseNs_ = 10'000'000;
  wire::Handle peer_;
  int nRails_ = 0;
  int railIds_[wire::kMaxRails] = {};
  uint64_t connectionId_ = 0;
  uint64_t deadlineNs_ = 0;
  bool dialing_ = false;
  tcp::Fd fd_;
  std::unique_ptr<ControlLink> control_;
  std::unique_ptr<RegisteredArea> area_;
  std::unique_ptr<RailQp> qps_[wire::kMaxRails];
  std::string errors_[wire::kMaxRails];
};

// The address the control listener binds (port 0); false with a reason when there is none.
bool controlAddress(tcp::SockAddr* out, std::string* error);

}  // namespace autopilot::net::ib

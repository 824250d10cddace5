// Connection setup, non-blocking as NCCL requires (connect/accept return success with a NULL
// comm until ready and are called again; never ncclInProgress).
//
// ListenComm (listen + accept): one listening socket per rail of the device, bound to the
// rail's address; the handle carries all of them and a fresh random secret. accept()
// validates each incoming rail connection (RailAcceptor, through the AcceptHub it shares with
// the receive comms it accepted) and hands out a connection when every rail the sender
// announced has arrived, or when at least one has and the others are late by more than the
// straggler time (they can still join the receive comm later). Several connections may come
// through one listen comm; accept() hands them out one per call until closeListen.
//
// Connector (connect): parses the handle (magic, version, checksum), pairs local rail i with
// the peer's rail i, and dials every rail at once (RailDialer). It completes when each rail is
// connected or has failed, or when at least one is connected and the others are late; failed
// rails are re-tried in the background by the send comm. No rail at all is an error naming
// every rail's reason. NCCL calls connect() again with the same handle buffer, whose last 8
// bytes hold a token that finds the Connector in the context's registry.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/abi/net_abi.h"
#include "net_plugin/core/pending_connects.h"
#include "net_plugin/transport/tcp/accept_hub.h"
#include "net_plugin/transport/tcp/handle.h"
#include "net_plugin/transport/tcp/handshake.h"
#include "net_plugin/transport/tcp/requests.h"
#include "net_plugin/transport/tcp/send_comm.h"

namespace autopilot::net::tcp {

class RecvComm;

class ListenComm final : public CommBase {
 public:
  static constexpr uint32_t kMagic = 0x4c504e41;  // "ANPL"
  static constexpr const char* kKind = "listen";

  ListenComm(uint64_t commId, int device);
  ~ListenComm();
  // Opens the listeners and writes the handle.
  abi::Result listen(void* handle);
  abi::Result accept(RecvComm** recvComm);

 private:
  uint64_t commId_;
  int device_;
  int nRails_ = 0;
  int railIds_[wire::kMaxRails] = {};  // indices in the process's rail list
  std::shared_ptr<AcceptHub> hub_;
};

class Connector {
 public:
  Connector(uint64_t commId, int device);
  // Parses the handle and starts dialing. Error (logged) when the handle is not usable.
  abi::Result start(const uint8_t* handle);
  // Success with *sendComm NULL while in progress.
  abi::Result progress(SendComm** sendComm);

 private:
  uint64_t commId_;
  int device_;
  Handle peer_;
  int nRails_ = 0;
  int railIds_[wire::kMaxRails] = {};
  uint64_t connectionId_ = 0;
  RailDialer dialers_[wire::kMaxRails];
  bool resolved_[wire::kMaxRails] = {};
  Fd connected_[wire::kMaxRails];
  std::string errors_[wire::kMaxRails];
  uint64_t firstConnectedNs_ = 0;
};

// Connections in progress of one NCCL context, keyed by the token kept in the handle.
using PendingConnects = core::PendingConnects<Connector>;

}  // namespace autopilot::net::tcp

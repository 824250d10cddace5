// Connection setup, non-blocking as NCCL requires (connect/accept return success with a NULL
// comm until ready and are called again; never ncclInProgress).
//
// ListenComm (listen + accept): one listening socket per rail of the device, bound to the
// rail's address; the handle carries all of them and a fresh random secret. accept()
// validates each incoming rail connection (RailAcceptor) and completes when every rail the
// sender announced has arrived, or when at least one has and the others are late by more
// than the straggler time (they can still join the receive comm later).
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
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/abi/net_abi.h"
#include "net_plugin/transport/tcp/acceptor.h"
#include "net_plugin/transport/tcp/handle.h"
#include "net_plugin/transport/tcp/handshake.h"
#include "net_plugin/transport/tcp/requests.h"
#include "net_plugin/transport/tcp/send_comm.h"

namespace autopilot::net::tcp {

class RecvComm;

class ListenComm final : public CommBase, private RailAcceptor::Owner {
 public:
  static constexpr uint32_t kMagic = 0x4c504e41;  // "ANPL"

  ListenComm(uint64_t commId, int device);
  ~ListenComm();
  // Opens the listeners and writes the handle.
  abi::Result listen(void* handle);
  abi::Result accept(RecvComm** recvComm);

 private:
  wire::AckStatus decide(const wire::Hello& hello, const SockAddr& peer) override;
  void install(const wire::Hello& hello, Fd fd, const SockAddr& peer) override;

  uint64_t commId_;
  int device_;
  int nRails_ = 0;
  int railIds_[wire::kMaxRails] = {};  // indices in the process's rail list
  RailAcceptor acceptor_;
  uint64_t connectionId_ = 0;
  int expectedRails_ = 0;
  uint64_t firstRailNs_ = 0;
  uint64_t nowNs_ = 0;  // time of the current accept() call
  Fd accepted_[wire::kMaxRails];
  uint32_t generations_[wire::kMaxRails] = {};
  bool done_ = false;
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
class PendingConnects {
 public:
  Connector* find(uint64_t token);
  uint64_t add(std::unique_ptr<Connector> c);
  void remove(uint64_t token);

 private:
  std::mutex mutex_;  // v8-v10 share one context between communicators (several threads)
  std::unordered_map<uint64_t, std::unique_ptr<Connector>> connectors_;
};

}  // namespace autopilot::net::tcp

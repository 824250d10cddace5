// The per-rail connection handshake, as non-blocking state machines driven by repeated calls
// (NCCL's connect/accept polling, or the data path for background re-connections).
//
// RailDialer (connecting side): TCP connect from the local rail address to the peer's rail
// address, send HELLO (secret, connection id, rail, generation), wait for HELLO_ACK. Done only
// when the peer accepted, so a re-joined rail is known to carry data end to end.
//
// HelloReader (listening side): an accepted socket that has not yet identified itself; reads
// the 64-byte HELLO within a deadline. Validation against the listener's state is the
// caller's (it knows the secret and the connection); reply() sends the verdict.
#pragma once

#include <cstdint>
#include <string>

#include "net_plugin/transport/tcp/socket.h"
#include "net_plugin/transport/tcp/wire.h"

namespace autopilot::net::tcp {

class RailDialer {
 public:
  // kRetrying: the listener dropped the connection before answering (it evicts the oldest
  // unidentified connection when flooded, core/pending_admission.h), or the connection was
  // reset: dial again after a short pause, within the same deadline.
  enum class State { kIdle, kConnecting, kSendingHello, kAwaitingAck, kRetrying, kDone, kFailed };

  void start(const SockAddr& local, const SockAddr& remote, const wire::Hello& hello,
             uint64_t nowNs, uint64_t timeoutNs);
  State progress(uint64_t nowNs);
  State state() const { return state_; }
  bool active() const {
    return state_ != State::kIdle && state_ != State::kDone && state_ != State::kFailed;
  }
  // After kDone: the connected socket.
  Fd take();
  void abandon();
  // After kFailed: why, and whether the peer host actively refused (nobody listens any more:
  // the receiving side is closed or its process is gone).
  const std::string& error() const { return error_; }
  bool refused() const { return refused_; }

 private:
  static constexpr uint64_t kFirstRetryPauseNs = 10'000'000;
  static constexpr uint64_t kMaxRetryPauseNs = 200'000'000;
  State fail(const std::string& why, bool refused = false);
  State retryOrFail(const std::string& why, uint64_t nowNs);
  void dial();
  State state_ = State::kIdle;
  SockAddr local_, remote_;
  uint64_t retryAtNs_ = 0;
  uint64_t retryPauseNs_ = 0;
  Fd fd_;
  uint8_t hello_[wire::kHelloBytes] = {};
  uint8_t ack_[wire::kHelloBytes] = {};
  size_t sent_ = 0, received_ = 0;
  uint64_t deadlineNs_ = 0;
  uint64_t connectionId_ = 0;
  uint32_t generation_ = 0;
  int attempts_ = 0;
  std::string error_;
  bool refused_ = false;
};

class HelloReader {
 public:
  enum class State { kReading, kHello, kFailed };

  HelloReader() = default;
  HelloReader(Fd fd, const SockAddr& peer, uint64_t deadlineNs)
      : fd_(std::move(fd)), peer_(peer), deadlineNs_(deadlineNs) {}

  bool inUse() const { return fd_.valid(); }
  State progress(uint64_t nowNs);
  const wire::Hello& hello() const { return hello_; }
  const SockAddr& peer() const { return peer_; }
  uint64_t deadlineNs() const { return deadlineNs_; }
  const std::string& error() const { return error_; }
  // Sends the verdict (best effort: a fresh socket always has room for 64 bytes).
  void reply(wire::AckStatus status, uint32_t generation);
  Fd take() { return std::move(fd_); }
  void close() { fd_.reset(); }

 private:
  Fd fd_;
  SockAddr peer_;
  uint64_t deadlineNs_ = 0;
  uint8_t buf_[wire::kHelloBytes] = {};
  size_t got_ = 0;
  wire::Hello hello_;
  std::string error_;
};

}  // namespace autopilot::net::tcp

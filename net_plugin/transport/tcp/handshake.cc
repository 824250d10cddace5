#include "net_plugin/transport/tcp/handshake.h"

#include <errno.h>

namespace autopilot::net::tcp {

void RailDialer::start(const SockAddr& local, const SockAddr& remote, const wire::Hello& hello,
                       uint64_t nowNs, uint64_t timeoutNs) {
  deadlineNs_ = nowNs + timeoutNs;
  connectionId_ = hello.connectionId;
  generation_ = hello.generation;
  wire::encodeHello(hello, hello_);
  local_ = local;
  remote_ = remote;
  attempts_ = 0;
  retryPauseNs_ = kFirstRetryPauseNs;
  dial();
}

void RailDialer::dial() {
  fd_.reset();
  sent_ = received_ = 0;
  error_.clear();
  refused_ = false;
  ++attempts_;
  if (local_.family() != remote_.family()) {
    fail("local rail " + local_.host() + " and peer rail " + remote_.host() +
         " use different address families");
    return;
  }
  int err = 0;
  fd_ = makeStreamSocket(remote_.family(), &err);
  if (!fd_.valid()) {
    fail("socket: " + errnoText(err));
    return;
  }
  // Bind the rail's own address so the traffic leaves through that rail's interface.
  if (!bindTo(fd_.get(), local_, &err)) {
    fail("bind to " + local_.host() + ": " + errnoText(err));
    return;
  }
  IoResult r = startConnect(fd_.get(), remote_);
  if (r.status == Io::kError) {
    fail("connect: " + errnoText(r.error), r.error == ECONNREFUSED);
    return;
  }
  state_ = r.status == Io::kOk ? State::kSendingHello : State::kConnecting;
}

RailDialer::State RailDialer::retryOrFail(const std::string& why, uint64_t nowNs) {
  if (nowNs + retryPauseNs_ >= deadlineNs_) {
    return fail(why + " (after " + std::to_string(attempts_) + " attempts)");
  }
  fd_.reset();
  error_ = why;
  retryAtNs_ = nowNs + retryPauseNs_;
  retryPauseNs_ = std::min(retryPauseNs_ * 2, kMaxRetryPauseNs);
  state_ = State::kRetrying;
  return state_;
}

RailDialer::State RailDialer::fail(const std::string& why, bool refused) {
  error_ = why;
  refused_ = refused;
  fd_.reset();
  state_ = State::kFailed;
  return state_;
}

void RailDialer::abandon() {
  fd_.reset();
  state_ = State::kIdle;
}

Fd RailDialer::take() {
  state_ = State::kIdle;
  return std::move(fd_);
}

RailDialer::State RailDialer::progress(uint64_t nowNs) {
  if (!active()) return state_;
  if (state_ == State::kRetrying) {
    if (nowNs < retryAtNs_) return state_;
    dial();
    if (!active()) return state_;
  }
  if (state_ == State::kConnecting) {
    IoResult r = connectStatus(fd_.get());
    if (r.status == Io::kError) {
      return fail("connect: " + errnoText(r.error), r.error == ECONNREFUSED);
    }
    if (r.status == Io::kOk) state_ = State::kSendingHello;
  }
  if (state_ == State::kSendingHello) {
    IoResult r = writeSome(fd_.get(), hello_ + sent_, sizeof(hello_) - sent_);
    if (r.status == Io::kError) return retryOrFail("sending hello: " + errnoText(r.error), nowNs);
    sent_ += r.bytes;
    if (sent_ == sizeof(hello_)) state_ = State::kAwaitingAck;
  }
  if (state_ == State::kAwaitingAck) {
    IoResult r = readSome(fd_.get(), ack_ + received_, sizeof(ack_) - received_);
    if (r.status == Io::kError) {
      return retryOrFail("waiting for the peer's answer: " + errnoText(r.error), nowNs);
    }
    if (r.status == Io::kClosed) {
      return retryOrFail("the peer closed the connection during the handshake", nowNs);
    }
    received_ += r.bytes;
    if (received_ == sizeof(ack_)) {
      wire::HelloAck ack;
      wire::DecodeError e = wire::decodeHelloAck(ack_, sizeof(ack_), &ack);
      if (e == wire::DecodeError::kBadVersion) {
        return fail("the peer speaks protocol version " + std::to_string(ack.version) +
                    ", we speak " + std::to_string(wire::kProtocolVersion));
      }
      if (e != wire::DecodeError::kOk) {
        return fail(std::string("bad answer from the peer: ") + wire::decodeErrorText(e));
      }
      if (ack.status != wire::AckStatus::kAccepted) {
        return fail(std::string("rejected by the peer: ") + wire::ackStatusText(ack.status));
      }
      if (ack.connectionId != connectionId_ || ack.generation != generation_) {
        return fail("the peer answered for another connection");
      }
      state_ = State::kDone;
      return state_;
    }
  }
  if (nowNs >= deadlineNs_) {
    return fail(state_ == State::kConnecting ? "no answer to connect (timeout)"
                                             : "handshake timed out");
  }
  return state_;
}

HelloReader::State HelloReader::progress(uint64_t nowNs) {
  if (!fd_.valid()) return State::kFailed;
  IoResult r = readSome(fd_.get(), buf_ + got_, sizeof(buf_) - got_);
  if (r.status == Io::kError) {
    error_ = "read: " + errnoText(r.error);
    return State::kFailed;
  }
  if (r.status == Io::kClosed) {
    error_ = got_ == 0 ? "closed without a hello"
                       : "truncated hello (" + std::to_string(got_) + " of 64 bytes)";
    return State::kFailed;
  }
  got_ += r.bytes;
  if (got_ == sizeof(buf_)) {
    wire::DecodeError e = wire::decodeHello(buf_, sizeof(buf_), &hello_);
    if (e == wire::DecodeError::kOk) return State::kHello;
    if (e == wire::DecodeError::kBadVersion) {
      reply(wire::AckStatus::kBadVersion, 0);
      error_ = "peer speaks protocol version " + std::to_string(hello_.version) + ", we speak " +
               std::to_string(wire::kProtocolVersion);
    } else {
      reply(wire::AckStatus::kMalformed, 0);
      error_ = std::string("garbage instead of a hello: ") + wire::decodeErrorText(e);
    }
    return State::kFailed;
  }
  if (nowNs >= deadlineNs_) {
    error_ = "no complete hello in time (" + std::to_string(got_) + " of 64 bytes)";
    return State::kFailed;
  }
  return State::kReading;
}

void HelloReader::reply(wire::AckStatus status, uint32_t generation) {
  if (!fd_.valid()) return;
  wire::HelloAck ack;
  ack.status = status;
  ack.railIndex = hello_.railIndex;
  ack.connectionId = hello_.connectionId;
  ack.generation = generation;
  uint8_t buf[wire::kHelloBytes];
  wire::encodeHelloAck(ack, buf);
  writeSome(fd_.get(), buf, sizeof(buf));
}

}  // namespace autopilot::net::tcp

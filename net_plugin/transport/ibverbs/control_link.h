// ControlLink: the out-of-band TCP connection between the two ends of a verbs connection,
// open for the connection's lifetime (it is how a failed rail's QP pair is re-created, and how
// each end learns that the other gave up a rail). Fixed 512-byte messages (wire.h), a bounded
// outbound queue, one inbound message staged at a time; non-blocking throughout, driven from
// the comms' progress. The TCP transport's socket plumbing does the I/O.
//
// The connection is authenticated once, by the per-listen secret in the CONNECT message; what
// follows on it is trusted as coming from that peer, but still fully validated by the decoder.
#pragma once

#include <cstdint>
#include <string>

#include "net_plugin/transport/ibverbs/wire.h"
#include "net_plugin/transport/tcp/socket.h"

namespace autopilot::net::ib {

class ControlLink {
 public:
  static constexpr int kQueue = 16;

  enum class Status { kOk, kClosed, kError };

  void attach(tcp::Fd fd);
  bool up() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  void close() { fd_.reset(); }

  // Queues a message; false when the queue is full (the peer has not read for a long time).
  bool send(const wire::ControlMessage& m);
  // RAIL_DOWN: this side destroyed `rail`'s queue pair of `generation` (best effort), with the
  // data writes it counted on it (the fence: wire.h, ControlMessage).
  void sendRailDown(uint64_t connectionId, int rail, uint32_t generation, uint32_t writesPosted = 0,
                    uint32_t writesAcked = 0, uint32_t writesLanded = 0);
  // Writes what is queued; kError/kClosed when the connection is unusable (*error says why).
  Status flush(std::string* error);
  // Reads until one message is complete: true with it in *m (or *decodeError set when it was
  // malformed); false when none is complete yet. *status reports a closed or failed connection.
  bool receive(wire::ControlMessage* m, wire::DecodeError* decodeError, Status* status,
               std::string* error);
  bool idle() const { return outCount_ == 0; }

  // One progress step of a comm's control link: writes what is queued, then hands each complete
  // message, decoded and checked to belong to `connectionId`, to onMessage(const ControlMessage&),
  // which returns false to stop. kOk, or why the link is unusable: kClosed / kError with *error
  // set (the peer closed it or the socket failed), or kError with *protocolError set (garbage or
  // another connection's message: the caller fails the comm).
  template <typename OnMessage>
  Status service(uint64_t connectionId, OnMessage&& onMessage, std::string* error,
                 bool* protocolError);

  // service() with its outcome handled as both ends of a comm handle it: a protocol error goes
  // to onProtocolError(const std::string& reason) (the caller fails the comm); a link the peer
  // closed, or that broke, is closed and its time kept for closedForNs(), logged for comm
  // `commId` under `label`.
  template <typename OnMessage, typename OnProtocolError>
  void serve(uint64_t connectionId, uint64_t nowNs, uint64_t commId, const char* label,
             OnMessage&& onMessage, OnProtocolError&& onProtocolError);
  // How long ago serve() found the link closed by the peer; 0 while it is open. A closed link
  // is an orderly teardown racing with requests still posted, or a dead peer: the comms fail
  // their requests when it stays closed for the peer timeout.
  uint64_t closedForNs(uint64_t nowNs) const { return closedNs_ == 0 ? 0 : nowNs - closedNs_; }

 private:
  void closedByPeer(uint64_t nowNs, uint64_t commId, const char* label, const std::string& why);

  tcp::Fd fd_;
  uint8_t out_[kQueue][wire::kControlBytes];
  int outHead_ = 0, outCount_ = 0;
  size_t outOffset_ = 0;  // bytes of the head message already written
  uint8_t in_[wire::kControlBytes];
  size_t inBytes_ = 0;
  uint64_t closedNs_ = 0;
};

template <typename OnMessage>
ControlLink::Status ControlLink::service(uint64_t connectionId, OnMessage&& onMessage,
                                         std::string* error, bool* protocolError) {
  *protocolError = false;
  if (!up()) return Status::kOk;
  Status status = flush(error);
  if (status != Status::kOk) return status;
  wire::ControlMessage m;
  wire::DecodeError decodeError;
  while (receive(&m, &decodeError, &status, error)) {
    if (decodeError != wire::DecodeError::kOk || m.connectionId != connectionId) {
      *protocolError = true;
      *error = std::string("protocol error on the control connection: ") +
               (decodeError != wire::DecodeError::kOk ? wire::decodeErrorText(decodeError)
                                                      : "another connection's message");
      return Status::kError;
    }
    if (!onMessage(static_cast<const wire::ControlMessage&>(m))) return Status::kOk;
  }
  return status;
}

template <typename OnMessage, typename OnProtocolError>
void ControlLink::serve(uint64_t connectionId, uint64_t nowNs, uint64_t commId, const char* label,
                        OnMessage&& onMessage, OnProtocolError&& onProtocolError) {
  std::string error;
  bool protocolError = false;
  Status status = service(connectionId, onMessage, &error, &protocolError);
  if (protocolError) {
    onProtocolError(static_cast<const std::string&>(error));
  } else if (status != Status::kOk) {
    closedByPeer(nowNs, commId, label, error);
  }
}

}  // namespace autopilot::net::ib

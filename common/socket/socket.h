// The one socket layer of the library: an RAII file descriptor, socket addresses (IPv4, IPv6,
// Unix paths), and the few non-blocking operations the state machines need. Used by the net
// plugin's TCP transport, the RDMA transport's control connection and the tuner's rendezvous.
// Every error is a value (errno + text), never an exception; nothing here logs.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace autopilot::sockets {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);
  // Closes with an immediate reset (SO_LINGER 0) instead of an orderly shutdown: used when a
  // rail is declared failed, so that a peer still reading it sees an error, not a silent end.
  void closeWithReset();

 private:
  int fd_ = -1;
};

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  bool valid() const { return length > 0; }
  uint16_t port() const;
  void setPort(uint16_t port);
  // "1.2.3.4:5" / "[::1]:5"
  std::string str() const;
  std::string host() const;
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&storage); }
  // Parses a numeric IPv4 or IPv6 address (no port).
  static bool parseHost(const std::string& text, SockAddr* out);
  // A Unix socket path; false when it does not fit sun_path.
  static bool unixPath(const std::string& path, SockAddr* out);
  bool sameHost(const SockAddr& other) const;
};

enum class Io { kOk, kWouldBlock, kClosed, kError };

struct IoResult {
  Io status = Io::kOk;
  size_t bytes = 0;
  int error = 0;  // errno when kError
};

std::string errnoText(int err);

// A non-blocking stream socket with close-on-exec (and TCP_NODELAY for IP); invalid Fd and
// *error on failure.
Fd makeStreamSocket(int family, int* error);
bool bindTo(int fd, const SockAddr& addr, int* error);
// Starts a non-blocking connect: kOk (connected already), kWouldBlock (in progress), kError.
IoResult startConnect(int fd, const SockAddr& to);
// For a socket with a connect in progress: kWouldBlock (still going), kOk, kError.
IoResult connectStatus(int fd);
// Listening socket bound to `addr` (port 0: ephemeral); *bound gets the actual address.
Fd makeListener(const SockAddr& addr, SockAddr* bound, int* error);
// Listening socket bound to exactly `addr` (a fixed port, or a Unix path): *error is EADDRINUSE
// when someone else holds it.
Fd listenAt(const SockAddr& addr, int backlog, int* error);
// accept4, non-blocking. kWouldBlock when nothing is pending.
IoResult acceptOne(int listenFd, Fd* out, SockAddr* peer);
IoResult readSome(int fd, void* buf, size_t len);
IoResult writeSome(int fd, const void* buf, size_t len);
IoResult writeVec(int fd, const iovec* iov, int iovcnt);
// What the kernel's TCP knows of a connection's progress; evidence (or its absence) that needs
// no application-level reply.
struct TcpProgress {
  uint64_t bytesAcked = 0;  // our bytes the peer's TCP acknowledged
  uint64_t unacked = 0;     // bytes still in the send queue (unsent or unacknowledged)
  // The retransmission timeout: how long TCP itself waits for an acknowledgement before it
  // resends (at least 200 ms on Linux; more when the round trip is long or varies, as behind a
  // filled queue, before the first round trip is measured (1 s), and after timeouts in a row).
  uint64_t rtoNs = 0;
  // Bytes of this socket still in this host's queues below TCP (qdisc, driver): sent by TCP,
  // not yet on the wire (SO_MEMINFO's write allocation).
  uint64_t localQueued = 0;
};
// False on error (the counters are not filled).
bool tcpProgress(int fd, TcpProgress* out);
// Whether this host's network interface `ifname` is down or has lost its carrier (no IFF_UP or
// no IFF_RUNNING); `fd` is any socket of this network namespace. False when it cannot tell
// (no such interface: explicit addresses, another namespace).
bool interfaceDown(int fd, const char* ifname);

}  // namespace autopilot::sockets

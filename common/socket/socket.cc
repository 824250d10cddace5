// <linux/tcp.h> rather than <netinet/tcp.h>: glibc's struct tcp_info lacks the byte counters.
#include "common/socket/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <net/if.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace autopilot::sockets {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

void Fd::closeWithReset() {
  if (fd_ >= 0) {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  }
  reset();
}

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  }
  return 0;
}

void SockAddr::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

std::string SockAddr::host() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buf, sizeof(buf));
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, buf,
              sizeof(buf));
  }
  return buf;
}

std::string SockAddr::str() const {
  if (family() == AF_UNIX) {
    return "unix:" + std::string(reinterpret_cast<const sockaddr_un*>(&storage)->sun_path);
  }
  if (family() == AF_INET6) return "[" + host() + "]:" + std::to_string(port());
  return host() + ":" + std::to_string(port());
}

bool SockAddr::parseHost(const std::string& text, SockAddr* out) {
  SockAddr a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    a.length = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    a.length = sizeof(sockaddr_in6);
  } else {
    return false;
  }
  *out = a;
  return true;
}

bool SockAddr::unixPath(const std::string& path, SockAddr* out) {
  SockAddr a;
  auto* u = reinterpret_cast<sockaddr_un*>(&a.storage);
  if (path.empty() || path.size() >= sizeof(u->sun_path)) return false;
  u->sun_family = AF_UNIX;
  std::memcpy(u->sun_path, path.c_str(), path.size() + 1);
  a.length = socklen_t(sizeof(sockaddr_un));
  *out = a;
  return true;
}

bool SockAddr::sameHost(const SockAddr& o) const {
  if (family() != o.family()) return false;
  if (family() == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&o.storage)->sin_addr.s_addr;
  }
  if (family() == AF_INET6) {
    return memcmp(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr,
                  &reinterpret_cast<const sockaddr_in6*>(&o.storage)->sin6_addr, 16) == 0;
  }
  return false;
}

std::string errnoText(int err) {
  char buf[128];
  const char* s = strerror_r(err, buf, sizeof(buf));  // GNU variant
  char out[160];
  std::snprintf(out, sizeof(out), "%s (errno %d)", s, err);
  return out;
}

Fd makeStreamSocket(int family, int* error) {
  Fd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *error = errno;
    return fd;
  }
  if (family != AF_UNIX) {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

bool bindTo(int fd, const SockAddr& addr, int* error) {
  if (::bind(fd, addr.sa(), addr.length) != 0) {
    *error = errno;
    return false;
  }
  return true;
}

IoResult startConnect(int fd, const SockAddr& to) {
  if (::connect(fd, to.sa(), to.length) == 0) return {Io::kOk, 0, 0};
  if (errno == EINPROGRESS || errno == EINTR) return {Io::kWouldBlock, 0, 0};
  return {Io::kError, 0, errno};
}

IoResult connectStatus(int fd) {
  pollfd p{fd, POLLOUT, 0};
  int n = ::poll(&p, 1, 0);
  if (n < 0) return {errno == EINTR ? Io::kWouldBlock : Io::kError, 0, errno};
  if (n == 0) return {Io::kWouldBlock, 0, 0};
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return {Io::kError, 0, errno};
  if (err != 0) return {Io::kError, 0, err};
  return {Io::kOk, 0, 0};
}

Fd listenAt(const SockAddr& addr, int backlog, int* error) {
  Fd fd = makeStreamSocket(addr.family(), error);
  if (!fd.valid()) return fd;
  if (addr.family() != AF_UNIX) {
    int one = 1;  // a leader that restarts must not wait out TIME_WAIT on its fixed port
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  }
  if (!bindTo(fd.get(), addr, error)) return Fd();
  if (::listen(fd.get(), backlog) != 0) {
    *error = errno;
    return Fd();
  }
  return fd;
}

Fd makeListener(const SockAddr& addr, SockAddr* bound, int* error) {
  Fd fd = makeStreamSocket(addr.family(), error);
  if (!fd.valid()) return fd;
  SockAddr a = addr;
  a.setPort(0);
  if (!bindTo(fd.get(), a, error) || ::listen(fd.get(), 64) != 0) {
    if (*error == 0) *error = errno;
    return Fd();
  }
  bound->length = sizeof(bound->storage);
  if (::getsockname(fd.get(), bound->sa(), &bound->length) != 0) {
    *error = errno;
    return Fd();
  }
  return fd;
}

IoResult acceptOne(int listenFd, Fd* out, SockAddr* peer) {
  peer->length = sizeof(peer->storage);
  int fd = ::accept4(listenFd, peer->sa(), &peer->length, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
      return {Io::kWouldBlock, 0, 0};
    }
    return {Io::kError, 0, errno};
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // fails harmlessly on Unix
  out->reset(fd);
  return {Io::kOk, 0, 0};
}

IoResult readSome(int fd, void* buf, size_t len) {
  ssize_t n = ::recv(fd, buf, len, MSG_DONTWAIT);
  if (n > 0) return {Io::kOk, size_t(n), 0};
  if (n == 0) return {len == 0 ? Io::kOk : Io::kClosed, 0, 0};
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return {Io::kWouldBlock, 0, 0};
  return {Io::kError, 0, errno};
}

IoResult writeSome(int fd, const void* buf, size_t len) {
  iovec iov{const_cast<void*>(buf), len};
  return writeVec(fd, &iov, 1);
}

IoResult writeVec(int fd, const iovec* iov, int iovcnt) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = size_t(iovcnt);
  // MSG_NOSIGNAL: a peer that went away must give EPIPE, not kill NCCL with SIGPIPE.
  ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0) return {Io::kOk, size_t(n), 0};
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return {Io::kWouldBlock, 0, 0};
  return {Io::kError, 0, errno};
}

bool tcpProgress(int fd, TcpProgress* out) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  // tcpi_bytes_acked exists since Linux 4.1; older kernels return a shorter struct.
  if (len < offsetof(tcp_info, tcpi_bytes_acked) + sizeof(info.tcpi_bytes_acked)) return false;
  int queued = 0;
  if (::ioctl(fd, SIOCOUTQ, &queued) != 0) return false;
  out->bytesAcked = info.tcpi_bytes_acked;
  out->unacked = uint64_t(queued > 0 ? queued : 0);
  out->rtoNs = uint64_t(info.tcpi_rto) * 1000;
  uint32_t mem[SK_MEMINFO_VARS] = {};
  socklen_t memLen = sizeof(mem);
  out->localQueued = 0;
  if (::getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &memLen) == 0 &&
      memLen > SK_MEMINFO_WMEM_ALLOC * sizeof(uint32_t)) {
    out->localQueued = mem[SK_MEMINFO_WMEM_ALLOC];
  }
  return true;
}

bool interfaceDown(int fd, const char* ifname) {
  ifreq req{};
  if (ifname == nullptr || std::strlen(ifname) >= sizeof(req.ifr_name)) return false;
  std::strncpy(req.ifr_name, ifname, sizeof(req.ifr_name) - 1);
  if (::ioctl(fd, SIOCGIFFLAGS, &req) != 0) return false;
  return (req.ifr_flags & IFF_UP) == 0 || (req.ifr_flags & IFF_RUNNING) == 0;
}

}  // namespace autopilot::sockets

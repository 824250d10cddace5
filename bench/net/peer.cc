#include "bench/net/peer.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace autopilot::bench {

Channel& Channel::operator=(Channel&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Channel::~Channel() { close(); }

void Channel::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Channel::send(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= size_t(n);
  }
  return true;
}

bool Channel::recv(void* data, size_t len, int timeoutMs) {
  auto* p = static_cast<uint8_t*>(data);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (len > 0) {
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                       deadline - std::chrono::steady_clock::now())
                       .count());
    if (left <= 0) return false;
    pollfd pfd{fd_, POLLIN, 0};
    int r = ::poll(&pfd, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = ::recv(fd_, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= size_t(n);
  }
  return true;
}

bool Channel::readable() const {
  pollfd pfd{fd_, POLLIN, 0};
  return ::poll(&pfd, 1, 0) > 0;
}

bool Channel::sendLine(const std::string& line) {
  uint32_t n = uint32_t(line.size());
  return send(&n, sizeof(n)) && send(line.data(), line.size());
}

bool Channel::recvLine(std::string* line, int timeoutMs) {
  uint32_t n = 0;
  if (!recv(&n, sizeof(n), timeoutMs) || n > (1u << 20)) return false;
  line->resize(n);
  return n == 0 || recv(line->data(), n, timeoutMs);
}

bool Channel::expect(const std::string& expected, int timeoutMs) {
  std::string got;
  return recvLine(&got, timeoutMs) && got == expected;
}

void channelPair(Channel* a, Channel* b) {
  int fds[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
  *a = Channel(fds[0]);
  *b = Channel(fds[1]);
}

pid_t spawn(const std::function<int()>& body) {
  std::fflush(stdout);  // or the child would print the parent's buffered output again
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int code = 1;
  try {
    code = body();
  } catch (...) {
    code = 99;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);
}

int waitChild(pid_t pid, int timeoutMs) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

namespace {
inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}
}  // namespace

void fillPattern(void* buf, size_t len, uint64_t seed) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t words = len / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t v = mix(seed * 0x9e3779b97f4a7c15ull + i);
    std::memcpy(p + i * 8, &v, 8);
  }
  uint64_t tail = mix(seed * 0x9e3779b97f4a7c15ull + words);
  for (size_t i = words * 8; i < len; ++i) p[i] = uint8_t(tail >> (8 * (i % 8)));
}

int64_t checkPattern(const void* buf, size_t len, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(buf);
  size_t words = len / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t v = mix(seed * 0x9e3779b97f4a7c15ull + i);
    if (std::memcmp(p + i * 8, &v, 8) != 0) {
      for (size_t b = 0; b < 8; ++b) {
        if (p[i * 8 + b] != uint8_t(v >> (8 * b))) return int64_t(i * 8 + b);
      }
    }
  }
  uint64_t tail = mix(seed * 0x9e3779b97f4a7c15ull + words);
  for (size_t i = words * 8; i < len; ++i) {
    if (p[i] != uint8_t(tail >> (8 * (i % 8)))) return int64_t(i);
  }
  return -1;
}

}  // namespace autopilot::bench

namespace autopilot::bench {

namespace {
uint64_t stampAt(uint64_t message, size_t offset) {
  return mix((message << 24) ^ offset ^ 0x5a5a5a5a5a5a5a5aull);
}
}  // namespace

void stampWords(void* buf, size_t len, uint64_t message) {
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t off = 0; off + 8 <= len; off += kStampStride) {
    uint64_t v = stampAt(message, off);
    std::memcpy(p + off, &v, 8);
  }
}

bool checkStamps(const void* buf, size_t len, uint64_t message) {
  const auto* p = static_cast<const uint8_t*>(buf);
  for (size_t off = 0; off + 8 <= len; off += kStampStride) {
    uint64_t v = stampAt(message, off);
    if (std::memcmp(p + off, &v, 8) != 0) return false;
  }
  return true;
}

void poisonStamps(void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t off = 0; off + 8 <= len; off += kStampStride) std::memset(p + off, 0xa5, 8);
}

}  // namespace autopilot::bench

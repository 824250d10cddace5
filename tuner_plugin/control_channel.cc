#include "tuner_plugin/control_channel.h"

#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include "common/log.h"
#include "common/params.h"
#include "common/safe_file.h"
#include "tuner_plugin/wire_format.h"

namespace autopilot::tuner {
namespace {

params::StringParam gCoordinator(
    "NCCL_AUTOPILOT_COORDINATOR", "",
    "host[:port] where the tuner's ranks meet across hosts (TCP; port + commId mod 1024 per "
    "communicator), or 'unix' for the private Unix socket even across nodes (ranks in containers "
    "or network namespaces sharing one filesystem). Unset: the Unix socket when all ranks share a "
    "node, else MASTER_ADDR.");
params::IntParam gCoordinatorPort(
    "NCCL_AUTOPILOT_COORDINATOR_PORT", 29650, 1, 65535 - 2048,
    "Base TCP port of the tuner's rendezvous when NCCL_AUTOPILOT_COORDINATOR gives none, or "
    "when MASTER_ADDR is used. The profiler's arrival exchange uses the 1024 ports above the "
    "tuner's.");
params::StringParam gSecretFile(
    "NCCL_AUTOPILOT_COORDINATOR_SECRET_FILE", "",
    "File whose content (the same random bytes on every node; owner-only permissions, e.g. "
    "0600) is mixed into the keys that authenticate the rendezvous of the tuner and of the "
    "profiler's arrival exchange. Unset: the key "
    "derives from the communicator id alone (which NCCL's INFO log prints). Set but missing, "
    "unreadable, empty or readable by group/others: both are off.");
params::StringParam gCoordinatorDir(
    "NCCL_AUTOPILOT_COORDINATOR_DIR", "/tmp",
    "Folder holding the private directory (mode 0700) of the tuner's single-node Unix sockets.");

constexpr unsigned long kFlags = abi::subsys::kInit | abi::subsys::kTuning;

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool privateDirectory(const std::string& dir, std::string* why) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = "cannot create " + dir + ": " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    *why = "cannot stat " + dir + ": " + std::strerror(errno);
    return false;
  }
  // A directory somebody else owns or can enter would let them connect or squat the path.
  if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
    *why = dir + " is not a private directory of this user (mode 0700)";
    return false;
  }
  return true;
}

// The socket address of an endpoint: a Unix path, or the first address the host resolves to.
bool addressOf(const Endpoint& ep, sockets::SockAddr* out, std::string* error) {
  if (ep.kind == Endpoint::Kind::kUnix) {
    if (!sockets::SockAddr::unixPath(ep.path, out)) {
      *error = "socket path too long: " + ep.path;
      return false;
    }
    return true;
  }
  if (ep.kind != Endpoint::Kind::kTcp) {
    *error = "no endpoint";
    return false;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port = std::to_string(ep.port);
  int rc = getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    *error = "cannot resolve " + ep.host + ": " + gai_strerror(rc);
    return false;
  }
  std::memcpy(&out->storage, res->ai_addr, res->ai_addrlen);
  out->length = res->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

}  // namespace

std::optional<std::string> readRendezvousSecret() {
  const std::string& path = gSecretFile.get();
  if (path.empty()) return std::string();
  constexpr size_t kMaxSecretBytes = 64 * 1024;
  std::string secret, error;
  struct stat st;
  std::string problem;
  if (!readRegularFile(path, kMaxSecretBytes, &secret, &error, &st)) {
    problem = error;
  } else if (secret.empty()) {
    problem = "it is empty";
  } else if ((st.st_mode & 077) != 0) {
    problem = "it is readable or writable by group or others (mode " +
              std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
              std::to_string(st.st_mode & 7) + ")";
  } else if (st.st_uid != geteuid() && st.st_uid != 0) {
    problem = "it is owned by another user";
  }
  if (!problem.empty()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      AP_WARN(
          kFlags,
          "tuner: NCCL_AUTOPILOT_COORDINATOR_SECRET_FILE=%s cannot serve as the "
          "rendezvous secret: %s. The tuner's learning (NCCL's choices stand) and the profiler's "
          "arrival exchange are off. Fix: put the same "
          "random bytes in that file on every node, owned by the job's user with mode 0600 "
          "(e.g. head -c 32 /dev/urandom > FILE; chmod 600 FILE)",
          path.c_str(), problem.c_str());
    }
    return std::nullopt;
  }
  return secret;
}

void noteUnauthenticatedRendezvous(int rank, const Endpoint& endpoint) {
  static std::atomic<bool> noted{false};
  if (noted.exchange(true)) return;
  log::emit(rank == 0 ? abi::kLogWarn : abi::kLogInfo, kFlags, __func__, __LINE__,
            "tuner: the rendezvous at %s is not authenticated: a process that can reach it and "
            "knows the communicator id (NCCL's INFO log prints it) could join it. Set "
            "NCCL_AUTOPILOT_COORDINATOR_SECRET_FILE to a file with the same random bytes on every "
            "node (mode 0600) to authenticate it (README: Security and failure model)",
            endpoint.describe().c_str());
}

std::string Endpoint::describe() const {
  switch (kind) {
    case Kind::kUnix:
      return "unix:" + path;
    case Kind::kTcp:
      return "tcp:" + host + ":" + std::to_string(port);
    default:
      return "none";
  }
}

Endpoint resolveEndpoint(uint64_t commId, int nNodes, std::string* why, Channel channel) {
  Endpoint ep;
  const int offset = int(commId % 1024) + (channel == Channel::kArrivals ? 1024 : 0);
  std::string coord = gCoordinator.get();
  const bool unixRequested = coord == "unix" || coord == "unix:";
  if (!coord.empty() && !unixRequested) {
    ep.kind = Endpoint::Kind::kTcp;
    int port = int(gCoordinatorPort.get());
    std::string portText;
    if (coord.front() == '[') {  // [IPv6]:port
      size_t close = coord.find(']');
      if (close == std::string::npos) {
        *why = "NCCL_AUTOPILOT_COORDINATOR='" + coord + "': unbalanced '['";
        return Endpoint{};
      }
      if (close + 1 < coord.size() && coord[close + 1] == ':') portText = coord.substr(close + 2);
      coord = coord.substr(1, close - 1);
    } else if (coord.find(':') != std::string::npos && coord.find(':') == coord.rfind(':')) {
      portText = coord.substr(coord.find(':') + 1);  // host:port (several ':' = bare IPv6)
      coord.resize(coord.find(':'));
    }
    if (!portText.empty()) {
      char* end = nullptr;
      long p = std::strtol(portText.c_str(), &end, 10);
      if (*end != '\0' || p < 1 || p > 65535 - 2048) {
        *why = "NCCL_AUTOPILOT_COORDINATOR='" + gCoordinator.get() + "': bad port";
        return Endpoint{};
      }
      port = int(p);
    }
    ep.host = coord;
    ep.port = port + offset;
    return ep;
  }
  if (nNodes <= 1 || unixRequested) {
    std::string dir = gCoordinatorDir.get() + "/nccl-autopilot-" + std::to_string(getuid());
    if (!privateDirectory(dir, why)) return Endpoint{};
    ep.kind = Endpoint::Kind::kUnix;
    ep.path =
        dir + (channel == Channel::kArrivals ? "/arrivals-" : "/tuner-") + hex64(commId) + ".sock";
    return ep;
  }
  if (const char* master = std::getenv("MASTER_ADDR"); master != nullptr && master[0] != '\0') {
    ep.kind = Endpoint::Kind::kTcp;
    ep.host = master;
    ep.port = int(gCoordinatorPort.get()) + offset;
    return ep;
  }
  *why = "ranks span several nodes and neither NCCL_AUTOPILOT_COORDINATOR nor MASTER_ADDR is set";
  return Endpoint{};
}

size_t sweepStaleSockets(const std::string& dir, int64_t minAgeSeconds, size_t maxEntries) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  size_t removed = 0, seen = 0;
  const time_t now = time(nullptr);
  while (dirent* e = readdir(d)) {
    if (++seen > maxEntries) break;
    std::string name = e->d_name;
    bool ours = (name.rfind("tuner-", 0) == 0 || name.rfind("arrivals-", 0) == 0) &&
                name.size() > 5 && name.compare(name.size() - 5, 5, ".sock") == 0;
    if (!ours) continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != getuid() ||
        now - st.st_mtime < minAgeSeconds) {
      continue;
    }
    sockets::SockAddr addr;
    if (!sockets::SockAddr::unixPath(path, &addr)) continue;
    int err = 0;
    Fd probe = sockets::makeStreamSocket(AF_UNIX, &err);
    if (!probe.valid()) break;
    // Refused: nobody listens. A live listener accepts, or with its backlog full answers
    // EAGAIN (the probe is non-blocking): either way its file stays.
    if (::connect(probe.get(), addr.sa(), addr.length) != 0 && errno == ECONNREFUSED &&
        unlink(path.c_str()) == 0) {
      ++removed;
    }
  }
  closedir(d);
  return removed;
}

Fd listenOn(const Endpoint& ep, bool replaceStale, bool* inUse, std::string* error) {
  *inUse = false;
  if (replaceStale && ep.kind == Endpoint::Kind::kUnix) {
    static std::once_flag swept;
    std::call_once(swept, [&] {
      std::string dir = ep.path.substr(0, ep.path.rfind('/'));
      size_t n = sweepStaleSockets(dir, 60, 4096);
      if (n > 0) {
        AP_INFO(kFlags, "removed %zu socket file(s) of ended jobs from %s", n, dir.c_str());
      }
    });
  }
  sockets::SockAddr addr;
  if (!addressOf(ep, &addr, error)) return Fd();
  int err = 0;
  // bind() on a path is atomic: exactly one process of the job wins it.
  Fd fd = sockets::listenAt(addr, 64, &err);
  if (!fd.valid() && err == EADDRINUSE && replaceStale && ep.kind == Endpoint::Kind::kUnix) {
    // A socket file nobody listens on is a leftover: replace it. One somebody listens on is a
    // live leader (several ranks of one process can share a rank number in the registry).
    int probeErr = 0;
    Fd probe = sockets::makeStreamSocket(AF_UNIX, &probeErr);
    if (probe.valid() && ::connect(probe.get(), addr.sa(), addr.length) != 0 &&
        errno == ECONNREFUSED) {
      unlink(ep.path.c_str());
      err = 0;
      fd = sockets::listenAt(addr, 64, &err);
    }
  }
  if (!fd.valid()) {
    *inUse = err == EADDRINUSE;
    *error = "listen on " + ep.describe() + ": " + sockets::errnoText(err);
  }
  return fd;
}

Fd connectTo(const Endpoint& ep, bool* inProgress, std::string* error) {
  *inProgress = false;
  sockets::SockAddr addr;
  if (!addressOf(ep, &addr, error)) return Fd();
  int err = 0;
  Fd fd = sockets::makeStreamSocket(addr.family(), &err);
  if (!fd.valid()) {
    *error = "socket: " + sockets::errnoText(err);
    return Fd();
  }
  sockets::IoResult r = sockets::startConnect(fd.get(), addr);
  if (r.status == sockets::Io::kWouldBlock) {
    *inProgress = true;
  } else if (r.status != sockets::Io::kOk) {
    *error = "connect " + ep.describe() + ": " + sockets::errnoText(r.error);
    return Fd();
  }
  return fd;
}

bool connectFinished(int fd, std::string* error) {
  sockets::IoResult r = sockets::connectStatus(fd);
  if (r.status == sockets::Io::kError) {
    *error = "connect: " + sockets::errnoText(r.error);
    return false;
  }
  return true;
}

Fd acceptFrom(int listenFd) {
  Fd fd;
  sockets::SockAddr peer;
  sockets::acceptOne(listenFd, &fd, &peer);
  return fd;
}

void unlinkEndpoint(const Endpoint& ep) {
  if (ep.kind == Endpoint::Kind::kUnix) unlink(ep.path.c_str());
}

bool FrameConnection::readFrames(std::vector<std::string>* out, size_t maxBody, size_t maxFrames) {
  // Parsed bytes are dropped from the front once they are half the buffer: amortized O(1) per
  // byte, never one erase per frame.
  if (inPos_ > 0 && inPos_ * 2 >= in_.size()) {
    in_.erase(0, inPos_);
    inPos_ = 0;
  }
  // Read only while the buffer holds less than one largest frame plus one budget: a peer that
  // sends faster than its frames are consumed fills its socket, not our memory.
  char buf[16384];
  size_t budget = kReadBudget;
  // The peer's last frames and its shutdown often arrive in one read (a rank that says goodbye
  // and finalizes at once): what it sent is handed out before the connection is reported
  // closed, or its goodbye would be taken for a lost peer.
  bool open = true;
  while (budget > 0 && in_.size() - inPos_ < maxBody + 4 + kReadBudget) {
    ssize_t n = ::recv(fd_.get(), buf, std::min(sizeof(buf), budget), 0);
    if (n == 0) {  // orderly shutdown by the peer
      open = false;
      break;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      open = false;
      break;
    }
    in_.append(buf, size_t(n));
    budget -= size_t(n);
  }
  for (size_t frames = 0; frames < maxFrames && in_.size() - inPos_ >= 4; ++frames) {
    uint32_t len;
    std::memcpy(&len, in_.data() + inPos_, 4);
    if (len > maxBody) return false;
    if (in_.size() - inPos_ < 4 + size_t(len)) break;
    out->emplace_back(in_, inPos_ + 4, len);
    inPos_ += 4 + size_t(len);
  }
  // Closed, but frames beyond this call's allowance are still buffered: reported open until
  // they are handed out (the next calls read the shutdown again, at no cost).
  return open || hasBufferedFrame();
}

bool FrameConnection::hasBufferedFrame() const {
  if (in_.size() - inPos_ < 4) return false;
  uint32_t len;
  std::memcpy(&len, in_.data() + inPos_, 4);
  return in_.size() - inPos_ >= 4 + size_t(len);
}

bool FrameConnection::send(const std::string& frame) {
  if (!fd_.valid() || out_.size() + frame.size() > kMaxQueued) return false;
  out_ += frame;
  return flush();
}

bool FrameConnection::flush() {
  while (!out_.empty()) {
    ssize_t n = ::send(fd_.get(), out_.data(), out_.size(), MSG_NOSIGNAL);
    if (n > 0) {
      out_.erase(0, size_t(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace autopilot::tuner

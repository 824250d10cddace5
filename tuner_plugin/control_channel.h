// The tuner's control channel below the protocol: where a communicator's rendezvous lives, and
// non-blocking framed connections over Unix or TCP sockets. Only the tuner service thread uses
// these; nothing here is on NCCL's call path.
//
// Rendezvous (per communicator):
//  - NCCL_AUTOPILOT_COORDINATOR=host[:port] set: TCP at host, port + (commId mod 1024), so that
//    several communicators of a job get distinct ports;
//  - otherwise, all ranks on one node: a Unix socket in a private directory
//    ($NCCL_AUTOPILOT_COORDINATOR_DIR/nccl-autopilot-<uid>, mode 0700, checked), named after the
//    commId; a path rather than the abstract namespace so that ranks in different network
//    namespaces (the demo's veth rails) still meet;
//  - otherwise MASTER_ADDR (torchrun, many launchers) at NCCL_AUTOPILOT_COORDINATOR_PORT;
//  - otherwise none: the tuner cannot agree across ranks and leaves every table untouched.
#pragma once

#include <poll.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/socket/socket.h"

namespace autopilot::tuner {

struct Endpoint {
  enum class Kind { kNone, kUnix, kTcp };
  Kind kind = Kind::kNone;
  std::string path;  // Unix
  std::string host;  // TCP
  int port = 0;
  std::string describe() const;
};

// The two channels that meet this way: the tuner's consensus, and the profiler's arrival
// exchange (profiler_plugin/arrival_exchange.h), which uses its own socket path or the 1024 TCP
// ports above the tuner's.
enum class Channel { kTuner, kArrivals };

// Where this communicator's ranks meet; kNone with *why when there is no way to.
Endpoint resolveEndpoint(uint64_t commId, int nNodes, std::string* why,
                         Channel channel = Channel::kTuner);

// The secret mixed into the rendezvous keys (NCCL_AUTOPILOT_COORDINATOR_SECRET_FILE): empty
// when unset. Fails closed: a configured file that cannot serve as a secret gives nullopt (the
// channels stay off) with one warning naming the file and the fix, rather than a key anyone
// who reads NCCL's log can derive.
std::optional<std::string> readRendezvousSecret();
// Once per process: a rendezvous across nodes without a secret accepts anyone who can reach it
// and knows the communicator id, which NCCL's own INFO log prints.
void noteUnauthenticatedRendezvous(int rank, const Endpoint& endpoint);

// Sockets come from the library's one socket layer (common/socket/socket.h).
using sockets::Fd;

// Binds and listens (non-blocking). *inUse is set when someone else already holds the address.
// `replaceStale` (rank 0 only) replaces a Unix socket file that nobody listens on any more.
Fd listenOn(const Endpoint& ep, bool replaceStale, bool* inUse, std::string* error);

// Starts a non-blocking connect; *inProgress is set while it completes (wait for POLLOUT).
Fd connectTo(const Endpoint& ep, bool* inProgress, std::string* error);
// After POLLOUT: whether the connect succeeded.
bool connectFinished(int fd, std::string* error);
Fd acceptFrom(int listenFd);

// Removes the Unix socket file of a leader that is going away.
void unlinkEndpoint(const Endpoint& ep);

// Removes, from a private rendezvous directory, the socket files (tuner-*.sock,
// arrivals-*.sock) that nobody listens on and that are at least `minAgeSeconds` old: what jobs
// killed before their finalize left (SIGKILL, a scheduler's cancel), which would otherwise pile
// up until the next reboot. A live leader listens from the moment its file exists, so the age
// only guards the instant between its bind and its listen. Looks at `maxEntries` entries at
// most; returns how many files it removed. listenOn() runs it once per process.
size_t sweepStaleSockets(const std::string& dir, int64_t minAgeSeconds, size_t maxEntries);

// A framed, non-blocking connection with bounded buffers. Each call to readFrames() reads at
// most kReadBudget bytes and hands out at most `maxFrames` frames, so that one peer (or a
// flood) costs the service thread a bounded amount of work per round; frames left in the
// buffer are reported by hasBufferedFrame() and handed out in the next round.
class FrameConnection {
 public:
  static constexpr size_t kMaxQueued = 1 << 20;
  static constexpr size_t kReadBudget = 64 * 1024;

  FrameConnection() = default;
  explicit FrameConnection(Fd fd) : fd_(std::move(fd)) {}
  int fd() const { return fd_.get(); }
  bool open() const { return fd_.valid(); }
  void close() { fd_.reset(); }

  // Reads what the budget allows and appends up to `maxFrames` complete frame bodies to *out.
  // False on EOF, a socket error, or a frame announcing more than `maxBody` bytes (the caller
  // drops the connection).
  bool readFrames(std::vector<std::string>* out, size_t maxBody, size_t maxFrames);
  bool hasBufferedFrame() const;
  // Queues a whole frame (see wire::frame) and writes what the socket takes now. False when the
  // peer does not drain (queue bound) or the socket failed.
  bool send(const std::string& frame);
  bool flush();
  bool wantsWrite() const { return !out_.empty(); }

 private:
  Fd fd_;
  std::string in_;  // received bytes; frames are parsed from inPos_ on
  size_t inPos_ = 0;
  std::string out_;
};

// A channel's slice of the service thread's poll array: its listener (when it has one, marked
// by a null peer) and then every peer, POLLOUT while connecting or while output is queued.
// `Peer` has a FrameConnection `conn` and a `stage` whose Stage::kConnecting is the connect.
template <typename Peer>
void appendPollSlice(const Fd& listen, const std::vector<std::unique_ptr<Peer>>& peers,
                     std::vector<pollfd>* fds, std::vector<Peer*>* fdPeers, size_t* base,
                     size_t* count) {
  *base = fds->size();
  fdPeers->clear();
  if (listen.valid()) {
    fds->push_back(pollfd{listen.get(), POLLIN, 0});
    fdPeers->push_back(nullptr);
  }
  for (const auto& p : peers) {
    short events = POLLIN;
    if (p->stage == Peer::Stage::kConnecting || p->conn.wantsWrite()) events |= POLLOUT;
    fds->push_back(pollfd{p->conn.fd(), events, 0});
    fdPeers->push_back(p.get());
  }
  *count = fds->size() - *base;
}

}  // namespace autopilot::tuner

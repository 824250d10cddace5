#include "bench/demo/orchestrator.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace autopilot::demo {
namespace {

std::string selfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "autopilot";
  buf[n] = '\0';
  return buf;
}

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Job::Job(const JobSpec& spec)
    : spec_(spec),
      fds_(size_t(spec.nRanks), -1),
      ready_(size_t(spec.nRanks), false),
      closed_(size_t(spec.nRanks), false) {
  const std::string exe = selfExe();
  for (int r = 0; r < spec_.nRanks; ++r) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      error_ = "socketpair failed";
      return;
    }
    pid_t pid = fork();
    if (pid == 0) {
      // Child: its end of the socket survives exec; everything else of ours does not.
      fcntl(sv[1], F_SETFD, 0);
      try {
        if (spec_.cluster) spec_.cluster->enterHost(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        _exit(12);
      }
      for (const auto& [k, v] : spec_.env) setenv(k.c_str(), v.c_str(), 1);
      if (!spec_.logDir.empty()) {
        std::string log = spec_.logDir + "/rank" + std::to_string(r) + ".log";
        int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
          dup2(fd, 2);
          close(fd);
        }
      }
      std::string rank = std::to_string(r), n = std::to_string(spec_.nRanks),
                  fd = std::to_string(sv[1]), comm = std::to_string(spec_.commId),
                  rails = std::to_string(spec_.rails), mbit = std::to_string(spec_.railMbit);
      std::string delay = std::to_string(r == spec_.slowRank ? spec_.slowMs : 0.0);
      std::string tree = std::to_string(spec_.treeBwFactor);
      std::string forced = std::to_string(spec_.forcedCell);
      const char* argv[] = {exe.c_str(),
                            "demo-rank",
                            "--rank",
                            rank.c_str(),
                            "--nranks",
                            n.c_str(),
                            "--fd",
                            fd.c_str(),
                            "--comm-id",
                            comm.c_str(),
                            "--rails",
                            rails.c_str(),
                            "--rail-mbit",
                            mbit.c_str(),
                            "--tree-bw-factor",
                            tree.c_str(),
                            "--sizes",
                            spec_.sizes.c_str(),
                            "--delay-ms",
                            delay.c_str(),
                            "--force-cell",
                            forced.c_str(),
                            spec_.allReduceOnly ? "--all-reduce-only" : nullptr,
                            nullptr};
      execv(exe.c_str(), const_cast<char* const*>(argv));
      _exit(127);
    }
    close(sv[1]);
    if (pid < 0) {
      close(sv[0]);
      error_ = "fork failed";
      return;
    }
    pids_.push_back(pid);
    fds_[size_t(r)] = sv[0];
  }
}

Job::~Job() {
  kill();
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

void Job::kill() {
  for (pid_t p : pids_) ::kill(p, SIGKILL);
  for (pid_t p : pids_) waitpid(p, nullptr, 0);
  pids_.clear();
}

void Job::handle(int rank, const char* buf, ssize_t n,
                 const std::function<void(const wire::Iteration&)>& onIteration) {
  if (n < ssize_t(sizeof(wire::Header))) return;
  wire::Header h;
  std::memcpy(&h, buf, sizeof(h));
  switch (h.type) {
    case wire::Type::kHandle: {
      if (n != sizeof(wire::Handle)) return;
      wire::Handle m;
      std::memcpy(&m, buf, sizeof(m));
      int peer = m.peer;
      if (peer < 0 || peer >= spec_.nRanks) return;
      m.peer = rank;  // for the peer: "this is rank's handle"
      wire::sendMsg(fds_[size_t(peer)], m);
      break;
    }
    case wire::Type::kReady:
      ready_[size_t(rank)] = true;
      break;
    case wire::Type::kIteration:
      if (n == sizeof(wire::Iteration) && onIteration) {
        wire::Iteration m;
        std::memcpy(&m, buf, sizeof(m));
        onIteration(m);
      }
      break;
    case wire::Type::kError:
      if (n == sizeof(wire::Error) && error_.empty()) {
        wire::Error e;
        std::memcpy(&e, buf, sizeof(e));
        e.text[sizeof(e.text) - 1] = '\0';
        error_ = "rank " + std::to_string(rank) + ": " + e.text;
      }
      break;
    default:
      break;
  }
}

void Job::pump(int timeoutMs, const std::function<void(const wire::Iteration&)>& onIteration) {
  int64_t deadline = nowMs() + timeoutMs;
  std::vector<pollfd> pfds(size_t(spec_.nRanks));
  while (error_.empty()) {
    int64_t left = deadline - nowMs();
    if (left <= 0) return;
    int open = 0;
    for (int r = 0; r < spec_.nRanks; ++r) {
      pfds[size_t(r)] = {closed_[size_t(r)] ? -1 : fds_[size_t(r)], POLLIN, 0};
      open += !closed_[size_t(r)];
    }
    if (open == 0) return;
    if (poll(pfds.data(), pfds.size(), int(left)) <= 0) continue;
    for (int r = 0; r < spec_.nRanks; ++r) {
      if (!(pfds[size_t(r)].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[512];
      ssize_t n = recv(fds_[size_t(r)], buf, sizeof(buf), MSG_DONTWAIT);
      if (n <= 0) {
        closed_[size_t(r)] = true;  // the rank exited (normally or not)
        continue;
      }
      handle(r, buf, n, onIteration);
    }
  }
}

bool Job::waitReady(int timeoutMs) {
  int64_t deadline = nowMs() + timeoutMs;
  for (;;) {
    bool all = true;
    for (bool r : ready_) all = all && r;
    if (all) return true;
    for (int r = 0; r < spec_.nRanks; ++r) {
      if (closed_[size_t(r)] && !ready_[size_t(r)] && error_.empty()) {
        error_ = "rank " + std::to_string(r) + " exited during setup";
      }
    }
    if (!error_.empty()) return false;
    if (nowMs() > deadline) {
      error_ = "connection setup timed out";
      return false;
    }
    pump(100, nullptr);
  }
}

void Job::go() {
  for (int r = 0; r < spec_.nRanks; ++r) {
    wire::Header g{wire::Type::kGo, r};
    wire::sendMsg(fds_[size_t(r)], g);
  }
}

bool Job::stop(uint64_t iteration, int timeoutMs,
               const std::function<void(const wire::Iteration&)>& onIteration) {
  for (int r = 0; r < spec_.nRanks; ++r) {
    wire::Stop s{};
    s.h = {wire::Type::kStop, r};
    s.atIteration = iteration;
    wire::sendMsg(fds_[size_t(r)], s);
  }
  int64_t deadline = nowMs() + timeoutMs;
  for (;;) {
    bool allClosed = true;
    for (bool c : closed_) allClosed = allClosed && c;
    if (allClosed) break;
    if (nowMs() > deadline) {
      kill();
      return false;
    }
    pump(100, onIteration);
    if (!error_.empty()) break;
  }
  bool clean = true;
  for (pid_t p : pids_) {
    // Ranks exit right after their last report; give each a moment, then insist.
    int status = 0;
    pid_t done = 0;
    for (int i = 0; i < 50 && (done = waitpid(p, &status, WNOHANG)) == 0; ++i) usleep(20000);
    if (done == 0) {
      ::kill(p, SIGKILL);
      waitpid(p, &status, 0);
      clean = false;
    } else if (done < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      clean = false;
    }
  }
  pids_.clear();
  return clean && error_.empty();
}

}  // namespace autopilot::demo

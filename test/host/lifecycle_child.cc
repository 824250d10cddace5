// One process of the lifecycle matrix (test_process_lifecycle.cc): loads the real library as
// NCCL does, brings up communicators of all three plugins (so that the tuner's and the
// profiler's service threads run), then ends or splits the way a host process may.
//
// Exit codes: the scenario's own status where it ends the process itself; 0 for scenarios that
// end normally; 90 + n for a failed precondition or check (printed on stderr).
#include <dirent.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/net/endpoint.h"
#include "common/host/log_capture.h"
#include "common/host/plugin_host.h"
#include "test/host/host_test_util.h"

using namespace autopilot;
using namespace autopilot::host;

namespace {

#define CHILD_CHECK(code, cond, ...)                                                        \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "lifecycle_child %d: check failed: %s: ", int(getpid()), #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                    \
      std::fprintf(stderr, "\n");                                                           \
      std::fflush(stderr);                                                                  \
      _exit(code);                                                                          \
    }                                                                                       \
  } while (0)

// Threads of ours are named ap-*.
int ourThreads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string name;
      std::getline(comm, name);
      if (name.rfind("ap-", 0) == 0) ++n;
    }
    closedir(d);
  }
  return n;
}

PluginHost::Options everywhere() {
  PluginHost::Options o;
  o.netPlugin = "autopilot";
  o.tunerPlugin = "autopilot";
  o.profilerPlugin = "autopilot";
  return o;
}

// A host with all three plugins and `comms` communicators (ids base, base+1, ...). Sessions are
// heap objects the scenario may leak on purpose (a process that never finalizes).
struct Job {
  std::unique_ptr<PluginHost> host;
  std::vector<CommSession*> sessions;

  explicit Job(int comms, uint64_t base = 0x7000) {
    host = std::make_unique<PluginHost>(everywhere());
    CHILD_CHECK(91, host->loadNet() && host->loadProfiler() && host->loadTuner(), "load");
    for (int c = 0; c < comms; ++c) add(base + uint64_t(c));
  }
  CommSession* add(uint64_t commId) {
    CommSession::Config cfg;
    cfg.commId = commId;
    cfg.nRanks = 2;  // the peer never comes: the rendezvous stays open, the thread busy
    cfg.nNodes = 1;  // single node: the tuner meets on a Unix socket
    cfg.rank = 0;
    auto* s = new CommSession(*host, cfg);
    CHILD_CHECK(92, s->init() == abi::kSuccess, "init of comm 0x%llx",
                static_cast<unsigned long long>(commId));
    sessions.push_back(s);
    return s;
  }
  void finalize(CommSession* s) {
    s->finalize();
    delete s;
    sessions.erase(std::find(sessions.begin(), sessions.end(), s));
  }
  void finalizeAll() {
    while (!sessions.empty()) finalize(sessions.back());
  }
  void tune() {
    for (CommSession* s : sessions) {
      // NCCL hands over its 2-D cost array cast to float**.
      float table[abi::kNumAlgorithms][abi::kNumProtocols];
      for (int a = 0; a < abi::kNumAlgorithms; ++a) {
        for (int p = 0; p < abi::kNumProtocols; ++p) table[a][p] = 10.0f + float(a + p);
      }
      float** rows = reinterpret_cast<float**>(table);
      int channels = 0;
      CHILD_CHECK(93,
                  host->tuner()->getCollInfo(s->tunerContext(), abi::kFuncAllReduce, 1 << 20, 1,
                                             rows, abi::kNumAlgorithms, abi::kNumProtocols, 0,
                                             &channels) == abi::kSuccess,
                  "getCollInfo");
    }
  }
};

// Both service threads run once a communicator is up (the precondition of every case).
void requireThreads(int expected) {
  for (int i = 0; i < 200 && ourThreads() != expected; ++i) usleep(10000);
  CHILD_CHECK(94, ourThreads() == expected, "%d threads named ap-*, expected %d", ourThreads(),
              expected);
}

int childStatus(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// fork() with live communicators and both threads running; the child ends as `how` says, the
// parent goes on using and then finalizing its communicators.
int forkCase(const std::string& how) {
  Job job(2);
  requireThreads(2);
  std::fflush(nullptr);
  pid_t pid = fork();
  CHILD_CHECK(95, pid >= 0, "fork");
  if (pid == 0) {
    // The child inherited no thread.
    CHILD_CHECK(96, ourThreads() == 0, "the forked child has %d ap-* threads", ourThreads());
    if (how == "exit") exit(5);
    if (how == "_exit") _exit(6);
    if (how == "new-comm") {
      // A communicator of the child's own gets a service of its own, and goes away cleanly.
      CommSession* s = job.add(0x7100);
      requireThreads(2);
      job.finalize(s);
      requireThreads(0);
      exit(7);
    }
    if (how == "finalize-inherited") {
      // NCCL cannot run in a forked child, but a careless program may tear down what it
      // inherited: that must neither touch the parent's sockets and files nor crash.
      job.finalizeAll();
      exit(8);
    }
    _exit(97);
  }
  int status = childStatus(pid);
  job.tune();
  requireThreads(2);
  job.finalizeAll();
  requireThreads(0);
  return status;
}

// A pair of net communicators in this process, streaming until the process is told to stop.
std::atomic<bool> gTerm{false};

void streamForever(std::atomic<bool>* ready) {
  bench::NetEndpoint ep;
  CHILD_CHECK(98, ep.ok(), "net endpoint: %s", ep.error().c_str());
  uint8_t handle[abi::kNetHandleMaxSize];
  void* listenComm = nullptr;
  CHILD_CHECK(98, ep.listen(0, handle, &listenComm) == abi::kSuccess, "listen");
  void* sendComm = nullptr;
  void* recvComm = nullptr;
  std::thread connector([&] { ep.connect(0, handle, &sendComm, 20); });
  ep.accept(listenComm, &recvComm, 20);
  connector.join();
  CHILD_CHECK(98, sendComm && recvComm, "connect/accept: %s", ep.error().c_str());
  std::vector<char> out(1 << 20, 'x'), in(1 << 20);
  ready->store(true);
  for (;;) {
    void* rreq = nullptr;
    void* sreq = nullptr;
    void* data = in.data();
    size_t size = in.size();
    int tag = 0;
    CHILD_CHECK(98, ep.irecv(recvComm, 1, &data, &size, &tag, &rreq) == abi::kSuccess, "irecv");
    CHILD_CHECK(98, ep.isend(sendComm, out.data(), out.size(), 0, &sreq) == abi::kSuccess, "isend");
    int sizes = 0;
    CHILD_CHECK(98, ep.wait(sreq, &sizes, 20) == abi::kSuccess, "send");
    CHILD_CHECK(98, ep.wait(rreq, &sizes, 20) == abi::kSuccess, "recv");
  }
}

// Collectives in flight (net transfers on one thread, tuner calls on another) when SIGTERM
// arrives. With `handler`, the program turns the signal into exit(143) without finalizing, as
// launchers' shutdown handlers do; without, the default action kills the process.
int sigtermCase(bool handler) {
  if (handler) {
    struct sigaction sa {};
    sa.sa_handler = [](int) { gTerm.store(true); };
    sigaction(SIGTERM, &sa, nullptr);
  }
  Job job(1);
  requireThreads(2);
  std::atomic<bool> ready{false};
  std::thread net(streamForever, &ready);
  net.detach();
  while (!ready.load()) usleep(1000);
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) {
    job.tune();
    if (gTerm.load()) exit(143);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CHILD_CHECK(90, argc == 2, "usage: lifecycle_child SCENARIO");
  std::string scenario = argv[1];
  if (scenario == "exit") {
    Job job(2);
    requireThreads(2);
    job.tune();
    exit(3);  // static destructors and atexit handlers run with both threads alive
  }
  if (scenario == "_exit") {
    Job job(2);
    requireThreads(2);
    _exit(4);
  }
  if (scenario.rfind("fork-", 0) == 0) return forkCase(scenario.substr(5));
  if (scenario == "dlclose-alive") {
    {
      Job job(2);
      requireThreads(2);
      job.sessions.clear();  // never finalized: the sessions are leaked with the library's state
      job.host->unloadAll();
    }
    CHILD_CHECK(99, !test::libraryMapped(), "the library is still mapped after the last dlclose");
    CHILD_CHECK(99, ourThreads() == 0, "%d ap-* threads outlived dlclose", ourThreads());
    Job again(2);
    requireThreads(2);
    again.tune();
    again.finalizeAll();
    requireThreads(0);
    return 0;
  }
  if (scenario == "finalize-other-thread") {
    Job job(3);
    requireThreads(2);
    std::thread t([&] { job.finalizeAll(); });
    t.join();
    requireThreads(0);
    return 0;
  }
  if (scenario == "interleaved") {
    Job job(0);
    for (int round = 0; round < 20; ++round) {
      uint64_t base = 0x8000 + uint64_t(round) * 4;
      CommSession* a = job.add(base);
      CommSession* b = job.add(base + 1);
      requireThreads(2);
      job.finalize(a);
      CommSession* c = job.add(base + 2);
      job.tune();
      job.finalize(b);
      requireThreads(2);
      job.finalize(c);
      requireThreads(0);
    }
    return 0;
  }
  if (scenario == "sigterm") return sigtermCase(false);
  if (scenario == "sigterm-exit") return sigtermCase(true);
  CHILD_CHECK(90, false, "unknown scenario %s", scenario.c_str());
  return 90;
}

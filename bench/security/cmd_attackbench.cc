// `autopilot attackbench`: what hostile clients on the network cost a job that runs our
// plugins. The real library is loaded as NCCL loads it; a communicator's tuner leads a TCP
// rendezvous on 127.0.0.1 and a net listen comm waits for a connection. While attacker threads
// flood the rendezvous with frames, hold idle connections open (slowloris), present hellos
// without the key (strangers) and pile idle connections on the net listener, the main thread
// does what NCCL does: initializes and finalizes other communicators, calls getCollInfo, and
// connects through the net plugin. Afterwards the real follower joins from another process.
//
// Reported: peak resident memory growth, the longest delay of each NCCL call, the leader's
// counters, whether the follower joined. --check fails on memory growth above 64 MiB, on a
// follower that could not join, or on an attack that was not seen (no stranger rejected): the
// delays are figures, not pass/fail (a loaded machine stretches them).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/cli_args.h"
#include "bench/commands.h"
#include "bench/net/endpoint.h"
#include "common/host/log_capture.h"
#include "common/host/plugin_host.h"
#include "net_plugin/transport/tcp/handle.h"
#include "tuner_plugin/wire_format.h"

namespace autopilot::bench {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

long statusKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  size_t n = std::strlen(key);
  while (std::getline(in, line)) {
    if (line.compare(0, n, key) == 0) return std::atol(line.c_str() + n);
  }
  return -1;
}

int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

struct Attack {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> floodBytes{0}, floodConnections{0}, strangers{0}, idleOpened{0};
};

// Zero-length frames as fast as the socket takes them, reconnecting whenever we are dropped.
void flood(Attack* a, int port) {
  std::vector<char> zeros(64 * 1024, 0);
  while (!a->stop.load()) {
    int fd = dial(port);
    if (fd < 0) {
      usleep(1000);
      continue;
    }
    a->floodConnections.fetch_add(1);
    while (!a->stop.load()) {
      ssize_t n = send(fd, zeros.data(), zeros.size(), MSG_NOSIGNAL);
      if (n <= 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;
      if (n > 0) a->floodBytes.fetch_add(uint64_t(n));
    }
    close(fd);
  }
}

// Connections that never speak, `count` of them held open, replaced when closed.
void slowloris(Attack* a, int port, int count) {
  std::vector<int> fds;
  while (!a->stop.load()) {
    for (size_t i = 0; i < fds.size();) {
      char c;
      ssize_t n = recv(fds[i], &c, 1, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        close(fds[i]);
        fds.erase(fds.begin() + long(i));
      } else {
        ++i;
      }
    }
    while (int(fds.size()) < count && !a->stop.load()) {
      int fd = dial(port);
      if (fd < 0) break;
      fds.push_back(fd);
      a->idleOpened.fetch_add(1);
    }
    usleep(20000);
  }
  for (int fd : fds) close(fd);
}

// A well-formed hello whose MAC is not made with the job's key.
void stranger(Attack* a, int port) {
  namespace wire = tuner::wire;
  while (!a->stop.load()) {
    int fd = dial(port);
    if (fd < 0) {
      usleep(1000);
      continue;
    }
    char challenge[64];
    if (recv(fd, challenge, sizeof(challenge), 0) > 0) {
      wire::Writer w;
      w.u8(wire::kHello);
      uint8_t junk[wire::kNonceSize + 32];
      wire::randomBytes(junk, sizeof(junk));
      w.bytes(junk, wire::kNonceSize);
      w.i32(1);
      w.u32(0);
      w.bytes(junk + wire::kNonceSize, 32);
      std::string f = wire::frame(w.str());
      send(fd, f.data(), f.size(), MSG_NOSIGNAL);
      char c;
      recv(fd, &c, 1, 0);  // the leader closes
      a->strangers.fetch_add(1);
    }
    close(fd);
    usleep(2000);
  }
}

// Reads one frame body (blocking, with the socket's timeout); empty on failure.
std::string readFrame(int fd) {
  uint8_t len[4];
  size_t got = 0;
  while (got < 4) {
    ssize_t n = recv(fd, len + got, 4 - got, 0);
    if (n <= 0) return {};
    got += size_t(n);
  }
  uint32_t size;
  std::memcpy(&size, len, 4);
  if (size > 4096) return {};
  std::string body(size, '\0');
  for (got = 0; got < size;) {
    ssize_t n = recv(fd, body.data() + got, size - got, 0);
    if (n <= 0) return {};
    got += size_t(n);
  }
  return body;
}

// An intruder who knows the key: without a secret file it derives from the communicator id,
// which NCCL's INFO log prints. It completes the handshake claiming `rank`; returns the
// connection (left open), or -1.
int joinAsImpostor(int port, uint64_t commId, int nRanks, int nNodes, int rank) {
  namespace wire = tuner::wire;
  int fd = dial(port);
  if (fd < 0) return -1;
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string challenge = readFrame(fd);
  wire::Reader r(challenge.data(), challenge.size());
  uint8_t type;
  uint32_t version;
  wire::Nonce leaderNonce, followerNonce;
  if (!r.u8(&type) || type != wire::kChallenge || !r.u32(&version) ||
      !r.bytes(leaderNonce, wire::kNonceSize)) {
    close(fd);
    return -1;
  }
  wire::randomBytes(followerNonce, wire::kNonceSize);
  Digest key = wire::jobKey(commId, nRanks, nNodes, "");
  Digest mac = wire::helloMac(key, leaderNonce, followerNonce, rank, 0);
  wire::Writer w;
  w.u8(wire::kHello);
  w.bytes(followerNonce, wire::kNonceSize);
  w.i32(rank);
  w.u32(0);
  w.bytes(mac.data(), mac.size());
  std::string f = wire::frame(w.str());
  send(fd, f.data(), f.size(), MSG_NOSIGNAL);
  std::string welcome = readFrame(fd);
  if (welcome.empty() || uint8_t(welcome[0]) != wire::kWelcome) {
    close(fd);
    return -1;
  }
  return fd;
}

struct Figures {
  long rssBeforeKb = 0, peakKb = 0;
  double initMaxMs = 0, initMedianMs = 0, initP99Ms = 0, collInfoMaxUs = 0, connectMaxMs = 0;
  int inits = 0, connects = 0, connectFailures = 0;
  uint64_t floodMiB = 0, floodConnections = 0, strangers = 0, idleOpened = 0;
  bool followerJoined = false;
  size_t strangersRejectedLogged = 0;
  bool impostorJoined = false, duplicateFroze = false, followerStayedAtDefaults = false;
};

// The real follower, in a process of its own (a forked copy would inherit the leader's view of
// the communicator): joins rank `rank` of `commId`, waits `waitMs`, and exits 0 when what
// `expect` says held ("joined": it joined the leader; "defaults": no policy ever took effect).
int runFollower(uint64_t commId, int nRanks, int rank, int waitMs, const std::string& expect) {
  host::PluginHost::Options o;
  o.tunerPlugin = "autopilot";
  o.profilerPlugin = "autopilot";
  o.netPlugin = "none";
  host::PluginHost h(o);
  if (!h.loadTuner() || !h.loadProfiler()) return 3;
  host::CommSession::Config c;
  c.commId = commId;
  c.nRanks = nRanks;
  c.nNodes = 2;
  c.rank = rank;
  host::CommSession s(h, c);
  if (s.init() != abi::kSuccess) return 4;
  for (int waited = 0; waited < waitMs; waited += 10) {
    if (expect == "joined" && host::LogCapture::count(abi::kLogInfo, "joined the leader") > 0) {
      return 0;
    }
    usleep(10000);
  }
  s.finalize();
  if (expect == "defaults")
    return host::LogCapture::count(abi::kLogInfo, "policy v0 in effect") == 1 ? 0 : 5;
  return 6;
}

int spawnFollower(uint64_t commId, int nRanks, int rank, int waitMs, const char* expect) {
  pid_t pid = fork();
  if (pid == 0) {
    std::string spec = std::to_string(commId) + ":" + std::to_string(nRanks) + ":" +
                       std::to_string(rank) + ":" + std::to_string(waitMs) + ":" + expect;
    execl("/proc/self/exe", "autopilot", "attackbench", "--follower", spec.c_str(), nullptr);
    _exit(7);
  }
  return pid;
}

int waitFollower(int pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

int cmdAttackbench(int argc, char** argv) {
  double seconds = 5;
  std::string json, follower;
  bool check = false;
  cli::Args args(
      "autopilot attackbench",
      "Hostile clients against the tuner's TCP rendezvous and a net listener of the real\n"
      "library while NCCL-like calls run; prints memory and delays.");
  args.addReal("--seconds", seconds, cli::Interval::leftOpen(0, 600), "length of the attack");
  args.addText("--json", json, "the results as JSON").typeName("FILE");
  args.addFlag("--check", check, "enforce the memory bound and that the real follower still joins");
  args.addText("--follower", follower,
               "run as the follower rank that this command starts in a child process")
      .typeName("COMM:NRANKS:RANK:WAIT_MS:EXPECT")
      .internal();
  if (std::optional<int> rc = args.parse(argc, argv)) return *rc;
  if (!follower.empty()) {
    unsigned long long comm = 0;
    int nRanks = 0, rank = 0, waitMs = 0;
    char expect[16] = {};
    if (std::sscanf(follower.c_str(), "%llu:%d:%d:%d:%15s", &comm, &nRanks, &rank, &waitMs,
                    expect) != 5) {
      return cli::kUsageError;
    }
    return runFollower(comm, nRanks, rank, waitMs, expect);
  }
  const int basePort = 30000 + int(getpid() % 300) * 64;
  const uint64_t commId = 0xa77ac;
  const int port = basePort + int(commId % 1024);
  std::string coordinator = "127.0.0.1:" + std::to_string(basePort);
  setenv("NCCL_AUTOPILOT_COORDINATOR", coordinator.c_str(), 1);
  setenv("NCCL_AUTOPILOT_TRANSPORT", "tcp", 1);
  setenv("NCCL_AUTOPILOT_NET_ADDRS", "127.0.0.1", 1);
  setenv("NCCL_AUTOPILOT_TUNER_JOIN_TIMEOUT_MS",
         std::to_string(int(seconds * 1000) + 30000).c_str(), 1);

  host::PluginHost::Options o;
  o.netPlugin = "autopilot";
  o.tunerPlugin = "autopilot";
  o.profilerPlugin = "autopilot";
  host::PluginHost h(o);
  if (!h.loadNet() || !h.loadTuner() || !h.loadProfiler()) {
    std::fprintf(stderr, "attackbench: the library did not load\n");
    return 1;
  }
  host::CommSession::Config cfg;
  cfg.commId = commId;
  cfg.nRanks = 2;
  cfg.nNodes = 2;
  cfg.rank = 0;
  host::CommSession leader(h, cfg);
  if (leader.init() != abi::kSuccess) return 1;
  usleep(200000);  // the rendezvous listens

  // The net listener under attack, and a connector for honest connects.
  NetEndpoint ep;
  uint8_t handle[abi::kNetHandleMaxSize];
  void* listenComm = nullptr;
  if (!ep.ok() || ep.listen(0, handle, &listenComm) != abi::kSuccess) {
    std::fprintf(stderr, "attackbench: net listen failed: %s\n", ep.error().c_str());
    return 1;
  }
  uint16_t netPort = 0;
  {
    // The first rail address of our own handle (TCP transport: after the header).
    net::tcp::Handle decoded;
    if (net::tcp::decodeHandle(handle, net::tcp::kHandleBytes, &decoded) ==
        net::tcp::wire::DecodeError::kOk) {
      netPort = uint16_t(decoded.rails[0].port());
    }
  }

  Figures f;
  // NCCL's calls: init and finalize of other communicators (one rank: no rendezvous of their
  // own), getCollInfo of the attacked communicator, honest net connects through the listener.
  uint64_t nextComm = 0xb000;
  auto measure = [&](double forSeconds, std::vector<double>* initMs, double* collInfoMaxUs,
                     int connectsWanted) {
    auto end = Clock::now() + std::chrono::duration<double>(forSeconds);
    int connects = 0;
    while (Clock::now() < end) {
      host::CommSession::Config c;
      c.commId = nextComm++;
      c.nRanks = 1;
      c.nNodes = 1;
      auto t0 = Clock::now();
      {
        host::CommSession s(h, c);
        s.init();
        initMs->push_back(msSince(t0));
        for (int i = 0; i < 100; ++i) {
          float table[abi::kNumAlgorithms][abi::kNumProtocols];
          for (auto& row : table) std::fill(std::begin(row), std::end(row), 1.0f);
          int ch = 0;
          auto t1 = Clock::now();
          h.tuner()->getCollInfo(leader.tunerContext(), abi::kFuncAllReduce, 1 << 20, 1,
                                 reinterpret_cast<float**>(table), abi::kNumAlgorithms,
                                 abi::kNumProtocols, 0, &ch);
          *collInfoMaxUs = std::max(*collInfoMaxUs, msSince(t1) * 1000);
        }
      }
      if (connects < connectsWanted) {
        // One connection per listen comm, as NCCL uses them.
        void* lc = nullptr;
        uint8_t hnd[abi::kNetHandleMaxSize];
        if (ep.listen(0, hnd, &lc) == abi::kSuccess) {
          void* send = nullptr;
          void* recv = nullptr;
          auto t2 = Clock::now();
          std::thread dialer([&] { ep.connect(0, hnd, &send, 10); });
          ep.accept(lc, &recv, 10);
          dialer.join();
          ++connects;
          ++f.connects;
          if (send && recv) {
            f.connectMaxMs = std::max(f.connectMaxMs, msSince(t2));
          } else {
            ++f.connectFailures;
          }
          if (send) ep.net()->closeSend(send);
          if (recv) ep.net()->closeRecv(recv);
          ep.net()->closeListen(lc);
        }
      }
      f.peakKb = std::max(f.peakKb, statusKb("VmRSS:"));
      usleep(20000);
    }
  };
  // Baseline in the same run: the same calls without an attack.
  std::vector<double> baseInitMs;
  double baseCollInfoMaxUs = 0;
  measure(seconds / 2, &baseInitMs, &baseCollInfoMaxUs, 0);
  f.rssBeforeKb = statusKb("VmRSS:");
  f.peakKb = f.rssBeforeKb;
  Attack attack;
  std::vector<std::thread> attackers;
  attackers.emplace_back(flood, &attack, port);
  attackers.emplace_back(flood, &attack, port);
  attackers.emplace_back(slowloris, &attack, port, 100);
  attackers.emplace_back(stranger, &attack, port);
  if (netPort != 0) {
    attackers.emplace_back(slowloris, &attack, netPort, 60);
    attackers.emplace_back(flood, &attack, netPort);
  }
  std::vector<double> initMs;
  measure(seconds, &initMs, &f.collInfoMaxUs, 5);
  attack.stop.store(true);
  for (auto& t : attackers) t.join();
  f.peakKb = std::max(f.peakKb, statusKb("VmRSS:"));
  auto quantile = [](std::vector<double>& v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
  };
  f.inits = int(initMs.size());
  f.initMedianMs = quantile(initMs, 0.5);
  f.initP99Ms = quantile(initMs, 0.99);
  f.initMaxMs = quantile(initMs, 1.0);
  double baseMedian = quantile(baseInitMs, 0.5), baseP99 = quantile(baseInitMs, 0.99),
         baseMax = quantile(baseInitMs, 1.0);
  f.floodMiB = attack.floodBytes.load() >> 20;
  f.floodConnections = attack.floodConnections.load();
  f.strangers = attack.strangers.load();
  f.idleOpened = attack.idleOpened.load();

  // The real follower, from another process, still gets in.
  f.followerJoined = waitFollower(spawnFollower(commId, cfg.nRanks, 1, 3000, "joined")) == 0;
  leader.finalize();
  f.strangersRejectedLogged = host::LogCapture::count(abi::kLogWarn, "rejected a connection to");

  // A rank claimed twice: an impostor with the (derivable) key claims rank 1 before the real
  // rank 1 of a fresh communicator arrives. The leader must freeze every rank at NCCL's
  // defaults instead of letting the impostor push the real rank out.
  {
    host::CommSession::Config dc = cfg;
    dc.commId = commId + 1;
    dc.nRanks = 3;
    host::CommSession dupLeader(h, dc);
    if (dupLeader.init() == abi::kSuccess) {
      usleep(200000);
      int dupPort = basePort + int(dc.commId % 1024);
      int impostor = joinAsImpostor(dupPort, dc.commId, dc.nRanks, dc.nNodes, 1);
      f.impostorJoined = impostor >= 0;
      int real = spawnFollower(dc.commId, dc.nRanks, 1, 1500, "defaults");
      for (int i = 0; i < 300 && !f.duplicateFroze; ++i) {
        f.duplicateFroze =
            host::LogCapture::count(abi::kLogWarn, "rank 1 was claimed by two connections") > 0;
        usleep(10000);
      }
      f.followerStayedAtDefaults = waitFollower(real) == 0;
      if (impostor >= 0) close(impostor);
      dupLeader.finalize();
    }
  }
  ep.net()->closeListen(listenComm);

  double growthMiB = double(f.peakKb - f.rssBeforeKb) / 1024.0;
  std::printf(
      "attackbench: %.1f s of attack on the tuner rendezvous (127.0.0.1:%d) and a net "
      "listener (port %u)\n",
      seconds, port, unsigned(netPort));
  std::printf("| attack | volume |\n|---|---|\n");
  std::printf("| frame flood | %llu MiB over %llu connections |\n", (unsigned long long)f.floodMiB,
              (unsigned long long)f.floodConnections);
  std::printf("| idle connections (slowloris) | %llu opened |\n", (unsigned long long)f.idleOpened);
  std::printf("| strangers (hello without the key) | %llu |\n", (unsigned long long)f.strangers);
  std::printf(
      "\n| what NCCL saw | under attack | baseline (same run, no attack) |\n|---|---|---|\n");
  std::printf("| peak resident memory growth | %.1f MiB | |\n", growthMiB);
  std::printf(
      "| tuner init of another communicator (median / p99 / max) | %.2f / %.2f / %.2f ms "
      "(%d inits) | %.2f / %.2f / %.2f ms (%zu inits) |\n",
      f.initMedianMs, f.initP99Ms, f.initMaxMs, f.inits, baseMedian, baseP99, baseMax,
      baseInitMs.size());
  std::printf("| getCollInfo of the attacked communicator, max | %.1f us | %.1f us |\n",
              f.collInfoMaxUs, baseCollInfoMaxUs);
  std::printf("| net connect through the attacked listener | max %.1f ms, %d of %d failed |\n",
              f.connectMaxMs, f.connectFailures, f.connects);
  std::printf("| the real follower joined afterwards | %s |\n", f.followerJoined ? "yes" : "NO");
  std::printf("| rank claimed twice (impostor with the derivable key first) | %s |\n",
              !f.impostorJoined ? "impostor could not join (unexpected)"
              : f.duplicateFroze && f.followerStayedAtDefaults
                  ? "frozen at NCCL's defaults on every rank"
                  : "NOT frozen");
  if (!json.empty()) {
    std::FILE* out = std::fopen(json.c_str(), "w");
    if (out != nullptr) {
      std::fprintf(out,
                   "{\"seconds\": %.1f, \"flood_mib\": %llu, \"flood_connections\": %llu, "
                   "\"idle_connections\": %llu, \"strangers\": %llu, \"rss_growth_mib\": %.1f, "
                   "\"init_median_ms\": %.3f, \"init_p99_ms\": %.3f, \"init_max_ms\": %.3f, "
                   "\"inits\": %d, \"baseline_init_max_ms\": %.3f, "
                   "\"getcollinfo_max_us\": %.1f, \"connect_max_ms\": %.1f, "
                   "\"connect_failures\": %d, \"connects\": %d, \"follower_joined\": %s, "
                   "\"duplicate_rank_froze\": %s}\n",
                   seconds, (unsigned long long)f.floodMiB, (unsigned long long)f.floodConnections,
                   (unsigned long long)f.idleOpened, (unsigned long long)f.strangers, growthMiB,
                   f.initMedianMs, f.initP99Ms, f.initMaxMs, f.inits, baseMax, f.collInfoMaxUs,
                   f.connectMaxMs, f.connectFailures, f.connects,
                   f.followerJoined ? "true" : "false",
                   f.duplicateFroze && f.followerStayedAtDefaults ? "true" : "false");
      std::fclose(out);
    }
  }
  if (check) {
    bool ok = true;
    if (growthMiB > 64) {
      std::fprintf(stderr, "attackbench: memory grew by %.1f MiB under attack (bound 64)\n",
                   growthMiB);
      ok = false;
    }
    if (!f.followerJoined) {
      std::fprintf(stderr, "attackbench: the real follower could not join after the attack\n");
      ok = false;
    }
    if (f.strangers == 0 || f.floodConnections == 0 || f.idleOpened == 0) {
      std::fprintf(stderr, "attackbench: an attack did not run\n");
      ok = false;
    }
    if (!f.impostorJoined || !f.duplicateFroze || !f.followerStayedAtDefaults) {
      std::fprintf(stderr,
                   "attackbench: a rank claimed twice did not freeze every rank at "
                   "NCCL's defaults (impostor joined %d, leader froze %d, real rank at v0 %d)\n",
                   f.impostorJoined, f.duplicateFroze, f.followerStayedAtDefaults);
      ok = false;
    }
    if (f.connectFailures > 0) {
      std::fprintf(stderr, "attackbench: %d honest net connects failed under attack\n",
                   f.connectFailures);
      ok = false;
    }
    return ok ? 0 : 1;
  }
  return 0;
}

cli::CommandRegistrar registerAttackbench(
    "attackbench", cmdAttackbench,
    "hostile clients against the tuner rendezvous and a net listener: memory, delays");

}  // namespace
}  // namespace autopilot::bench

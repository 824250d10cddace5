// The lifecycle matrix: every way a host process may end or split while our threads run, each in
// a fresh child process (lifecycle_child) that loads the real library as NCCL does. Each case
// must end with the process's own status: never an abort (134), never a hang, never a crash.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "test/host/host_test_util.h"

extern char** environ;

namespace {

struct Child {
  pid_t pid = -1;
  int stdoutFd = -1;
};

// A private folder per case for the tuner's Unix sockets and the profiler's trace files.
std::string caseDir(const std::string& scenario) {
  std::string dir = "/tmp/ap-lifecycle-" + std::to_string(getpid()) + "-" + scenario;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  return dir;
}

Child spawnChild(const std::string& scenario, const std::string& dir) {
  std::string exe = autopilot::test::binDir() + "/lifecycle_child";
  int pipeFds[2];
  REQUIRE(pipe2(pipeFds, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipeFds[1], 1);
  std::vector<std::string> envText;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    bool ours = false;  // set below; getenv() would return an inherited first copy
    for (const char* key : {"ASAN_OPTIONS=", "NCCL_AUTOPILOT_"}) {
      ours = ours || entry.rfind(key, 0) == 0;
    }
    if (!ours) envText.push_back(entry);
  }
  // The scenarios leak by design (communicators never finalized): LeakSanitizer would replace
  // the status under test with its own.
  envText.push_back("ASAN_OPTIONS=detect_leaks=0");
  envText.push_back("NCCL_AUTOPILOT_COORDINATOR_DIR=" + dir);
  envText.push_back("NCCL_AUTOPILOT_TRACE_FILE=" + dir + "/trace-%c.json");
  envText.push_back("NCCL_AUTOPILOT_TRANSPORT=tcp");
  envText.push_back("NCCL_AUTOPILOT_NET_ADDRS=127.0.0.1,127.0.0.2");
  std::vector<char*> envp;
  for (auto& s : envText) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<char*> argv{exe.data(), const_cast<char*>(scenario.c_str()), nullptr};
  Child c;
  REQUIRE(posix_spawn(&c.pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data()) == 0);
  posix_spawn_file_actions_destroy(&actions);
  close(pipeFds[1]);
  c.stdoutFd = pipeFds[0];
  return c;
}

// The child's status: its exit code, 128 + signal when killed, -1 when it had to be killed
// because it hung.
int waitChild(const Child& c, double timeoutSec) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSec);
  int status = 0;
  for (;;) {
    pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &status, 0);
      close(c.stdoutFd);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  close(c.stdoutFd);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -2;
}

// Reads the child's stdout until `line` or the deadline.
bool awaitLine(const Child& c, const std::string& line, double timeoutSec) {
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSec);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{c.stdoutFd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    ssize_t n = read(c.stdoutFd, buf, sizeof(buf));
    if (n <= 0) return false;
    got.append(buf, size_t(n));
    if (got.find(line + "\n") != std::string::npos) return true;
  }
  return false;
}

// Every trace file in `dir` is a complete JSON array: opened once, closed once, nothing of the
// parent's written twice by a forked child.
void checkTraces(const std::string& dir, int expectedFiles) {
  int status = 0;
  std::string files =
      autopilot::test::runCommand("ls " + dir + "/trace-*.json 2>/dev/null", &status);
  std::istringstream list(files);
  std::string path;
  int n = 0;
  while (std::getline(list, path)) {
    ++n;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    INFO(path << ":\n" << s.substr(0, 400));
    REQUIRE(s.rfind("[\n", 0) == 0);
    REQUIRE(s.size() >= 3);
    CHECK(s.compare(s.size() - 3, 3, "\n]\n") == 0);
    CHECK(s.find("\n]\n") == s.size() - 3);  // closed exactly once
    size_t first = s.find("\"process_name\"");
    CHECK(s.find("\"process_name\"", first + 1) == std::string::npos);  // header written once
  }
  CHECK(n == expectedFiles);
}

int runScenario(const std::string& scenario, const std::string& dir, double timeoutSec = 60) {
  Child c = spawnChild(scenario, dir);
  return waitChild(c, timeoutSec);
}

}  // namespace

TEST_CASE("exit() without finalize ends with the program's status, exports complete",
          "[lifecycle][process]") {
  std::string dir = caseDir("exit");
  CHECK(runScenario("exit", dir) == 3);
  checkTraces(dir, 2);
}

TEST_CASE("_exit() without finalize ends with the program's status", "[lifecycle][process]") {
  std::string dir = caseDir("_exit");
  CHECK(runScenario("_exit", dir) == 4);
}

TEST_CASE("fork() with live communicators: the child ends as it wants, the parent goes on",
          "[lifecycle][process]") {
  // The parent returns its child's status after using and finalizing its own communicators.
  for (auto [how, status] : {std::pair<const char*, int>{"exit", 5},
                             {"_exit", 6},
                             {"new-comm", 7},
                             {"finalize-inherited", 8}}) {
    INFO("child: " << how);
    std::string dir = caseDir(std::string("fork-") + how);
    CHECK(runScenario(std::string("fork-") + how, dir) == status);
    checkTraces(dir, how == std::string("new-comm") ? 3 : 2);
  }
}

TEST_CASE("dlclose with communicators alive leaves no thread behind; a reload works",
          "[lifecycle][process]") {
  std::string dir = caseDir("dlclose");
  CHECK(runScenario("dlclose-alive", dir) == 0);
}

TEST_CASE("finalize from another thread than init", "[lifecycle][process]") {
  std::string dir = caseDir("other-thread");
  CHECK(runScenario("finalize-other-thread", dir) == 0);
  checkTraces(dir, 3);
}

TEST_CASE("communicators created and finalized interleaved", "[lifecycle][process]") {
  std::string dir = caseDir("interleaved");
  CHECK(runScenario("interleaved", dir, 120) == 0);
}

TEST_CASE("SIGTERM during collectives: default action, and a handler that calls exit()",
          "[lifecycle][process]") {
  for (auto [scenario, status] :
       {std::pair<const char*, int>{"sigterm", 128 + SIGTERM}, {"sigterm-exit", 143}}) {
    INFO(scenario);
    std::string dir = caseDir(scenario);
    Child c = spawnChild(scenario, dir);
    bool ready = awaitLine(c, "ready", 30);
    CHECK(ready);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(c.pid, SIGTERM);
    CHECK(waitChild(c, 30) == status);
    if (std::string(scenario) == "sigterm-exit") checkTraces(dir, 1);
  }
}

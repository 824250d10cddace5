// fork() while a thread of ours is inside the host's logger. NCCL's logger serialises its callers
// with a mutex; without the fork gate (common/log.cc) the child inherits that mutex held by a
// thread that does not exist there, and its first log line hangs for ever.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "common/service_thread.h"

using namespace autopilot;

namespace {

// A host logger that, like NCCL's, holds a lock while it writes; slow only while a test asks, so
// that other tests in this process are unaffected once it is installed.
std::mutex gHostMu;
std::atomic<bool> gSlow{false};

void slowHostLogger(abi::LogLevel, unsigned long, const char*, int, const char*, ...) {
  std::lock_guard<std::mutex> lock(gHostMu);
  if (gSlow.load()) std::this_thread::sleep_for(std::chrono::microseconds(300));
}

void noop() {}

// The child's status, or -1 when it had to be killed because it hung.
int waitBounded(pid_t pid, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("fork() while a thread of ours is inside the host's logger: the child can log",
          "[log][fork]") {
  abi::Logger previous = log::logger();
  log::setLogger(&slowHostLogger);
  registerForkHandlers({&noop, &noop, &noop});
  gSlow.store(true);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lines{0};
  // Inside the host's lock nearly all the time: without the gate nearly every fork copies the
  // lock held.
  std::thread chatty([&] {
    while (!stop.load()) {
      AP_INFO(0, "a service thread's line");
      lines.fetch_add(1);
    }
  });
  while (lines.load() < 10) std::this_thread::yield();
  int hung = 0;
  int failed = 0;
  for (int i = 0; i < 20; ++i) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      AP_INFO(0, "the child's first line");
      _exit(0);
    }
    // Seconds for a child that needs well under one millisecond.
    int status = waitBounded(pid, std::chrono::seconds(10));
    hung += status == -1;
    failed += status != 0 && status != -1;
  }
  stop.store(true);
  chatty.join();
  gSlow.store(false);
  if (previous != nullptr) log::setLogger(previous);
  CHECK(lines.load() > 10);  // the thread kept logging while the process forked
  CHECK(hung == 0);
  CHECK(failed == 0);
}

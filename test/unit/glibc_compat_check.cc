// The glibc shims of the shipped library (common/glibc_compat.cc). This program is linked the
// way the library is (autopilot_portable_runtime: the same --wrap list), so every call below of
// a wrapped function goes through its shim, as the library's calls do.
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>

extern "C" int ap_emulated_cond_clockwait(pthread_cond_t*, pthread_mutex_t*, clockid_t,
                                          const timespec*);

namespace {
int64_t nowNs(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}
timespec inNs(clockid_t clock, int64_t ns) {
  const int64_t at = nowNs(clock) + ns;
  return timespec{static_cast<time_t>(at / 1000000000), static_cast<long>(at % 1000000000)};
}

struct Waiter {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
};
}  // namespace

TEST_CASE("emulated clockwait: deadline on the caller's clock, waited in bounded slices",
          "[glibc_compat]") {
  Waiter w;
  pthread_mutex_lock(&w.mutex);

  SECTION("a deadline already past times out at once") {
    const timespec past = inNs(CLOCK_MONOTONIC, -1000000);
    CHECK(ap_emulated_cond_clockwait(&w.cond, &w.mutex, CLOCK_MONOTONIC, &past) == ETIMEDOUT);
  }
  SECTION("a bad deadline is refused") {
    timespec bad = inNs(CLOCK_MONOTONIC, 1000000);
    bad.tv_nsec = 1000000000;
    CHECK(ap_emulated_cond_clockwait(&w.cond, &w.mutex, CLOCK_MONOTONIC, &bad) == EINVAL);
  }
  SECTION("a 180 ms wait nobody signals ends at its deadline, after spurious slice ends") {
    const int64_t start = nowNs(CLOCK_MONOTONIC);
    const timespec deadline = inNs(CLOCK_MONOTONIC, 180000000);
    int spurious = 0;
    int rc = 0;
    for (int i = 0; i < 1000 && (rc = ap_emulated_cond_clockwait(&w.cond, &w.mutex, CLOCK_MONOTONIC,
                                                                 &deadline)) == 0;
         ++i)
      ++spurious;
    CHECK(rc == ETIMEDOUT);
    CHECK(nowNs(CLOCK_MONOTONIC) - start >= 180000000);
    // Slices are at most 50 ms: at least three end before a 180 ms deadline.
    CHECK(spurious >= 3);
  }
  SECTION("a signal wakes it long before its deadline") {
    bool flag = false;
    std::thread t([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      pthread_mutex_lock(&w.mutex);
      flag = true;
      pthread_cond_signal(&w.cond);
      pthread_mutex_unlock(&w.mutex);
    });
    const int64_t start = nowNs(CLOCK_MONOTONIC);
    const timespec deadline = inNs(CLOCK_MONOTONIC, 30LL * 1000000000);
    int rc = 0;
    while (!flag && rc == 0)
      rc = ap_emulated_cond_clockwait(&w.cond, &w.mutex, CLOCK_MONOTONIC, &deadline);
    CHECK(rc == 0);
    CHECK(flag);
    // 30 s deadline, woken after ~20 ms: 10 s is a margin no loaded machine needs.
    CHECK(nowNs(CLOCK_MONOTONIC) - start < 10LL * 1000000000);
    pthread_mutex_unlock(&w.mutex);
    t.join();
    pthread_mutex_lock(&w.mutex);
  }
  SECTION("CLOCK_REALTIME waits in one piece") {
    const timespec deadline = inNs(CLOCK_REALTIME, 60000000);
    CHECK(ap_emulated_cond_clockwait(&w.cond, &w.mutex, CLOCK_REALTIME, &deadline) == ETIMEDOUT);
  }
  pthread_mutex_unlock(&w.mutex);
}

TEST_CASE("std::condition_variable's steady waits through the wrapped clockwait",
          "[glibc_compat]") {
  std::mutex m;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(m);
  const auto start = std::chrono::steady_clock::now();
  CHECK(cv.wait_until(lock, start + std::chrono::milliseconds(30)) == std::cv_status::timeout);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(30));
  CHECK_FALSE(cv.wait_for(lock, std::chrono::milliseconds(5), [] { return false; }));
}

TEST_CASE("stat shims fill what glibc's own fstatat does", "[glibc_compat]") {
  char dir[] = "/tmp/ap-compat-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string file = std::string(dir) + "/f";
  const std::string link = std::string(dir) + "/l";
  const int fd = open(file.c_str(), O_CREAT | O_WRONLY, 0640);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "12345", 5) == 5);
  REQUIRE(symlink(file.c_str(), link.c_str()) == 0);

  struct stat viaStat {
  }, viaLstat{}, viaFstat{}, reference{}, linkRef{};
  REQUIRE(fstatat(AT_FDCWD, file.c_str(), &reference, 0) == 0);
  REQUIRE(fstatat(AT_FDCWD, link.c_str(), &linkRef, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(stat(link.c_str(), &viaStat) == 0);
  CHECK(lstat(link.c_str(), &viaLstat) == 0);
  CHECK(fstat(fd, &viaFstat) == 0);
  for (const struct stat* s : {&viaStat, &viaFstat}) {
    CHECK(s->st_ino == reference.st_ino);
    CHECK(s->st_size == 5);
    CHECK((s->st_mode & 0777) == 0640);
    CHECK(S_ISREG(s->st_mode));
    CHECK(s->st_mtim.tv_sec == reference.st_mtim.tv_sec);
  }
  CHECK(S_ISLNK(viaLstat.st_mode));
  CHECK(viaLstat.st_ino == linkRef.st_ino);
  errno = 0;
  CHECK(stat((std::string(dir) + "/missing").c_str(), &viaStat) == -1);
  CHECK(errno == ENOENT);
  CHECK(fstat(-1, &viaFstat) == -1);
  CHECK(errno == EBADF);
  close(fd);
  unlink(link.c_str());
  unlink(file.c_str());
  rmdir(dir);
}

TEST_CASE("random bytes, dl*, threads and math through the shims", "[glibc_compat]") {
  unsigned char buffer[257] = {};
  CHECK(getentropy(buffer, 256) == 0);
  CHECK(getentropy(buffer, 257) == -1);
  CHECK(errno == EIO);
  CHECK(getrandom(buffer, 16, 0) == 16);
  std::random_device device;
  (void)device();

  void* m = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(m != nullptr);
  auto* cosine = reinterpret_cast<double (*)(double)>(dlsym(m, "cos"));
  REQUIRE(cosine != nullptr);
  CHECK(cosine(0.0) == 1.0);
  CHECK(dlclose(m) == 0);
  CHECK(dlopen("libnot-there-at-all.so", RTLD_NOW) == nullptr);
  CHECK(std::string(dlerror()).find("libnot-there-at-all") != std::string::npos);

  int ran = 0;
  std::once_flag once;
  std::thread t([&] { std::call_once(once, [&] { ++ran; }); });
  t.join();
  std::call_once(once, [&] { ++ran; });
  CHECK(ran == 1);
  thread_local int perThread = 7;
  CHECK(perThread == 7);

  volatile double x = 1.0;
  CHECK(std::log(x) == 0.0);
  CHECK(std::exp(x - 1.0) == 1.0);
  errno = 0;
  CHECK(std::isinf(std::log(x - 1.0)));
  CHECK(errno == ERANGE);
}

TEST_CASE("random bytes on a kernel without getrandom come from /dev/urandom", "[glibc_compat]") {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child's getrandom system call fails with ENOSYS, as on a kernel before 3.17.
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrandom, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0)
      _exit(10);
    unsigned char probe[4];
    if (syscall(SYS_getrandom, probe, sizeof(probe), 0) != -1 || errno != ENOSYS) _exit(11);
    unsigned char a[64] = {}, b[64] = {};
    if (getentropy(a, sizeof(a)) != 0) _exit(12);
    if (getrandom(b, sizeof(b), 0) != ssize_t(sizeof(b))) _exit(13);
    if (memcmp(a, b, sizeof(a)) == 0) _exit(14);
    std::random_device device;
    (void)device();
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

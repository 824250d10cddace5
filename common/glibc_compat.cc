// The shipped library's link to glibc, kept at the oldest symbol versions (docs/portability.md).
//
// The library is built on a current glibc but must load wherever NCCL runs, down to glibc 2.17
// (RHEL/CentOS 7, manylinux2014). The linker binds every call to the newest version of a symbol
// it finds, and glibc gave many of ours new versions after 2.17: dl* and most pthread_*
// functions moved into libc in 2.34, stat and friends became real functions in 2.33, and so on.
// Our own objects and the libstdc++ linked into the library (libstdc++.a: std::thread,
// call_once, random_device, shared_ptr's single-thread test) both reference them, so the fix
// must reach objects we do not compile: the link redirects each such symbol with --wrap to a
// __wrap_ function here (the list: autopilot_portable_runtime in CMakeLists.txt), which calls
// the symbol's original version through .symver. glibc keeps every old version for old binaries,
// so on a current glibc these are the same functions; on an old glibc they are the only ones.
// Symbols that have no old version are implemented here from system calls or older functions.
//
// Compiled only into the shipped library and tool (never the sanitizer builds, whose runtimes
// intercept the current versions).
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#define AP_COMPAT extern "C" __attribute__((visibility("hidden")))

namespace {
// Random bytes from the getrandom system call (Linux 3.17), or from /dev/urandom on a kernel
// without it (RHEL 7's 3.10 kernels may lack it). Returns how many bytes it filled, or -1 with
// errno set when neither source gives any.
ssize_t kernelRandom(void* buffer, size_t length, unsigned int flags) {
  const long n = syscall(SYS_getrandom, buffer, length, flags);
  if (n >= 0 || errno != ENOSYS) return n;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t got = 0;
  while (size_t(got) < length) {
    const ssize_t r = read(fd, static_cast<char*>(buffer) + got, length - size_t(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += r;
  }
  const int saved = errno;
  close(fd);
  errno = saved;
  return got > 0 || length == 0 ? got : -1;
}
}  // namespace

// std::random_device uses arc4random (glibc 2.36) when libstdc++ was built on a glibc that has
// it. The same bits come from the kernel, which needs nothing newer from glibc.
AP_COMPAT uint32_t __wrap_arc4random() {
  uint32_t value = 0;
  for (;;) {
    const ssize_t n = kernelRandom(&value, sizeof(value), 0);
    if (n == ssize_t(sizeof(value))) return value;
    if (n < 0 && errno != EINTR) break;
  }
  // No source at all (no getrandom, no /dev/urandom): what is left is still a seed, not a
  // secret; the library uses random_device only to seed non-cryptographic generators.
  return uint32_t(getpid()) * 2654435761u ^ uint32_t(uintptr_t(&value));
}

#if defined(__x86_64__)
// x86-64's first symbol version: every function below existed under it (or under the version
// named beside it) in glibc 2.17, in libc, libpthread, libdl or libm. The library lists
// libpthread.so.0 and libdl.so.2 as needed, so that those versions are found there on a glibc
// older than 2.34 (on a newer one both files are empty and libc holds the old versions).
#define AP_OLD(name, version) __asm__(".symver ap_old_" #name "," #name "@" version)

extern "C" {
void* ap_old_dlopen(const char*, int);
void* ap_old_dlsym(void*, const char*);
void* ap_old_dlvsym(void*, const char*, const char*);
int ap_old_dlclose(void*);
char* ap_old_dlerror();
int ap_old_pthread_create(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
int ap_old_pthread_detach(pthread_t);
void* ap_old_pthread_getspecific(pthread_key_t);
int ap_old_pthread_setspecific(pthread_key_t, const void*);
int ap_old_pthread_key_create(pthread_key_t*, void (*)(void*));
int ap_old_pthread_key_delete(pthread_key_t);
int ap_old_pthread_mutex_trylock(pthread_mutex_t*);
int ap_old_pthread_once(pthread_once_t*, void (*)());
int ap_old_pthread_sigmask(int, const sigset_t*, sigset_t*);
int ap_old_pthread_setname_np(pthread_t, const char*);
int ap_old_pthread_timedjoin_np(pthread_t, void**, const timespec*);
int ap_old_pthread_cond_timedwait(pthread_cond_t*, pthread_mutex_t*, const timespec*);
double ap_old_exp(double);
double ap_old_log(double);
}
AP_OLD(dlopen, "GLIBC_2.2.5");
AP_OLD(dlsym, "GLIBC_2.2.5");
AP_OLD(dlvsym, "GLIBC_2.2.5");
AP_OLD(dlclose, "GLIBC_2.2.5");
AP_OLD(dlerror, "GLIBC_2.2.5");
AP_OLD(pthread_create, "GLIBC_2.2.5");
AP_OLD(pthread_detach, "GLIBC_2.2.5");
AP_OLD(pthread_getspecific, "GLIBC_2.2.5");
AP_OLD(pthread_setspecific, "GLIBC_2.2.5");
AP_OLD(pthread_key_create, "GLIBC_2.2.5");
AP_OLD(pthread_key_delete, "GLIBC_2.2.5");
AP_OLD(pthread_mutex_trylock, "GLIBC_2.2.5");
AP_OLD(pthread_once, "GLIBC_2.2.5");
AP_OLD(pthread_sigmask, "GLIBC_2.2.5");
AP_OLD(pthread_setname_np, "GLIBC_2.12");
AP_OLD(pthread_timedjoin_np, "GLIBC_2.3.3");
AP_OLD(pthread_cond_timedwait, "GLIBC_2.3.2");
AP_OLD(exp, "GLIBC_2.2.5");
AP_OLD(log, "GLIBC_2.2.5");

// dlopen and dlsym find the caller's object from their return address; these wrappers are in
// the library itself, so they answer for the same object as a direct call would.
AP_COMPAT void* __wrap_dlopen(const char* file, int mode) { return ap_old_dlopen(file, mode); }
AP_COMPAT void* __wrap_dlsym(void* handle, const char* name) { return ap_old_dlsym(handle, name); }
AP_COMPAT int __wrap_dlclose(void* handle) { return ap_old_dlclose(handle); }
AP_COMPAT char* __wrap_dlerror() { return ap_old_dlerror(); }

AP_COMPAT int __wrap_pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*),
                                    void* arg) {
  return ap_old_pthread_create(t, attr, fn, arg);
}
AP_COMPAT int __wrap_pthread_detach(pthread_t t) { return ap_old_pthread_detach(t); }
AP_COMPAT void* __wrap_pthread_getspecific(pthread_key_t k) {
  return ap_old_pthread_getspecific(k);
}
AP_COMPAT int __wrap_pthread_setspecific(pthread_key_t k, const void* v) {
  return ap_old_pthread_setspecific(k, v);
}
AP_COMPAT int __wrap_pthread_key_create(pthread_key_t* k, void (*destructor)(void*)) {
  return ap_old_pthread_key_create(k, destructor);
}
AP_COMPAT int __wrap_pthread_key_delete(pthread_key_t k) { return ap_old_pthread_key_delete(k); }
AP_COMPAT int __wrap_pthread_mutex_trylock(pthread_mutex_t* m) {
  return ap_old_pthread_mutex_trylock(m);
}
AP_COMPAT int __wrap_pthread_once(pthread_once_t* once, void (*fn)()) {
  return ap_old_pthread_once(once, fn);
}
AP_COMPAT int __wrap_pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  return ap_old_pthread_sigmask(how, set, old);
}
AP_COMPAT int __wrap_pthread_setname_np(pthread_t t, const char* name) {
  return ap_old_pthread_setname_np(t, name);
}
AP_COMPAT int __wrap_pthread_timedjoin_np(pthread_t t, void** ret, const timespec* deadline) {
  return ap_old_pthread_timedjoin_np(t, ret, deadline);
}
AP_COMPAT double __wrap_exp(double x) { return ap_old_exp(x); }
AP_COMPAT double __wrap_log(double x) { return ap_old_log(x); }

namespace {
using ClockWaitFn = int (*)(pthread_cond_t*, pthread_mutex_t*, clockid_t, const timespec*);

int64_t toNs(const timespec& t) { return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec; }
timespec fromNs(int64_t ns) {
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

// glibc's own pthread_cond_clockwait where the running glibc has one (2.30 on), else null.
ClockWaitFn nativeClockWait() {
  static std::atomic<ClockWaitFn> fn{nullptr};
  static std::atomic<bool> looked{false};
  if (!looked.load(std::memory_order_acquire)) {
    fn.store(reinterpret_cast<ClockWaitFn>(
                 ap_old_dlvsym(RTLD_DEFAULT, "pthread_cond_clockwait", "GLIBC_2.30")),
             std::memory_order_relaxed);
    looked.store(true, std::memory_order_release);
  }
  return fn.load(std::memory_order_relaxed);
}
}  // namespace

// Waits on a condition variable until a deadline on the given clock, emulated on a glibc
// without pthread_cond_clockwait (before 2.30). std::condition_variable's steady_clock waits
// (our service threads' timers) come here. A condition variable made by
// PTHREAD_COND_INITIALIZER waits on CLOCK_REALTIME, so the emulation waits in slices of at most
// kSliceNs of real time and compares the caller's own clock after each: a step of the wall clock
// can then shift a wait by one slice at most, never by the size of the step. A slice that ends
// before the caller's deadline returns 0, a spurious wake-up, which every caller must already
// accept (libstdc++'s waits and ours re-check their condition and clock).
AP_COMPAT int ap_emulated_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                         clockid_t clock, const timespec* deadline) {
  constexpr int64_t kSliceNs = 50 * 1000 * 1000;
  if (deadline->tv_nsec < 0 || deadline->tv_nsec >= 1000000000) return EINVAL;
  if (clock == CLOCK_REALTIME) return ap_old_pthread_cond_timedwait(cond, mutex, deadline);
  timespec now{};
  if (clock_gettime(clock, &now) != 0) return EINVAL;
  const int64_t left = toNs(*deadline) - toNs(now);
  if (left <= 0) return ETIMEDOUT;
  timespec realNow{};
  clock_gettime(CLOCK_REALTIME, &realNow);
  const timespec realDeadline = fromNs(toNs(realNow) + (left < kSliceNs ? left : kSliceNs));
  const int rc = ap_old_pthread_cond_timedwait(cond, mutex, &realDeadline);
  if (rc != ETIMEDOUT) return rc;
  clock_gettime(clock, &now);
  return toNs(now) >= toNs(*deadline) ? ETIMEDOUT : 0;
}

AP_COMPAT int __wrap_pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                            clockid_t clock, const timespec* deadline) {
  if (ClockWaitFn native = nativeClockWait()) return native(cond, mutex, clock, deadline);
  return ap_emulated_cond_clockwait(cond, mutex, clock, deadline);
}

// stat and friends are real functions only since glibc 2.33 (before, inline calls of __xstat).
// On x86-64 glibc's struct stat is the kernel's, so the system calls fill it directly.
AP_COMPAT int __wrap_stat(const char* path, struct stat* st) {
  return static_cast<int>(syscall(SYS_newfstatat, AT_FDCWD, path, st, 0));
}
AP_COMPAT int __wrap_lstat(const char* path, struct stat* st) {
  return static_cast<int>(syscall(SYS_newfstatat, AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW));
}
AP_COMPAT int __wrap_fstat(int fd, struct stat* st) {
  return static_cast<int>(syscall(SYS_fstat, fd, st));
}
AP_COMPAT int __wrap_fstat64(int fd, struct stat* st) { return __wrap_fstat(fd, st); }

// getrandom and getentropy (glibc 2.25; libstdc++'s random_device, our nonces) with the same
// contracts: getentropy fills all of at most 256 bytes or fails.
AP_COMPAT ssize_t __wrap_getrandom(void* buffer, size_t length, unsigned int flags) {
  return kernelRandom(buffer, length, flags);
}
AP_COMPAT int __wrap_getentropy(void* buffer, size_t length) {
  if (length > 256) {
    errno = EIO;
    return -1;
  }
  auto* p = static_cast<unsigned char*>(buffer);
  while (length > 0) {
    const ssize_t n = kernelRandom(p, length, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) {
      errno = EIO;
      return -1;
    }
    p += n;
    length -= static_cast<size_t>(n);
  }
  return 0;
}

// libstdc++ (GCC 11 on, glibc 2.32 on) skips atomic reference counting while this says the
// process has one thread. Ours always says "more than one": the atomic path is always correct,
// and the library runs its own threads anyway.
extern "C" {
__attribute__((visibility("hidden"))) char __wrap___libc_single_threaded = 0;
}
#endif

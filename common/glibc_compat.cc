// Shims that keep the plugin library's glibc requirement down (linked with --wrap into the
// shipped library only; see the top-level CMakeLists.txt). The library carries its own copy of
// libstdc++, which was built against this machine's glibc and would otherwise pull in what is
// new there.
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

// std::random_device uses arc4random (glibc 2.36) when libstdc++ was built on a glibc that has
// it. The same bits come from the getrandom system call (Linux 3.17), which needs nothing
// newer from glibc.
extern "C" __attribute__((visibility("hidden"))) uint32_t __wrap_arc4random() {
  uint32_t value = 0;
  for (;;) {
    long n = syscall(SYS_getrandom, &value, sizeof(value), 0);
    if (n == long(sizeof(value))) return value;
    if (n < 0 && errno != EINTR) break;
  }
  // No getrandom (a kernel older than 3.17): what is left is still a seed, not a secret; the
  // library uses random_device only to seed non-cryptographic generators.
  return uint32_t(getpid()) * 2654435761u ^ uint32_t(uintptr_t(&value));
}

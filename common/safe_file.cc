#include "common/safe_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace autopilot {
namespace {

std::string describeErrno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

bool writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += size_t(n);
  }
  return true;
}

}  // namespace

bool readRegularFile(const std::string& path, size_t maxBytes, std::string* out, std::string* error,
                     struct stat* info) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *error = describeErrno("cannot open", path);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = path + " is not a regular file";
    ::close(fd);
    errno = EINVAL;
    return false;
  }
  if (size_t(st.st_size) > maxBytes) {
    *error = path + " is larger than " + std::to_string(maxBytes) + " bytes";
    ::close(fd);
    errno = EFBIG;
    return false;
  }
  if (info != nullptr) *info = st;
  out->clear();
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = describeErrno("cannot read", path);
      int saved = errno;
      ::close(fd);
      errno = saved;
      return false;
    }
    if (n == 0) break;
    if (out->size() + size_t(n) > maxBytes) {  // grew while we read
      *error = path + " is larger than " + std::to_string(maxBytes) + " bytes";
      ::close(fd);
      errno = EFBIG;
      return false;
    }
    out->append(buf, size_t(n));
  }
  ::close(fd);
  return true;
}

bool writeFileAtomically(const std::string& path, const std::string& text, std::string* error,
                         unsigned mode) {
  // mkostemp creates the temporary with O_EXCL under a random name beside the target, so a
  // link planted at a predictable temporary name cannot redirect the write.
  std::vector<char> tmp(path.begin(), path.end());
  const char suffix[] = ".tmp.XXXXXX";
  tmp.insert(tmp.end(), suffix, suffix + sizeof(suffix));  // includes the NUL
  int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) {
    *error = describeErrno("cannot create a temporary file beside", path);
    return false;
  }
  bool ok = fchmod(fd, mode) == 0 && writeAll(fd, text);
  if (!ok) *error = describeErrno("cannot write", tmp.data());
  if (::close(fd) != 0 && ok) {
    ok = false;
    *error = describeErrno("cannot write", tmp.data());
  }
  if (ok && ::rename(tmp.data(), path.c_str()) != 0) {
    ok = false;
    *error = describeErrno("cannot rename a temporary file onto", path);
  }
  if (!ok) ::unlink(tmp.data());
  return ok;
}

int openExportFile(const std::string& path, bool append, std::string* error) {
  int flags =
      O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (append ? O_APPEND : O_TRUNC);
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    *error = errno == ELOOP ? path + " is a symbolic link; refusing to follow it"
                            : describeErrno("cannot open", path);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = path + " is not a regular file";
    ::close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

int lockFileWithin(const std::string& lockPath, int timeoutMs, std::string* error) {
  int fd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0) {
    *error = errno == ELOOP ? lockPath + " is a symbolic link; refusing to follow it"
                            : describeErrno("cannot open", lockPath);
    return -1;
  }
  // flock() has no timeout: poll for the lock in short steps up to the deadline.
  for (int waited = 0;; waited += 10) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    if (errno != EWOULDBLOCK && errno != EINTR) {
      *error = describeErrno("cannot lock", lockPath);
      break;
    }
    if (waited >= timeoutMs) {
      *error = lockPath + " is locked by another process for more than " +
               std::to_string(timeoutMs) + " ms";
      break;
    }
    usleep(10000);
  }
  ::close(fd);
  return -1;
}

}  // namespace autopilot

#include "bench/top/prom_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

namespace autopilot::top {
namespace {

constexpr size_t kMaxFileBytes = 16u << 20;  // far above any real file; bounds a stray one
constexpr size_t kMaxFiles = 4096;

bool endsWith(const std::string& s, const char* suffix) {
  size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// The .prom files of `dir` and of its sub-folders (one level: a folder per host).
void findFiles(const std::string& dir, int depth, std::vector<std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || out->size() >= kMaxFiles) continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (stat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode) && depth > 0) {
      findFiles(path, depth - 1, out);
    } else if (S_ISREG(st.st_mode) && endsWith(name, ".prom")) {
      out->push_back(path);
    }
  }
  closedir(d);
}

}  // namespace

double wallSeconds() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

std::vector<FileVersion> readPromFolder(const std::string& dir) {
  std::vector<std::string> paths;
  findFiles(dir, 1, &paths);
  std::vector<FileVersion> files;
  for (const std::string& path : paths) {
    // The profiler replaces its file by renaming a new one over it: the time and the text must
    // come from the same file, so both are read through one descriptor.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;  // removed meanwhile: its process ended
    struct stat st;
    std::string text;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      text.resize(size_t(std::min<off_t>(st.st_size, off_t(kMaxFileBytes))));
      size_t got = 0;
      while (got < text.size()) {
        ssize_t n = ::read(fd, text.data() + got, text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += size_t(n);
      }
      text.resize(got);
    }
    ::close(fd);
    if (!S_ISREG(st.st_mode)) continue;
    FileVersion f;
    f.path = path;
    f.mtime = double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) / 1e9;
    f.data = parseExposition(text);
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace autopilot::top

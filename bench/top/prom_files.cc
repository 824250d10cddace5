#include "bench/top/prom_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <fstream>

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
    struct stat st;
    std::ifstream in(path, std::ios::binary);
    if (!in || stat(path.c_str(), &st) != 0) continue;  // removed meanwhile: its process ended
    std::string text(size_t(std::min<off_t>(st.st_size, off_t(kMaxFileBytes))), '\0');
    in.read(text.data(), std::streamsize(text.size()));
    text.resize(size_t(in.gcount()));
    FileVersion f;
    f.path = path;
    f.mtime = double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) / 1e9;
    f.data = parseExposition(text);
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace autopilot::top

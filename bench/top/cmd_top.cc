// `autopilot top`: a live terminal view of running jobs, read from the Prometheus files the
// profiler writes (NCCL_AUTOPILOT_PROM_FILE): a node_exporter textfile folder on this host, or a
// folder of such files gathered from many hosts (one level of sub-folders is read too). Nothing
// is added to the plugins' hot paths: the files are what they already publish.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/cli_args.h"
#include "bench/commands.h"
#include "bench/top/top_model.h"

namespace autopilot::cli {
namespace {

constexpr size_t kMaxFileBytes = 16u << 20;  // far above any real file; bounds a stray one
constexpr size_t kMaxFiles = 4096;

double wallNow() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

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

std::vector<top::FileVersion> readAll(const std::string& dir) {
  std::vector<std::string> paths;
  findFiles(dir, 1, &paths);
  std::vector<top::FileVersion> files;
  for (const std::string& path : paths) {
    struct stat st;
    std::ifstream in(path, std::ios::binary);
    if (!in || stat(path.c_str(), &st) != 0) continue;  // removed meanwhile: its process ended
    std::string text(size_t(std::min<off_t>(st.st_size, off_t(kMaxFileBytes))), '\0');
    in.read(text.data(), std::streamsize(text.size()));
    text.resize(size_t(in.gcount()));
    top::FileVersion f;
    f.path = path;
    f.mtime = double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) / 1e9;
    f.data = top::parseExposition(text);
    files.push_back(std::move(f));
  }
  return files;
}

std::string defaultDir() {
  const char* file = std::getenv("NCCL_AUTOPILOT_PROM_FILE");
  if (file != nullptr && *file != '\0') {
    std::string f = file;
    size_t slash = f.rfind('/');
    return slash == std::string::npos ? "." : slash == 0 ? "/" : f.substr(0, slash);
  }
  return "/var/lib/prometheus/node-exporter";  // Debian's textfile folder
}

int cmdTop(int argc, char** argv) {
  std::string dir = defaultDir();
  double interval = 1.0, staleAfter = 30.0;
  int frames = 0;
  bool json = false;
  Args args("autopilot top",
            "A live view of running jobs from the profiler's Prometheus files "
            "(NCCL_AUTOPILOT_PROM_FILE): per communicator collectives per second, data rate, mean\n"
            "time and busiest algorithm/protocol; per rail state, share, throughput, bandwidth,\n"
            "failovers; the plugins' events and everything the profiler lost. Rates need the\n"
            "files rewritten at least as often as the view refreshes\n"
            "(NCCL_AUTOPILOT_PROM_INTERVAL_MS=1000 or less for a 1 s refresh).");
  args.addText("--dir", dir,
               "folder of .prom files, and of sub-folders of them (one per host); default the "
               "folder of NCCL_AUTOPILOT_PROM_FILE, else /var/lib/prometheus/node-exporter")
      .typeName("DIR")
      .showDefault();
  args.addReal("--interval", interval, Interval::closed(0.1, 60), "seconds between refreshes");
  args.addInt("--frames", frames, 0, 1000000,
              "frames to print, the first after one interval (0: until interrupted)");
  args.addReal("--stale-after", staleAfter, Interval::positive(),
               "seconds after which a file not rewritten is flagged");
  args.addFlag("--json", json, "one JSON object per frame instead of the table");
  if (std::optional<int> rc = args.parse(argc, argv)) return *rc;

  DIR* probe = opendir(dir.c_str());
  if (probe == nullptr) {
    std::fprintf(stderr, "autopilot top: cannot read the folder %s\n", dir.c_str());
    return 1;
  }
  closedir(probe);
  // Clearing the screen only makes sense for a person watching a terminal.
  bool clear = !json && frames != 1 && isatty(STDOUT_FILENO);
  top::TopModel model;
  model.update(readAll(dir));
  for (int n = 0; frames == 0 || n < frames; ++n) {
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    model.update(readAll(dir));
    top::Frame f = model.frame(wallNow(), staleAfter);
    std::string text = json ? top::renderJson(f) + "\n" : top::renderText(f, dir);
    if (clear) text = "\x1b[H\x1b[2J" + text;
    std::fputs(text.c_str(), stdout);
    if (!json && !clear && (frames == 0 || n + 1 < frames)) std::fputs("\n", stdout);
    std::fflush(stdout);
  }
  return 0;
}

CommandRegistrar registerTop("top", cmdTop,
                             "live view of running jobs from the profiler's Prometheus files");

}  // namespace
}  // namespace autopilot::cli

// `autopilot top`: a live terminal view of running jobs, read from the Prometheus files the
// profiler writes (NCCL_AUTOPILOT_PROM_FILE): a node_exporter textfile folder on this host, or a
// folder of such files gathered from many hosts (one level of sub-folders is read too). Nothing
// is added to the plugins' hot paths: the files are what they already publish.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/cli_args.h"
#include "bench/commands.h"
#include "bench/top/prom_files.h"
#include "bench/top/top_model.h"

namespace autopilot::cli {
namespace {

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
            "A live view of running jobs from the profiler's Prometheus files\n"
            "(NCCL_AUTOPILOT_PROM_FILE): per communicator collectives per second, data rate,\n"
            "mean time and busiest algorithm/protocol; per rail state, share, throughput,\n"
            "bandwidth, failovers; the ranks that reach collectives late (stragglers); the\n"
            "plugins' events and everything the profiler lost. Rates need the files rewritten\n"
            "at least as often as the view refreshes\n"
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
  model.update(top::readPromFolder(dir));
  for (int n = 0; frames == 0 || n < frames; ++n) {
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    model.update(top::readPromFolder(dir));
    top::Frame f = model.frame(top::wallSeconds(), staleAfter);
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

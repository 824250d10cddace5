// `autopilot`: the one command-line tool of the suite. The main job (the closed-loop demo) and
// every benchmark are subcommands; each lives in its own file in this folder.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "autopilot_version.h"
#include "bench/commands.h"

#include <algorithm>

namespace autopilot::cli {
namespace {
std::vector<Command>& registry() {
  static std::vector<Command> all;
  return all;
}
}  // namespace

CommandRegistrar::CommandRegistrar(const char* name, CommandFn run, const char* summary) {
  registry().push_back(Command{name, run, summary});
}

std::vector<Command> commands() {
  std::vector<Command> all = registry();
  std::sort(all.begin(), all.end(),
            [](const Command& a, const Command& b) { return std::strcmp(a.name, b.name) < 0; });
  return all;
}

}  // namespace autopilot::cli

namespace {
using autopilot::cli::Command;

// Users put the library's folder on LD_LIBRARY_PATH so that NCCL_*_PLUGIN=autopilot resolves;
// the tool does the same for itself and for the rank processes it launches. The dynamic loader
// reads LD_LIBRARY_PATH only at process start, hence one re-exec. Without it, a bare name would
// depend on the RUNPATH of whichever object calls dlopen (an interposing sanitizer runtime,
// for instance, has none).
void ensureLibraryOnSearchPath(char** argv) {
  if (std::getenv("AUTOPILOT_LIBRARY_PATH_SET") != nullptr) return;
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return;
  exe[n] = '\0';
  std::string dir(exe);
  dir = dir.substr(0, dir.rfind('/'));
  std::string libDir;
  for (const char* rel : {"/../lib", "/../lib64", "/../lib/x86_64-linux-gnu"}) {
    std::string candidate = dir + rel;
    if (access((candidate + "/libnccl-net-autopilot.so").c_str(), R_OK) == 0) {
      libDir = candidate;
      break;
    }
  }
  if (libDir.empty()) return;
  const char* old = std::getenv("LD_LIBRARY_PATH");
  std::string path = libDir + (old && *old ? std::string(":") + old : std::string());
  setenv("LD_LIBRARY_PATH", path.c_str(), 1);
  setenv("AUTOPILOT_LIBRARY_PATH_SET", "1", 1);
  execv(exe, argv);  // on failure carry on: RUNPATH still covers the common case
}

void usage(FILE* out) {
  std::fprintf(out, "usage: autopilot <command> [options]\n\ncommands:\n");
  for (const Command& c : autopilot::cli::commands()) {
    std::fprintf(out, "  %-11s %s\n", c.name, c.summary);
  }
  std::fprintf(out, "\nnccl-autopilot %s\n", AUTOPILOT_VERSION_STRING);
}

}  // namespace

int main(int argc, char** argv) {
  ensureLibraryOnSearchPath(argv);
  if (argc < 2 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::printf("nccl-autopilot %s\n", AUTOPILOT_VERSION_STRING);
    return 0;
  }
  for (const Command& c : autopilot::cli::commands()) {
    if (std::strcmp(argv[1], c.name) == 0) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "autopilot: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}

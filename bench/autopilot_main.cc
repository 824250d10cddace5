// `autopilot`: the one command-line tool of the suite. The main job (the closed-loop demo) and
// every benchmark are subcommands; each lives in its own file in this folder.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autopilot_version.h"
#include "bench/cli_args.h"
#include "bench/commands.h"

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

std::string commandList() {
  std::string out = "commands:\n";
  char line[256];
  for (const Command& c : autopilot::cli::commands()) {
    std::snprintf(line, sizeof(line), "  %-11s %s\n", c.name, c.summary);
    out += line;
  }
  return out + "\n'autopilot COMMAND --help' describes a command's options.\nnccl-autopilot " +
         AUTOPILOT_VERSION_STRING;
}

}  // namespace

int main(int argc, char** argv) {
  ensureLibraryOnSearchPath(argv);
  autopilot::cli::Args args("autopilot", "");
  // Everything from the command's name on is the command's own to parse.
  args.topLevel("autopilot [--help | --version] COMMAND [OPTIONS]");
  args.footer(commandList());
  bool version = false;
  args.addFlag("--version", version, "print the version and exit");
  if (argc < 2) {
    std::fputs(args.help().c_str(), stderr);
    return autopilot::cli::kUsageError;
  }
  if (std::optional<int> rc = args.parse(argc, argv)) return *rc;
  if (version) {
    std::printf("nccl-autopilot %s\n", AUTOPILOT_VERSION_STRING);
    return 0;
  }
  std::vector<std::string> rest = args.remaining();
  if (rest.empty()) {
    std::fputs(args.help().c_str(), stderr);
    return autopilot::cli::kUsageError;
  }
  // remaining() holds the command and its arguments; argv holds the same strings in the same
  // order at its tail, so the command gets argv's own pointers.
  char** commandArgv = argv + (argc - int(rest.size()));
  for (const Command& c : autopilot::cli::commands()) {
    if (rest[0] == c.name) return c.run(int(rest.size()), commandArgv);
  }
  std::fprintf(stderr, "autopilot: unknown %s '%s' (see --help)\n",
               rest[0].rfind('-', 0) == 0 ? "option" : "command", rest[0].c_str());
  return autopilot::cli::kUsageError;
}

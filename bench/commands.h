// Subcommands of the `autopilot` tool. Each lives in its own file in bench/ (or a subfolder)
// and registers itself with a namespace-scope CommandRegistrar:
//
//   static autopilot::cli::CommandRegistrar reg("netbench", cmdNetbench, "one-line summary");
//
// The tool's sources are compiled into the executable directly (not through an archive), so
// every registrar runs before main(). A command gets argv starting at its own name and returns
// the process exit code.
#pragma once

#include <vector>

namespace autopilot::cli {

using CommandFn = int (*)(int argc, char** argv);

struct Command {
  const char* name;
  CommandFn run;
  const char* summary;
};

// Commands in name order.
std::vector<Command> commands();

struct CommandRegistrar {
  CommandRegistrar(const char* name, CommandFn run, const char* summary);
};

}  // namespace autopilot::cli

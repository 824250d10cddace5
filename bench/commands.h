// Subcommands of the `autopilot` tool. Each returns the process exit code.
#pragma once

namespace autopilot::cli {

int cmdInfo(int argc, char** argv);
int cmdParams(int argc, char** argv);

}  // namespace autopilot::cli

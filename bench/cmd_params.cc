// `autopilot params [--markdown]`: the parameter registry, as the library declares it.
#include <cstdio>
#include <optional>

#include "bench/cli_args.h"
#include "bench/commands.h"
#include "common/params.h"

namespace autopilot::cli {

namespace {

int cmdParams(int argc, char** argv) {
  bool markdown = false;
  cli::Args args(
      "autopilot params",
      "Every NCCL_AUTOPILOT_* parameter the library declares: type, value, where the value\n"
      "came from (default or environment), and its documentation.");
  args.addFlag("--markdown", markdown, "README's parameter table instead");
  if (std::optional<int> rc = args.parse(argc, argv)) return *rc;
  if (markdown) {
    std::fputs(params::markdownTable().c_str(), stdout);
    return 0;
  }
  for (params::ParamBase* p : params::all()) {
    std::string value = p->valueString();
    std::printf("%-40s %-8s = %-12s (%s)\n    %s\n", p->name(), p->typeName(), value.c_str(),
                params::sourceName(p->source()), p->doc());
    if (p->source() == params::Source::kInvalid) {
      std::printf("    rejected: %s\n", p->rejection().c_str());
    }
  }
  return 0;
}

}  // namespace

CommandRegistrar registerParams(
    "params", cmdParams, "list every NCCL_AUTOPILOT_* parameter (--markdown for the README table)");

}  // namespace autopilot::cli

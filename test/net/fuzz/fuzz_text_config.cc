// libFuzzer target: the text the plugin reads from users while running: the simulated-fault
// plan (re-read from a file any process can write) and the rail lists and groups of
// NCCL_AUTOPILOT_IFNAME / NCCL_AUTOPILOT_NET_GROUPS. Bounded, and never a crash.
#include <string>
#include <vector>

#include "net_plugin/core/fault_plan.h"
#include "net_plugin/core/rail_selection.h"

using namespace autopilot::net::core;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  FaultPlan plan = parseFaultPlan(text, size);
  if (plan.rules.size() > kMaxFaultLines) __builtin_trap();
  for (const FaultRule& r : plan.rules) {
    if (r.rateMbps < 0 || r.line < 1 || (r.index < -1)) __builtin_trap();
  }
  std::string s(text, size);
  InterfaceFilter f;
  std::string error;
  if (parseInterfaceFilter(s, &f, &error)) interfaceMatches(f, "eth0");
  GroupSpec spec;
  std::vector<std::vector<int>> devices;
  std::vector<std::string> unused;
  if (parseGroupSpec(s, &spec, &error)) {
    std::vector<std::string> rails = {"a0", "a1", "a2", "lo/127.0.0.1"};
    if (resolveGroups(spec, rails, &devices, &unused, &error)) {
      std::vector<int> seen(rails.size(), 0);
      for (const auto& d : devices) {
        for (int r : d) {
          if (r < 0 || r >= int(rails.size()) || ++seen[size_t(r)] > 1) __builtin_trap();
        }
      }
    }
  }
  splitList(s);
  return 0;
}

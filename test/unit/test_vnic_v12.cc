// NCCL 2.30's virtual NICs (net v12) merge up to 8 devices; older vProps carry 4, and a device's
// railId is its place in our rail grouping.
#include <catch2/catch.hpp>

#include "net_plugin/core/device_table.h"
#include "net_plugin/core/transport_glue.h"

using namespace autopilot;
using namespace autopilot::net;

TEST_CASE("a virtual device merges up to 8 physical devices", "[net][v12]") {
  core::DeviceTable table;
  std::vector<core::RailDescriptor> rails;
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < 9; ++r) {
    rails.push_back({"eth" + std::to_string(r), 10000, ""});
    groups.push_back({r});
  }
  table.build(rails, groups, 10000);
  REQUIRE(table.physicalCount() == 9);

  int eight[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  std::string error;
  int v = table.makeVirtual(eight, 8, &error);
  INFO(error);
  REQUIRE(v == 9);
  DeviceProperties props;
  core::describeDeviceLayout(*table.device(v), v, &props);
  CHECK(props.vProps.ndevs == 8);
  CHECK(props.vProps.devs[7] == 7);
  CHECK(props.railId == abi::kNetIdUndef);  // spans several rails
  CHECK(props.planeId == abi::kNetIdUndef);

  int nine[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  CHECK(table.makeVirtual(nine, 9, &error) == -1);
  CHECK(error.find("1 to 8 devices") != std::string::npos);

  core::describeDeviceLayout(*table.device(3), 3, &props);
  CHECK(props.vProps.ndevs == 1);
  CHECK(props.railId == 3);
}

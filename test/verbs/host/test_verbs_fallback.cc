// The transport choice through the real .so on a machine without RDMA devices (this one, and CI):
// 'auto' falls back to TCP, 'ib' reports no devices (so NCCL uses its own transports) and says
// why, 'tcp' never touches libibverbs' devices. Each case runs in a fresh process, since
// parameters are frozen per load of the library.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "bench/net/endpoint.h"
#include "bench/net/peer.h"
#include "common/host/log_capture.h"

using namespace autopilot;
using namespace autopilot::bench;

namespace {

bool rdmaPresent() {
  struct stat st;
  return stat("/sys/class/infiniband", &st) == 0;
}

// Devices the plugin reports with NCCL_AUTOPILOT_TRANSPORT=`transport`, and whether the log
// named the transport it chose (`expect`); -1 when the child failed.
int devicesWith(const char* transport, const char* expectLog) {
  pid_t pid = spawn([&]() -> int {
    setenv("NCCL_AUTOPILOT_TRANSPORT", transport, 1);
    setenv("NCCL_AUTOPILOT_NET_ADDRS", "127.0.0.1,127.0.0.2", 1);
    NetEndpoint ep;  // ok() only with devices
    if (host::LogCapture::count(-1, expectLog) == 0) return 100;
    return ep.devices();
  });
  return waitChild(pid, 30000);
}

}  // namespace

TEST_CASE("verbs: without RDMA devices, auto falls back to TCP and ib reports no device",
          "[verbs][host]") {
  if (rdmaPresent()) {
    WARN("skipped: this machine has RDMA devices");
    return;
  }
  // auto: the TCP transport's one device of two loopback rails.
  CHECK(devicesWith("auto", "net transport: TCP") == 1);
  CHECK(devicesWith("tcp", "net transport: TCP") == 1);
  // ib: none, and the reason is logged (no device or no libibverbs).
  CHECK(devicesWith("ib", "ibverbs transport: ") == 0);
  CHECK(devicesWith("ib", "net transport: RDMA (ibverbs)") == 0);
}

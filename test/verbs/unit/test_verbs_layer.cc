// The dlopen'ed verbs layer without hardware: a missing library is reported, not fatal; the RAII
// owners release each object once, in reverse declaration order; where this machine has no
// RDMA device, discovery reports no rails.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "net_plugin/transport/ibverbs/discovery.h"
#include "net_plugin/transport/ibverbs/verbs_objects.h"

using namespace autopilot::net::ib;

namespace {

std::vector<std::string> gReleased;
int gFailWith = 0;

int closeDevice(ibv_context*) {
  gReleased.push_back("context");
  return gFailWith;
}
int deallocPd(ibv_pd*) {
  gReleased.push_back("pd");
  return gFailWith;
}
int destroyCq(ibv_cq*) {
  gReleased.push_back("cq");
  return gFailWith;
}
int destroyQp(ibv_qp*) {
  gReleased.push_back("qp");
  return gFailWith;
}
int deregMr(ibv_mr*) {
  gReleased.push_back("mr");
  return gFailWith;
}

VerbsLibrary fakeLibrary() {
  VerbsLibrary lib;
  lib.closeDevice = closeDevice;
  lib.deallocPd = deallocPd;
  lib.destroyCq = destroyCq;
  lib.destroyQp = destroyQp;
  lib.deregMr = deregMr;
  return lib;
}

template <typename T>
T* fake(uintptr_t v) {
  return reinterpret_cast<T*>(v);
}

}  // namespace

TEST_CASE("verbs: a missing libibverbs is reported with a reason, not fatal", "[verbs][unit]") {
  std::string why;
  VerbsLibrary lib;
  CHECK_FALSE(VerbsLibrary::open("libibverbs-that-does-not-exist.so.1", &lib, &why));
  CHECK(lib.getDeviceList == nullptr);
  CHECK(why.find("libibverbs-that-does-not-exist.so.1") != std::string::npos);
}

TEST_CASE("verbs: owners release once, in reverse order of declaration", "[verbs][unit]") {
  VerbsLibrary lib = fakeLibrary();
  gReleased.clear();
  gFailWith = 0;
  uint64_t failedBefore = failedReleases();
  {
    struct Endpoint {
      DeviceContext context;
      ProtectionDomain pd;
      MemoryRegion mr;
      CompletionQueue cq;
      QueuePair qp;
    } e{DeviceContext(&lib, fake<ibv_context>(1)), ProtectionDomain(&lib, fake<ibv_pd>(2)),
        MemoryRegion(&lib, fake<ibv_mr>(3)), CompletionQueue(&lib, fake<ibv_cq>(4)),
        QueuePair(&lib, fake<ibv_qp>(5))};
    QueuePair moved = std::move(e.qp);  // the moved-from owner must not release again
    CHECK_FALSE(e.qp);
    CHECK(moved.get() == fake<ibv_qp>(5));
    moved.reset();
    CHECK(gReleased == std::vector<std::string>{"qp"});
  }
  CHECK(gReleased == std::vector<std::string>{"qp", "cq", "mr", "pd", "context"});
  CHECK(failedReleases() == failedBefore);

  gFailWith = -1;  // e.g. EBUSY: counted, never thrown or retried
  { CompletionQueue cq(&lib, fake<ibv_cq>(6)); }
  CHECK(failedReleases() == failedBefore + 1);
  gFailWith = 0;
}

TEST_CASE("verbs: discovery on a host without RDMA devices finds no rails", "[verbs][unit]") {
  struct stat st;
  if (stat("/sys/class/infiniband", &st) == 0) {
    WARN("skipped: this machine has /sys/class/infiniband (RDMA devices may exist)");
    return;
  }
  IbRails& rails = IbRails::instance();
  rails.ensureDiscovered();
  CHECK(rails.rails().empty());
  CHECK(rails.devices().count() == 0);
}

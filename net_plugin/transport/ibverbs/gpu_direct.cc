#include "net_plugin/transport/ibverbs/gpu_direct.h"

#include <dlfcn.h>

#include <cerrno>
#include <mutex>

#include "common/log.h"
#include "net_plugin/transport/ibverbs/discovery.h"
#include "net_plugin/transport/ibverbs/ib_config.h"

namespace autopilot::net::ib {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet | abi::subsys::kInit;
constexpr int kCuDeviceAttributeDmaBufSupported = 124;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED

bool providersAcceptDmaBuf(std::string* why) {
  IbRails& ib = IbRails::instance();
  const VerbsLibrary* lib = ib.lib();
  if (lib == nullptr || lib->regDmabufMr == nullptr) {
    *why = "libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)";
    return false;
  }
  if (ib.rails().empty()) {
    *why = "no RDMA device";
    return false;
  }
  for (const IbRail& rail : ib.rails()) {
    IbDevice& dev = ib.device(rail.device);
    errno = 0;
    ibv_mr* mr = lib->regDmabufMr(dev.pd.get(), 0, 0, 0, -1, 0);
    if (mr != nullptr) {
      lib->deregMr(mr);  // cannot happen with fd -1; released all the same
      continue;
    }
    if (errno == EOPNOTSUPP || errno == EPROTONOSUPPORT) {
      *why = dev.name + " does not support dma-buf memory registrations";
      return false;
    }
  }
  return true;
}

bool cudaSupportsDmaBuf(std::string* why) {
  // The handle stays open: the CUDA driver must not be unloaded under NCCL.
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == nullptr) {
    *why = "the CUDA driver (libcuda.so.1) cannot be loaded";
    return false;
  }
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using AttrFn = int (*)(int*, int, int);
  auto init = reinterpret_cast<InitFn>(dlsym(cuda, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(cuda, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(cuda, "cuDeviceGet"));
  auto attr = reinterpret_cast<AttrFn>(dlsym(cuda, "cuDeviceGetAttribute"));
  int n = 0, device = 0, supported = 0;
  if (init == nullptr || count == nullptr || get == nullptr || attr == nullptr || init(0) != 0 ||
      count(&n) != 0 || n < 1 || get(&device, 0) != 0) {
    *why = "the CUDA driver finds no usable GPU";
    return false;
  }
  if (attr(&supported, kCuDeviceAttributeDmaBufSupported, device) != 0 || supported != 1) {
    *why = "GPU 0 does not support dma-buf";
    return false;
  }
  return true;
}

}  // namespace

bool gpuDirectUsable(std::string* why) {
  static std::once_flag once;
  static bool usable = false;
  static std::string reason;
  std::call_once(once, [] {
    if (!ibConfig().gpuDirect) {
      reason = "off (NCCL_AUTOPILOT_IB_GPU_DIRECT=0)";
    } else if (providersAcceptDmaBuf(&reason) && cudaSupportsDmaBuf(&reason)) {
      usable = true;
      reason = "dma-buf registrations and the CUDA driver are available";
    }
    AP_INFO(kFlags, "ibverbs transport: GPU memory %s: %s", usable ? "offered" : "not offered",
            reason.c_str());
  });
  if (why) *why = reason;
  return usable;
}

}  // namespace autopilot::net::ib

#include "net_plugin/transport/ibverbs/memory.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "net_plugin/transport/ibverbs/discovery.h"

namespace autopilot::net::ib {

std::unique_ptr<MemoryHandle> registerMemory(const core::CommBase* owner, const int* rails,
                                             int railCount, void* data, size_t size, int type,
                                             int dmabufFd, uint64_t offset, int access,
                                             std::string* error) {
  IbRails& ib = IbRails::instance();
  const VerbsLibrary* lib = ib.lib();
  if (lib == nullptr || railCount < 1 || railCount > wire::kMaxRails) {
    *error = "no RDMA rail to register on";
    return nullptr;
  }
  if (size == 0) {
    *error = "a registration of 0 bytes";
    return nullptr;
  }
  if (dmabufFd >= 0 && lib->regDmabufMr == nullptr) {
    *error = "this libibverbs has no ibv_reg_dmabuf_mr";
    return nullptr;
  }
  auto mh = std::make_unique<MemoryHandle>();
  mh->owner = owner;
  mh->base = reinterpret_cast<uintptr_t>(data);
  mh->size = size;
  mh->type = type;
  mh->rails = railCount;
  int deviceOf[wire::kMaxRails];
  for (int r = 0; r < railCount; ++r) {
    int device = ib.rails()[size_t(rails[r])].device;
    deviceOf[r] = device;
    int same = -1;
    for (int q = 0; q < r; ++q) {
      if (deviceOf[q] == device) same = q;
    }
    if (same >= 0) {  // rails on one device share its protection domain and registration
      mh->lkey[r] = mh->lkey[same];
      mh->rkey[r] = mh->rkey[same];
      continue;
    }
    ibv_pd* pd = ib.device(device).pd.get();
    ibv_mr* mr = dmabufFd >= 0
                     ? lib->regDmabufMr(pd, offset, size, reinterpret_cast<uintptr_t>(data),
                                        dmabufFd, access)
                     : lib->regMr(pd, data, size, access);
    if (mr == nullptr) {
      int err = errno;
      *error = std::string(dmabufFd >= 0 ? "ibv_reg_dmabuf_mr" : "ibv_reg_mr") + " on " +
               ib.device(device).name + " failed: " + std::strerror(err) +
               (err == ENOMEM ? " (locked-memory limit? see ulimit -l)" : "");
      return nullptr;  // the regions made so far are released by the handle
    }
    mh->regions[r] = MemoryRegion(lib, mr);
    mh->lkey[r] = mr->lkey;
    mh->rkey[r] = mr->rkey;
  }
  return mh;
}

const MemoryHandle* memoryOf(const core::CommBase* owner, const void* mhandle) {
  auto* mh = static_cast<const MemoryHandle*>(mhandle);
  if (mh == nullptr || mh->magic != MemoryHandle::kMagic || mh->owner != owner) return nullptr;
  return mh;
}

void RegisteredArea::Free::operator()(uint8_t* p) const { std::free(p); }

bool RegisteredArea::create(const core::CommBase* owner, const int* rails, int railCount,
                            size_t bytes, std::string* error) {
  constexpr size_t kPage = 4096;
  size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  void* p = nullptr;
  if (posix_memalign(&p, kPage, rounded) != 0) {
    *error = "out of memory for a " + std::to_string(rounded) + "-byte registered area";
    return false;
  }
  std::memset(p, 0, rounded);
  bytes_.reset(static_cast<uint8_t*>(p));
  size_ = rounded;
  // The peer writes into it (the FIFO, the probe target); the flush reads land in it.
  memory_ = registerMemory(owner, rails, railCount, p, rounded, abi::kPtrHost, -1, 0,
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, error);
  return memory_ != nullptr;
}

}  // namespace autopilot::net::ib

// Memory registrations of the verbs transport. A registration on a comm covers every rail of
// that comm: the buffer is registered once on each distinct device's protection domain (rails
// on one device share it), giving an lkey and an rkey per rail. NCCL hands the handle back to
// isend/irecv/iflush/deregMr as an opaque pointer; memoryOf() checks that it is one of ours,
// registered on that comm, before anything reads it.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/abi/net_abi.h"
#include "net_plugin/core/opaque_handles.h"
#include "net_plugin/transport/ibverbs/verbs_objects.h"
#include "net_plugin/transport/ibverbs/wire.h"

namespace autopilot::net::ib {

struct MemoryHandle {
  static constexpr uint32_t kMagic = 0x524d4941;  // "AIMR"

  MemoryHandle() = default;
  MemoryHandle(const MemoryHandle&) = delete;
  MemoryHandle& operator=(const MemoryHandle&) = delete;
  ~MemoryHandle() { magic = 0; }

  bool covers(const void* p, uint64_t n) const {
    auto a = reinterpret_cast<uintptr_t>(p);
    return a >= base && n <= size && a - base <= size - n;
  }

  uint32_t magic = kMagic;
  const core::CommBase* owner = nullptr;  // the comm it was registered on
  uintptr_t base = 0;
  size_t size = 0;
  int type = abi::kPtrHost;
  int rails = 0;
  uint32_t lkey[wire::kMaxRails] = {};
  uint32_t rkey[wire::kMaxRails] = {};
  MemoryRegion regions[wire::kMaxRails];  // one per distinct device; the others empty
};

// Registers [data, data + size) with `access` (IBV_ACCESS_* flags: only what its use needs, see
// accessFor) on the devices of `rails` (global rail indices, in the comm's rail order).
// dmabufFd >= 0 registers a dma-buf (GPU memory) at `offset` in it instead of virtual memory.
// NULL with the reason in *error.
// `owner` is typed as the comm's base so that a derived comm converts to the address NCCL
// holds (a comm class with virtual functions has its CommBase at an offset).
std::unique_ptr<MemoryHandle> registerMemory(const core::CommBase* owner, const int* rails,
                                             int railCount, void* data, size_t size, int type,
                                             int dmabufFd, uint64_t offset, int access,
                                             std::string* error);

// What NCCL's buffers registered on a comm must grant. A send buffer is only the local source
// of the comm's writes. A receive buffer is written by the peer's writes and read by the flush
// (iflush: an RDMA READ through a loopback queue pair).
inline int accessFor(bool receiving) {
  return receiving ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0;
}

// The handle NCCL passed, when it is a live registration made on `owner`; NULL otherwise.
const MemoryHandle* memoryOf(const core::CommBase* owner, const void* mhandle);

// A zeroed, page-aligned host area of a comm, registered on its rails: the sender's
// clear-to-send FIFO, the receiver's staging of the entries it writes there, probe targets.
class RegisteredArea {
 public:
  bool create(const core::CommBase* owner, const int* rails, int railCount, size_t bytes,
              std::string* error);
  uint8_t* data() const { return bytes_.get(); }
  size_t size() const { return size_; }
  uint64_t address(size_t offset) const { return reinterpret_cast<uintptr_t>(data() + offset); }
  const MemoryHandle& memory() const { return *memory_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> bytes_;  // declared first: freed after the deregistration
  size_t size_ = 0;
  std::unique_ptr<MemoryHandle> memory_;
};

}  // namespace autopilot::net::ib

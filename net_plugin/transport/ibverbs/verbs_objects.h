// RAII owners of verbs objects: a device context, a protection domain, a completion queue, a
// queue pair, a memory region. Each releases its object through the library that created it
// (VerbsLibrary's destroy functions), exactly once, and is move-only.
//
// Release order matters to the verbs API (a PD cannot be deallocated while a QP or MR uses it,
// a CQ not while a QP reports to it, a context not while anything of it lives): owners are
// declared in creation order in their enclosing structures — context, PD, MR / CQ, QP — so
// that C++ destroys them in the reverse, correct order. A failing release (EBUSY when that
// order was broken somewhere) cannot be recovered from in a destructor; it is counted, and
// tests check the count stays zero.
#pragma once

#include <atomic>
#include <cstdint>

#include "net_plugin/transport/ibverbs/verbs_library.h"

namespace autopilot::net::ib {

// Releases that returned an error, process-wide (see above).
uint64_t failedReleases();
void countFailedRelease();

template <typename T, auto Destroy>
class VerbsOwner {
 public:
  VerbsOwner() = default;
  VerbsOwner(const VerbsLibrary* lib, T* object) : lib_(lib), object_(object) {}
  VerbsOwner(VerbsOwner&& o) noexcept : lib_(o.lib_), object_(o.object_) { o.object_ = nullptr; }
  VerbsOwner& operator=(VerbsOwner&& o) noexcept {
    if (this != &o) {
      reset();
      lib_ = o.lib_;
      object_ = o.object_;
      o.object_ = nullptr;
    }
    return *this;
  }
  VerbsOwner(const VerbsOwner&) = delete;
  VerbsOwner& operator=(const VerbsOwner&) = delete;
  ~VerbsOwner() { reset(); }

  T* get() const { return object_; }
  T* operator->() const { return object_; }
  explicit operator bool() const { return object_ != nullptr; }
  void reset() {
    if (object_ != nullptr) {
      if ((lib_->*Destroy)(object_) != 0) countFailedRelease();
      object_ = nullptr;
    }
  }

 private:
  const VerbsLibrary* lib_ = nullptr;
  T* object_ = nullptr;
};

using DeviceContext = VerbsOwner<ibv_context, &VerbsLibrary::closeDevice>;
using ProtectionDomain = VerbsOwner<ibv_pd, &VerbsLibrary::deallocPd>;
using CompletionQueue = VerbsOwner<ibv_cq, &VerbsLibrary::destroyCq>;
using QueuePair = VerbsOwner<ibv_qp, &VerbsLibrary::destroyQp>;
using MemoryRegion = VerbsOwner<ibv_mr, &VerbsLibrary::deregMr>;

}  // namespace autopilot::net::ib

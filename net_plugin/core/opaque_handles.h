// Objects the net plugin hands to NCCL as opaque pointers, for every transport. Comms derive
// from CommBase and requests from RequestHeader, and NCCL gets the base-class pointer:
// converting back is a static_cast after the magic was checked, so a pointer of the wrong kind
// (a receive comm given to isend, a stale request) is recognised instead of misused.
#pragma once

#include <cstdint>

#include "common/abi/net_abi.h"
#include "common/log.h"

namespace autopilot::net::core {

struct CommBase {
  explicit CommBase(uint32_t m) : magic(m) {}
  ~CommBase() { magic = 0; }
  uint32_t magic;
};

inline constexpr uint32_t kRequestMagic = 0x51504e41;  // "ANPQ"
enum class RequestKind : uint8_t { kSend = 1, kRecv = 2, kFlush = 3 };

struct RequestHeader {
  uint32_t magic = kRequestMagic;
  RequestKind kind = RequestKind::kSend;
  CommBase* owner = nullptr;  // the comm
};

// A flush with nothing to wait for: complete at once (one shared object per transport).
struct FlushRequest : RequestHeader {
  FlushRequest() { kind = RequestKind::kFlush; }
};

// The request behind NCCL's pointer to test(), or NULL (logged once) for NULL or a pointer that
// is not one of ours; *done is cleared either way. Shared by every transport, so that all of
// them refuse the same pointers.
inline RequestHeader* requestOf(void* p, int* done) {
  *done = 0;
  auto* h = static_cast<RequestHeader*>(p);
  if (h == nullptr || h->magic != kRequestMagic) {
    AP_WARN_ONCE(abi::subsys::kNet, "test: %p is not a request of this plugin", p);
    return nullptr;
  }
  return h;
}

// The comm of type T (with T::kMagic and T::kKind, "send" / "receive" / "listen") behind NCCL's
// pointer `p`, or NULL, logged with `what` the caller was doing.
template <typename T>
T* commOf(void* p, const char* what) {
  auto* base = static_cast<CommBase*>(p);
  if (base == nullptr || base->magic != T::kMagic) {
    AP_WARN(abi::subsys::kNet, "%s: not a %s comm of this plugin (%p)", what, T::kKind, p);
    return nullptr;
  }
  return static_cast<T*>(base);
}

// closeSend / closeRecv / closeListen: NULL is fine (nothing was created); anything else must be
// a T, which is destroyed.
template <typename T>
abi::Result closeComm(void* p, const char* what) {
  if (p == nullptr) return abi::kSuccess;
  T* c = commOf<T>(p, what);
  if (c == nullptr) return abi::kInvalidArgument;
  delete c;
  return abi::kSuccess;
}

}  // namespace autopilot::net::core

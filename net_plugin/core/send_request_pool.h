// SendRequestPool: a send comm's requests, shared by every transport. A fixed array (sized at
// construction: NCCL_NET_MAX_REQUESTS x maxRecvs), a free list, and the FIFO of requests posted
// but not yet matched to the receiver's announced buffers, in posting order (sends match
// receives in order). Nothing allocates after construction; an empty pool makes isend return a
// NULL request, which NCCL retries.
#pragma once

#include <cstdint>
#include <memory>

#include "net_plugin/core/opaque_handles.h"

namespace autopilot::net::core {

// Request: a RequestHeader with a `uint32_t index` (its slot, also its SendTracker message id).
template <typename Request>
class SendRequestPool {
 public:
  SendRequestPool(uint32_t size, CommBase* owner)
      : size_(size),
        pool_(new Request[size]),
        free_(new uint32_t[size]),
        waiting_(new uint32_t[size]) {
    for (uint32_t i = 0; i < size_; ++i) {
      pool_[i].owner = owner;
      pool_[i].kind = RequestKind::kSend;
      pool_[i].index = i;
      free_[i] = size_ - 1 - i;
    }
    freeCount_ = size_;
  }

  uint32_t size() const { return size_; }
  Request& operator[](uint32_t i) { return pool_[i]; }
  const Request& operator[](uint32_t i) const { return pool_[i]; }
  // Requests handed out and not yet released.
  bool anyInUse() const { return freeCount_ < size_; }

  // A free request; NULL when none is free.
  Request* take() {
    if (freeCount_ == 0) return nullptr;
    return &pool_[free_[--freeCount_]];
  }
  // A free request, appended to the waiting FIFO; NULL when none is free.
  Request* post() {
    Request* q = take();
    if (q == nullptr) return nullptr;
    waiting_[(waitingHead_ + waitingSize_) % size_] = q->index;
    waitingSize_++;
    return q;
  }
  void release(Request* q) { free_[freeCount_++] = q->index; }
  // Takes back the request posted last, still waiting: it was never handed out.
  void withdrawLast(Request* q) {
    waitingSize_--;
    release(q);
  }

  bool anyWaiting() const { return waitingSize_ > 0; }
  Request* firstWaiting() { return &pool_[waiting_[waitingHead_]]; }
  void popWaiting() {
    waitingHead_ = (waitingHead_ + 1) % size_;
    waitingSize_--;
  }

 private:
  uint32_t size_;
  std::unique_ptr<Request[]> pool_;
  std::unique_ptr<uint32_t[]> free_;
  uint32_t freeCount_ = 0;
  std::unique_ptr<uint32_t[]> waiting_;
  uint32_t waitingHead_ = 0, waitingSize_ = 0;
};

}  // namespace autopilot::net::core

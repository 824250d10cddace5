// The objects behind the event handles the profiler returns to NCCL, and the fixed pools they
// come from.
//
// Every record starts with a RecordKind byte, so stopEvent/recordEventState (which receive only
// the handle) can tell what they were given. Records live in per-communicator pools allocated
// at init and never freed while the library is loaded (see context.h), so a handle NCCL hands
// back late (after completion, after finalize) always points to valid memory; at worst to a
// recycled record, which the pools make unlikely by handing slots out in ring order.
//
// Lifetime of a collective (../shared/docs/nccl-plugin-abi.md §3.6): NCCL stops the Coll event
// as soon as it is enqueued and starts its children (KernelCh, ProxyOp) later on the proxy
// thread, so a CollRecord is reference-counted: one reference for NCCL's Coll handle, one for
// the group of its nChannels expected KernelCh events (taken in advance because they may all
// start after the Coll stop), one per live ProxyOp and per kernel channel beyond nChannels.
// The holder of the last reference completes the collective: it computes the durations,
// publishes the sample and frees the slot.
//
// The kernel-channel group is counted down without atomic read-modify-writes: NCCL emits every
// KernelCh event of a collective from one thread (the communicator's proxy progress thread,
// §3.8), so those fields have a single writer; only the group's last stop touches `refs`. This
// keeps 32 locked instructions per 16-channel collective off NCCL's proxy thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace autopilot::profiler {

struct ProfilerContext;
struct CollRecord;

enum class RecordKind : uint8_t { kColl = 0xC1, kKernelCh = 0xC2, kProxyOp = 0xC3, kNet = 0xC4 };

// NCCL's MAXCHANNELS; channel ids are masked with it, so a bad id cannot index out of range.
inline constexpr int kMaxChannels = 64;

struct ChannelRecord {
  RecordKind kind = RecordKind::kKernelCh;
  uint8_t channelId = 0;
  uint8_t extra = 0;  // beyond nChannels: holds its own reference instead of the group's
  CollRecord* owner = nullptr;
  // GPU %globaltimer values (ns) from the descriptor and from the KernelChStop state.
  uint64_t gpuStartNs = 0;
  uint64_t gpuStopNs = 0;
};

struct CollRecord {
  RecordKind kind = RecordKind::kColl;
  std::atomic<uint8_t> inUse{0};
  std::atomic<uint8_t> collStopped{0};
  std::atomic<int32_t> refs{0};
  // Written only by the proxy thread (see above); atomics so that a racing late event or the
  // service thread's reclaim stays defined behaviour. Bit c: channel c's KernelCh started.
  std::atomic<uint64_t> startedChannels{0};
  std::atomic<uint32_t> channelStarts{0};  // KernelCh events started
  std::atomic<uint32_t> channelsLeft{0};   // of the nChannels group, not yet stopped
  ProfilerContext* ctx = nullptr;
  // Copied from the descriptor at start (it lives on NCCL's stack).
  uint64_t seqNumber = 0;
  uint64_t count = 0;
  uint64_t nBytes = 0;
  std::atomic<uint64_t> hostStartNs{0};  // atomic: the service thread reads it to find stale ones
  int8_t func = -1, algo = -1, proto = -1, datatype = -1;
  uint8_t nChannels = 0;      // KernelCh events whose references were taken at start
  uint8_t nChannelsDescr = 0;
  ChannelRecord channels[kMaxChannels];
};

struct ProxyOpRecord {
  RecordKind kind = RecordKind::kProxyOp;
  std::atomic<uint8_t> inUse{0};
  CollRecord* owner = nullptr;  // NULL for ops of other processes (PXN) or untracked parents
  ProfilerContext* ctx = nullptr;
  uint64_t hostStartNs = 0;
  uint64_t seqNumber = 0;
  int32_t peer = -1;
  int32_t nSteps = 0;
  int32_t chunkSize = 0;
  uint8_t channelId = 0;
  uint8_t isSend = 0;
};

// One transfer reported by NCCL's own IB or socket net plugin (NetPlugin events, §3.10).
struct NetRecord {
  RecordKind kind = RecordKind::kNet;
  std::atomic<uint8_t> inUse{0};
  uint8_t isSend = 0;
  int32_t rail = -1;
  uint64_t length = 0;
  uint64_t hostStartNs = 0;
};

// Fixed-capacity pool. acquire() probes a few slots after a shared ring cursor and claims a
// free one with one CAS; when none is free it returns NULL (the caller drops the event and
// counts it). Ring order means a released slot is reused only after every other slot was
// handed out once, which keeps late handles of a completed event pointing at that event.
template <typename T>
class FixedPool {
 public:
  static size_t roundUp(size_t capacity) {
    size_t cap = 2;
    while (cap < capacity) cap <<= 1;
    return cap;
  }
  explicit FixedPool(size_t capacity) {
    size_t cap = roundUp(capacity);
    mask_ = cap - 1;
    items_.reset(new T[cap]);
  }
  FixedPool(const FixedPool&) = delete;
  FixedPool& operator=(const FixedPool&) = delete;

  T* acquire() noexcept {
    for (int probe = 0; probe < kProbes; ++probe) {
      T& item = items_[cursor_.fetch_add(1, std::memory_order_relaxed) & mask_];
      uint8_t expected = 0;
      if (item.inUse.load(std::memory_order_relaxed) == 0 &&
          item.inUse.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
        return &item;
      }
    }
    return nullptr;
  }
  void release(T* item) noexcept { item->inUse.store(0, std::memory_order_release); }

  size_t capacity() const { return mask_ + 1; }
  T& at(size_t i) { return items_[i]; }
  size_t inUse() const {
    size_t n = 0;
    for (size_t i = 0; i <= mask_; ++i) n += items_[i].inUse.load(std::memory_order_relaxed);
    return n;
  }

 private:
  static constexpr int kProbes = 8;
  std::unique_ptr<T[]> items_;
  size_t mask_ = 0;
  alignas(64) std::atomic<size_t> cursor_{0};
};

}  // namespace autopilot::profiler

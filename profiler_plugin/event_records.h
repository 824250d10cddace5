// The objects behind the event handles the profiler returns to NCCL, and the fixed pools they
// come from.
//
// Every record starts with a RecordKind byte, so stopEvent/recordEventState (which receive only
// the handle) can tell what they were given. Records live in per-communicator pools allocated
// at init and never freed while the library is loaded (see context.h), so a handle NCCL hands
// back late (after completion, after finalize) always points to valid memory; at worst to a
// recycled record, which the pools make unlikely by handing slots out in ring order.
//
// Lifetime of a collective (docs/nccl-plugin-abi.md §3.6): NCCL stops the Coll event
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

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace autopilot::profiler {

struct ProfilerContext;
struct CollRecord;

enum class RecordKind : uint8_t {
  kColl = 0xC1,
  kKernelCh = 0xC2,
  kProxyOp = 0xC3,
  kNet = 0xC4,
  kKernelPhase = 0xC5,
  kCe = 0xC6,
};

// Kernel phases of a channel (profiler v7): 0 initial sync, 1 compute, 2 final sync.
inline constexpr int kNumPhases = 3;
inline constexpr size_t kVariantChars = 24;

struct ChannelRecord;

// Handle of a KernelPhase event: lives inside its channel's record (no pool of its own).
struct PhaseRecord {
  RecordKind kind = RecordKind::kKernelPhase;
  uint8_t phaseId = 0;
  ChannelRecord* channel = nullptr;
  uint64_t gpuStartNs = 0;
  uint64_t gpuStopNs = 0;
};

// NCCL's MAXCHANNELS; channel ids are masked with it, so a bad id cannot index out of range.
inline constexpr int kMaxChannels = 64;

struct ChannelRecord {
  RecordKind kind = RecordKind::kKernelCh;
  uint8_t channelId = 0;
  uint8_t extra = 0;  // beyond nChannels: holds its own reference instead of the group's
  // A KernelPhase event started under this channel (v7 only): completion reads its phase
  // records only then, and the next KernelCh start clears them only then.
  uint8_t phased = 0;
  CollRecord* owner = nullptr;
  // GPU %globaltimer values (ns) from the descriptor and from the KernelChStop state.
  uint64_t gpuStartNs = 0;
  uint64_t gpuStopNs = 0;
};
// Half a cache line: an all-reduce on 16 channels touches 8 lines of channel records, not the 32
// it touched with the phase records inline. Those live apart (CollRecord::phases), so an NCCL
// without phases never touches them (docs/profiler-overhead.md).
static_assert(sizeof(ChannelRecord) <= 32);

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
  uint8_t nChannels = 0;  // KernelCh events whose references were taken at start
  uint8_t nChannelsDescr = 0;
  uint8_t isSymColl = 0;  // v7
  uint64_t userTag = 0;   // v7
  char kernelVariant[kVariantChars] = {};
  // kMaxChannels x kNumPhases records in the context's phase block, channel-major.
  PhaseRecord* phases = nullptr;
  ChannelRecord channels[kMaxChannels];
};

// One collective record's phase records (kMaxChannels x kNumPhases, channel-major). A pool of
// these (one per collective slot, never acquired: inUse only satisfies FixedPool) keeps the
// 3 MB of a default context off the malloc heap, like every other pool (see FixedPool).
struct PhaseBlock {
  std::atomic<uint8_t> inUse{0};
  PhaseRecord phases[kMaxChannels * kNumPhases];
};

inline PhaseRecord* phasesOf(const ChannelRecord& ch) {
  return ch.owner->phases + size_t(ch.channelId) * kNumPhases;
}

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

// A copy-engine collective (profiler v6+). NCCL only brackets the enqueue of its copies on the
// stream; the duration comes from two CUDA events recorded on that stream at start and stop,
// which the service thread polls (cuda_events.h). The events are created the first time a slot
// is used and kept with it, so a slot costs no driver allocation afterwards.
struct CeRecord {
  RecordKind kind = RecordKind::kCe;
  std::atomic<uint8_t> inUse{0};
  std::atomic<uint8_t> pending{0};  // stopped: waiting for the stop event to complete
  uint8_t timed = 0;                // both events recorded
  int8_t func = -1, datatype = -1;
  uint64_t seqNumber = 0;
  uint64_t count = 0;
  uint64_t nBytes = 0;
  uint64_t userTag = 0;
  uint64_t hostStartNs = 0, hostStopNs = 0;
  void* startEvent = nullptr;  // CUevent
  void* stopEvent = nullptr;
  void* stream = nullptr;
};

// Fixed-capacity pool. The slots live in their own anonymous mapping, not on the malloc heap:
// a communicator's pools are megabytes, and handing such blocks to malloc and back at every
// load/unload cycle raises glibc's dynamic mmap threshold so that later allocations stay on the
// heap, where unloading the library cannot give them back. munmap does. acquire() probes a few
// slots after a shared ring cursor and claims a free one with one CAS; when none is free it returns
// NULL (the caller drops the event and counts it).
//
// The cursor turns over a window of the first kHotSlots slots; a second cursor turns over the
// rest of the pool, used only when the probes found the window busy. In ring order a released slot
// is reused only after the window's other slots were handed out once (63 acquisitions), which keeps
// late handles of a completed event pointing at that event. The window is what keeps the pool in
// cache: a cursor over all 512 collective records touched a record last used 511 collectives ago,
// and on a host whose shared cache is thrashed by its neighbours those misses doubled the
// profiler's cost per all-reduce (docs/profiler-overhead.md). The rest of the pool is for bursts of
// events in flight.
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
    bytes_ = cap * sizeof(T);
    void* mem = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) throw std::bad_alloc();
    items_ = static_cast<T*>(mem);
    for (size_t i = 0; i < cap; ++i) new (&items_[i]) T();
  }
  ~FixedPool() {
    for (size_t i = 0; i <= mask_; ++i) items_[i].~T();
    munmap(items_, bytes_);
  }
  FixedPool(const FixedPool&) = delete;
  FixedPool& operator=(const FixedPool&) = delete;

  T* acquire() noexcept {
    if (mask_ < kHotSlots) return probe(cursor_, 0, mask_ + 1);
    if (T* item = probe(cursor_, 0, kHotSlots)) return item;
    return probe(spillCursor_, kHotSlots, mask_ + 1 - kHotSlots);  // the window is busy
  }
  void release(T* item) noexcept { item->inUse.store(0, std::memory_order_release); }

  size_t capacity() const { return mask_ + 1; }
  T& at(size_t i) { return items_[i]; }
  size_t inUse() const {
    size_t n = 0;
    for (size_t i = 0; i <= mask_; ++i) n += items_[i].inUse.load(std::memory_order_relaxed);
    return n;
  }

  static constexpr size_t kHotSlots = 64;

 private:
  static constexpr int kProbes = 8;
  // Slots [first, first + count); count is a power of two but for the spill region.
  T* probe(std::atomic<size_t>& cursor, size_t first, size_t count) noexcept {
    for (int probe = 0; probe < kProbes; ++probe) {
      const size_t n = cursor.fetch_add(1, std::memory_order_relaxed);
      T& item = items_[first + ((count & (count - 1)) == 0 ? n & (count - 1) : n % count)];
      uint8_t expected = 0;
      if (item.inUse.load(std::memory_order_relaxed) == 0 &&
          item.inUse.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
        return &item;
      }
    }
    return nullptr;
  }
  T* items_ = nullptr;
  size_t bytes_ = 0;
  size_t mask_ = 0;
  alignas(64) std::atomic<size_t> cursor_{0};
  std::atomic<size_t> spillCursor_{0};
};

}  // namespace autopilot::profiler

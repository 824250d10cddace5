// Bounded multi-producer multi-consumer queue (Vyukov's sequence-numbered ring). push() and
// pop() are lock-free and allocation-free; a full queue rejects the element (the caller counts
// the drop) instead of blocking or growing. The storage is allocated once, at construction.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include <sys/mman.h>

namespace autopilot::profiler {

template <typename T>
class BoundedQueue {
 public:
  // `capacity` is rounded up to a power of two (at least 2).
  static size_t roundUp(size_t capacity) {
    size_t cap = 2;
    while (cap < capacity) cap <<= 1;
    return cap;
  }
  explicit BoundedQueue(size_t capacity) {
    size_t cap = roundUp(capacity);
    mask_ = cap - 1;
    // Its own mapping, like FixedPool's slots (event_records.h): unloading returns it.
    bytes_ = cap * sizeof(Cell);
    void* mem = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) throw std::bad_alloc();
    cells_ = static_cast<Cell*>(mem);
    for (size_t i = 0; i < cap; ++i) {
      new (&cells_[i]) Cell();
      cells_[i].sequence.store(i, std::memory_order_relaxed);
    }
  }
  ~BoundedQueue() {
    for (size_t i = 0; i <= mask_; ++i) cells_[i].~Cell();
    munmap(cells_, bytes_);
  }
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  size_t capacity() const { return mask_ + 1; }

  bool push(const T& value) noexcept {
    size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos & mask_];
      size_t seq = cell.sequence.load(std::memory_order_acquire);
      intptr_t diff = intptr_t(seq) - intptr_t(pos);
      if (diff == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          cell.value = value;
          cell.sequence.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // full
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

  bool pop(T* out) noexcept {
    size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos & mask_];
      size_t seq = cell.sequence.load(std::memory_order_acquire);
      intptr_t diff = intptr_t(seq) - intptr_t(pos + 1);
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          *out = cell.value;
          cell.sequence.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // empty
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

 private:
  struct Cell {
    std::atomic<size_t> sequence;
    T value;
  };
  Cell* cells_ = nullptr;
  size_t bytes_ = 0;
  size_t mask_ = 0;
  alignas(64) std::atomic<size_t> head_{0};
  alignas(64) std::atomic<size_t> tail_{0};
};

}  // namespace autopilot::profiler

// The one bounded queue of the library: a ring of power-of-two capacity in which every cell
// carries a sequence number that says whose turn it is (Vyukov's bounded queue). Used wherever
// a hot path hands records to a service thread: the profiler's completed-collective and
// trace-span queues, the measurement bus, the tuner's call and new-context logs.
//
// Contract.
//  - push() and pop() never block, never allocate and never grow: a full ring rejects the
//    element (push returns false; the caller counts the drop) and an empty one returns false.
//    The storage is one anonymous mapping made at construction and returned at destruction
//    (blocks this large handed to malloc and back at every load/unload would raise glibc's
//    mmap threshold and keep later allocations on a heap that unloading cannot give back).
//  - Producers: Ring<T, RingProducers::kSingle> for exactly one pushing thread at a time
//    (push is then a plain store of the head, no read-modify-write on the hot path);
//    RingProducers::kMulti for any number (the head is claimed with a CAS). Consumers: any
//    number; every user has one, which pays one uncontended CAS per pop.
//  - FIFO per producer; with several producers, elements are ordered by when they claimed
//    their cell.
//  - The head (producers' index) and the tail (consumers' index) sit on their own cache lines,
//    so producers and the consumer do not invalidate each other's line on every operation.
//
// Memory ordering. Cell i's sequence is the handshake: a producer that claimed position p
// waits for sequence == p (cell free), writes the value, then stores sequence = p + 1 with
// release; a consumer at position p loads sequence with acquire and takes the value only when it
// equals p + 1, so it sees the value the producer wrote. After reading the value it stores
// sequence = p + capacity with release, which a producer one lap later acquires before
// overwriting the cell. The head and tail themselves are only claimed (relaxed loads and CAS):
// all data visibility goes through the cell sequences.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

namespace autopilot {

enum class RingProducers { kSingle, kMulti };

template <typename T, RingProducers kProducers = RingProducers::kMulti>
class Ring {
 public:
  // The capacity actually used for a requested one: the next power of two, at least 2.
  static size_t roundUp(size_t capacity) {
    size_t cap = 2;
    while (cap < capacity) cap <<= 1;
    return cap;
  }

  // Throws std::bad_alloc when the mapping cannot be made (construction is never on a hot path).
  explicit Ring(size_t capacity) {
    size_t cap = roundUp(capacity);
    mask_ = cap - 1;
    bytes_ = cap * sizeof(Cell);
    void* mem = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) throw std::bad_alloc();
    cells_ = static_cast<Cell*>(mem);
    for (size_t i = 0; i < cap; ++i) {
      new (&cells_[i]) Cell();
      cells_[i].sequence.store(i, std::memory_order_relaxed);
    }
  }
  ~Ring() {
    for (size_t i = 0; i <= mask_; ++i) cells_[i].~Cell();
    munmap(cells_, bytes_);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  size_t capacity() const { return mask_ + 1; }

  bool push(const T& value) noexcept {
    size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos & mask_];
      size_t seq = cell.sequence.load(std::memory_order_acquire);
      intptr_t diff = intptr_t(seq) - intptr_t(pos);
      if (diff == 0) {
        if constexpr (kProducers == RingProducers::kSingle) {
          head_.store(pos + 1, std::memory_order_relaxed);
        } else if (!head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          continue;  // another producer took it; pos now holds the current head
        }
        cell.value = value;
        cell.sequence.store(pos + 1, std::memory_order_release);
        return true;
      }
      if (diff < 0) return false;  // full: the consumer has not freed this cell yet
      pos = head_.load(std::memory_order_relaxed);  // another producer moved on
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
        return false;  // empty (or the producer of this cell has not finished writing it)
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  // Pops up to `max` elements into `out` (oldest first); returns how many.
  size_t popMany(T* out, size_t max) noexcept {
    size_t n = 0;
    while (n < max && pop(&out[n])) ++n;
    return n;
  }

  // Empties the ring for a new owner. Not safe against concurrent push() or pop(): the caller
  // excludes them, or (the measurement bus) tolerates a late one and filters what it drains.
  // The positions keep counting from where they were, so a straggler holding an old position
  // finds a sequence that does not match and backs off.
  void reset() noexcept {
    size_t h = head_.load(std::memory_order_relaxed);
    for (size_t k = 0; k <= mask_; ++k) {
      cells_[(h + k) & mask_].sequence.store(h + k, std::memory_order_relaxed);
    }
    tail_.store(h, std::memory_order_release);
  }

 private:
  struct Cell {
    std::atomic<size_t> sequence;
    T value;
  };
  Cell* cells_ = nullptr;
  size_t bytes_ = 0;
  size_t mask_ = 0;
  alignas(64) std::atomic<size_t> head_{0};  // producers' next position
  // The class is 64-byte aligned through these members, so its size is a multiple of 64 and
  // nothing the owner places after the ring shares the tail's line.
  alignas(64) std::atomic<size_t> tail_{0};  // consumers' next position
};

}  // namespace autopilot

// ChunkBitmap: the receiver's record of which chunks of one message have landed, so that a
// chunk arriving twice (re-sent after its rail was declared failed, although the first copy
// got through) is harmless, and the message completes exactly once. Fixed capacity, set at
// construction (never allocates afterwards).
#pragma once

#include <cstdint>
#include <memory>

namespace autopilot::net::core {

class ChunkBitmap {
 public:
  enum class Mark { kNew, kDuplicate, kInvalid };

  explicit ChunkBitmap(uint32_t capacity = 0);
  ChunkBitmap(ChunkBitmap&&) = default;
  ChunkBitmap& operator=(ChunkBitmap&&) = default;

  uint32_t capacity() const { return capacity_; }
  // Forgets the message (the buffer is posted again for another one).
  void reset();
  // Whether chunk `index` of a `count`-chunk message is already there (false when unknown).
  bool has(uint32_t index) const;
  // Chunk `index` of a message of `count` chunks has fully landed. kInvalid when index or count
  // are out of range or count disagrees with the message's earlier chunks.
  Mark mark(uint32_t index, uint32_t count);
  // Checks without recording (kNew means "would be new").
  Mark check(uint32_t index, uint32_t count) const;
  uint32_t count() const { return count_; }
  uint32_t landed() const { return landed_; }
  bool complete() const { return count_ != 0 && landed_ == count_; }

 private:
  uint32_t capacity_;
  uint32_t count_ = 0;  // 0 until the first chunk tells the message's chunk count
  uint32_t landed_ = 0;
  std::unique_ptr<uint64_t[]> words_;
};

}  // namespace autopilot::net::core

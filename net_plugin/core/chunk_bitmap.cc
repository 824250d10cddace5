#include "net_plugin/core/chunk_bitmap.h"

#include <cstring>

namespace autopilot::net::core {

namespace {
uint32_t wordsFor(uint32_t bits) { return (bits + 63) / 64; }
}  // namespace

ChunkBitmap::ChunkBitmap(uint32_t capacity)
    : capacity_(capacity), words_(new uint64_t[wordsFor(capacity) + 1]()) {}

void ChunkBitmap::reset() {
  if (count_ != 0) std::memset(words_.get(), 0, wordsFor(count_) * sizeof(uint64_t));
  count_ = 0;
  landed_ = 0;
}

bool ChunkBitmap::has(uint32_t index) const {
  if (count_ == 0 || index >= count_) return false;
  return (words_[index / 64] >> (index % 64)) & 1;
}

ChunkBitmap::Mark ChunkBitmap::check(uint32_t index, uint32_t count) const {
  if (count == 0 || count > capacity_ || index >= count) return Mark::kInvalid;
  if (count_ != 0 && count != count_) return Mark::kInvalid;
  return has(index) ? Mark::kDuplicate : Mark::kNew;
}

ChunkBitmap::Mark ChunkBitmap::mark(uint32_t index, uint32_t count) {
  Mark m = check(index, count);
  if (m != Mark::kNew) return m;
  count_ = count;
  words_[index / 64] |= uint64_t(1) << (index % 64);
  ++landed_;
  return Mark::kNew;
}

}  // namespace autopilot::net::core

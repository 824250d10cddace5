#include "net_plugin/core/receive_matcher.h"

#include <algorithm>

namespace autopilot::net::core {

ReceiveMatcher::ReceiveMatcher(uint32_t window)
    : window_(std::max<uint32_t>(window, 1)), entries_(new Entry[window_]) {}

ReceiveMatcher::Offer ReceiveMatcher::offer(const PostedReceive& posted) {
  if (posted.n < 1 || posted.n > kMaxRecvsPerRequest) return Offer::kInvalid;
  if (posted.seq < head_) return Offer::kStale;
  if (posted.seq - head_ >= window_) return Offer::kInvalid;
  Entry& e = entries_[posted.seq % window_];
  if (e.valid && e.posted.seq == posted.seq) return Offer::kDuplicate;
  e.posted = posted;
  e.valid = true;
  e.matched = 0;
  return Offer::kStored;
}

ReceiveMatcher::Match ReceiveMatcher::match(int32_t tag, uint64_t size, Slot* out) {
  Entry& e = entries_[head_ % window_];
  if (!e.valid || e.posted.seq != head_) return Match::kWait;
  int buffer = -1;
  for (int i = 0; i < e.posted.n; ++i) {
    if (!(e.matched & (1u << i)) && e.posted.tags[i] == tag) {
      buffer = i;
      break;
    }
  }
  if (buffer < 0) return Match::kTagMismatch;
  if (size > e.posted.sizes[buffer]) return Match::kTooLarge;
  e.matched |= uint8_t(1u << buffer);
  out->seq = head_;
  out->buffer = buffer;
  out->capacity = e.posted.sizes[buffer];
  if (e.matched == uint8_t((1u << e.posted.n) - 1)) {
    e.valid = false;
    ++head_;
  }
  return Match::kMatched;
}

}  // namespace autopilot::net::core

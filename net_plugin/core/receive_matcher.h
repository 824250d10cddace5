// ReceiveMatcher: the sender's view of the receives the peer has posted (clear-to-send
// descriptors), and the matching of isends to them, as NCCL defines it: sends match receives
// in posting order per connection; within one multi-receive (n > 1 buffers), the send's tag
// picks the buffer. Shared by every transport. Bounded: a window of descriptors indexed by
// the receive's sequence number, fixed at construction.
//
// Descriptors may arrive more than once and out of order (the receiver re-announces them on
// another rail when the one that carried them fails); duplicates and stale ones are ignored.
#pragma once

#include <cstdint>
#include <memory>

namespace autopilot::net::core {

inline constexpr int kMaxRecvsPerRequest = 8;

struct PostedReceive {
  uint64_t seq = 0;  // the receiver's request sequence number (0, 1, 2, ...)
  int n = 0;         // buffers in the request, 1..kMaxRecvsPerRequest
  uint64_t sizes[kMaxRecvsPerRequest] = {};
  int32_t tags[kMaxRecvsPerRequest] = {};
};

class ReceiveMatcher {
 public:
  enum class Offer { kStored, kDuplicate, kStale, kInvalid };
  enum class Match { kMatched, kWait, kTagMismatch, kTooLarge };

  struct Slot {
    uint64_t seq;
    int buffer;
    uint64_t capacity;
  };

  explicit ReceiveMatcher(uint32_t window);

  // A descriptor from the receiver. kInvalid: malformed (n out of range) or beyond the window
  // (the receiver has more receives posted than it may).
  Offer offer(const PostedReceive& posted);
  // Matches the next isend (in posting order). kWait: the matching receive is not announced
  // yet. kTagMismatch / kTooLarge: the peer's receive cannot take this send (a usage error);
  // the matcher does not advance in those cases.
  Match match(int32_t tag, uint64_t size, Slot* out);
  uint64_t nextSeq() const { return head_; }

 private:
  struct Entry {
    PostedReceive posted;
    bool valid = false;
    uint8_t matched = 0;  // bit per buffer
  };
  uint32_t window_;
  std::unique_ptr<Entry[]> entries_;
  uint64_t head_ = 0;  // sequence number of the receive the next isend matches
};

}  // namespace autopilot::net::core

// SendTracker: the sender's bookkeeping of chunks between "placed on a rail" and
// "acknowledged by the receiver", shared by every transport. Bounded: fixed numbers of
// messages and queue entries, set at construction; nothing allocates afterwards.
//
// Lossless by construction: a chunk stays in its rail's queue until the receiver acknowledges
// it, so when a rail fails every chunk it held (sent or not) moves to the re-send queue and is
// placed on another rail. A message is done only when every chunk is acknowledged, which is
// when the caller may report the send complete (NCCL reuses the buffer right away).
//
// Each chunk is in exactly one place at any time: not yet placed, in the re-send queue, in one
// rail queue, or acknowledged. Acknowledgements of a rail arrive in its queue order (one
// ordered connection per rail), so acknowledging means popping the oldest entries.
//
// A re-sent chunk may duplicate one that did land (its rail failed before the acknowledgement
// came back). The receiver then completes the message without needing the copy, and may stop
// reading (NCCL calls test() only while it waits for something), so the copy's acknowledgement
// can be arbitrarily late. A transport whose receiver reports completed messages calls
// completeByPeer(): the message is done at once, and its chunks still queued become leftovers
// (they stay in their rail queue to match acknowledgements by position and are dropped, not
// re-sent, when their rail fails). A leftover copy does not count as held data; a leftover
// original does: it did land (no other copy of it exists), so its acknowledgement must come,
// and a rail that loses them is broken. Generations keep a leftover from counting for the next
// message that reuses its slot.
//
// A late copy (placeCopy) is the one exception to "one place at a time": a chunk whose rail is
// late with it is sent again on another rail while the original stays queued, and the receiver
// keeps whichever lands first. Its acknowledgement never counts as the chunk's (the original's
// may come too), but a message whose copies are still queued is not done by acknowledgements
// alone: only once they are acknowledged or dropped, or when the receiver reports the message
// complete (completeByPeer turns them into leftovers). So no copy outlives its message except
// as a leftover, and none is ever written from a buffer that NCCL got back.
#pragma once

#include <cstdint>
#include <memory>

#include "net_plugin/core/chunk_plan.h"

namespace autopilot::net::core {

class SendTracker {
 public:
  struct Entry {
    uint32_t message;
    uint32_t chunk;
    uint64_t bytes;
    uint32_t generation;     // of the message's slot when the chunk was planned
    bool resend;             // placed again after its first rail failed, or a late copy
    bool leftover;           // its message completed without it (completeByPeer)
    bool copy = false;       // a late copy (placeCopy): its acknowledgement does not count
    bool copied = false;     // a late copy of it was placed
    uint64_t placedNs = 0;   // when it was placed on its rail
    uint64_t dueNs = 0;      // ... and when it was expected to land then
    uint8_t rejections = 0;  // writes of it the receiver's NIC rejected (rejectOldest)
  };

  SendTracker(int rails, uint32_t messages, uint32_t queueCapacity);

  int rails() const { return rails_; }
  uint32_t messages() const { return messages_; }

  // Message `message` (< messages()) starts: its chunks are placed after those of messages
  // started earlier. The slot must not be in use.
  void start(uint32_t message, const ChunkPlan& plan);
  // Releases a finished message's slot.
  void release(uint32_t message);
  bool inUse(uint32_t message) const { return state_[message].inUse; }
  const ChunkPlan& plan(uint32_t message) const { return state_[message].plan; }
  bool done(uint32_t message) const;
  uint32_t acknowledged(uint32_t message) const { return state_[message].acked; }
  uint32_t generation(uint32_t message) const { return state_[message].generation; }
  // The receiver reported the message complete: it is done whatever acknowledgements are still
  // to come. Its transmitted chunks become leftovers; those not yet transmitted are dropped,
  // except the first untransmitted entry of each rail in `partialRails` (a bit per rail: the
  // transport is half-way through writing it and must finish). Each chunk dropped from a
  // rail's queue is reported to `onDropped(context, rail, bytes)` when given (never
  // transmitted, it will never be acknowledged: the striper must stop counting it in flight,
  // chunk by chunk). False (nothing changes) when some chunk was never placed: the receiver
  // cannot have it, so the report is a protocol violation.
  using DropFn = void (*)(void* context, int rail, uint64_t bytes);
  bool completeByPeer(uint32_t message, uint32_t partialRails, DropFn onDropped = nullptr,
                      void* context = nullptr);

  // The next chunk to place (re-sends first), without taking it. False when nothing waits.
  bool peek(Entry* out) const;
  // Places the chunk peek() returned at the tail of `rail`'s queue at time `nowNs`, expected to
  // land at `dueNs`. False (and nothing changes) when that queue is full or nothing waits.
  bool placeNext(int rail, uint64_t nowNs = 0, uint64_t dueNs = 0);
  // A late copy of entry `i` of rail `from` goes to the tail of rail `to`'s queue (placed at
  // `nowNs`). False (nothing changes) when that queue is full, `to` is `from`, or the entry is
  // a leftover, a copy, or was copied already: a chunk has at most one copy in flight.
  bool placeCopy(int from, uint32_t i, int to, uint64_t nowNs);
  // Copies of the message still queued (their acknowledgements outstanding).
  uint32_t copiesQueued(uint32_t message) const { return state_[message].copies; }

  // A rail queue, oldest first. The transport keeps how many leading entries it has fully
  // transmitted (`posted`); acknowledgements can only cover those.
  uint32_t queued(int rail) const { return queue_[rail].size; }
  uint64_t queuedBytes(int rail) const { return queue_[rail].bytes; }
  // What the rail holds whose acknowledgement must come (queued minus leftover copies): the
  // bytes whose lack of progress means the rail is stuck.
  uint64_t heldBytes(int rail) const { return queue_[rail].bytes - queue_[rail].leftoverBytes; }
  bool queueFull(int rail) const { return queue_[rail].size == capacity_; }
  const Entry& entry(int rail, uint32_t i) const;
  uint32_t posted(int rail) const { return queue_[rail].posted; }
  void setPosted(int rail, uint32_t posted);
  uint64_t postedBytes(int rail) const { return queue_[rail].postedBytes; }

  // The receiver acknowledged the `count` oldest chunks of `rail`. Calls onChunk(const Entry&)
  // for each, oldest first. False (nothing changes) when count exceeds the posted entries:
  // a protocol violation by the peer.
  template <typename OnChunk>
  bool acknowledge(int rail, uint32_t count, OnChunk&& onChunk);

  // The receiver's NIC rejected the oldest posted chunk of `rail` (an RDMA transport's error
  // completion for its write: completions come in posting order, and every earlier write on the
  // rail completed). Counts the rejection on the chunk, which keeps the count when the rail
  // fails and it is re-sent, and returns the count (saturating at 255): a transport replays a
  // chunk rejected once and fails on the second. 0 when the rail has nothing posted.
  uint32_t rejectOldest(int rail);
  // The rail failed: every chunk it held goes to the re-send queue (oldest first); late copies
  // are dropped (their originals are still queued elsewhere, or were acknowledged). Returns the
  // number of chunks moved; *bytes gets their size.
  uint32_t railFailed(int rail, uint64_t* bytes);
  uint32_t resendQueued() const { return resend_.size; }

 private:
  struct MessageState {
    ChunkPlan plan;
    uint32_t nextNew = 0;  // next chunk never placed
    uint32_t acked = 0;
    uint32_t copies = 0;  // late copies queued (see placeCopy)
    uint32_t generation = 0;
    bool inUse = false;
    bool peerComplete = false;
  };
  struct Ring {
    std::unique_ptr<Entry[]> items;
    uint32_t head = 0, size = 0;
    uint32_t posted = 0;
    uint64_t bytes = 0, postedBytes = 0;
    uint64_t leftoverBytes = 0;
  };
  static const Entry& at(const Ring& r, uint32_t cap, uint32_t i) {
    return r.items[(r.head + i) % cap];
  }
  static void push(Ring& r, uint32_t cap, const Entry& e);
  static Entry pop(Ring& r, uint32_t cap);

  int rails_;
  uint32_t messages_;
  uint32_t capacity_;        // per rail queue
  uint32_t resendCapacity_;  // holds every rail's queue at once
  std::unique_ptr<MessageState[]> state_;
  std::unique_ptr<uint32_t[]> order_;  // messages with chunks never placed, in start order
  uint32_t orderHead_ = 0, orderSize_ = 0;
  std::unique_ptr<Ring[]> queue_;
  Ring resend_;
};

template <typename OnChunk>
bool SendTracker::acknowledge(int rail, uint32_t count, OnChunk&& onChunk) {
  Ring& q = queue_[rail];
  if (count > q.posted) return false;
  for (uint32_t i = 0; i < count; ++i) {
    Entry e = pop(q, capacity_);
    q.posted--;
    q.postedBytes -= e.bytes;
    MessageState& m = state_[e.message];
    if (!e.leftover && e.generation == m.generation && !m.peerComplete) {
      if (e.copy) {
        m.copies--;
      } else {
        m.acked++;
      }
    }
    onChunk(static_cast<const Entry&>(e));
  }
  return true;
}

}  // namespace autopilot::net::core

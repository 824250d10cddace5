#include "net_plugin/core/send_tracker.h"

#include <algorithm>

namespace autopilot::net::core {

SendTracker::SendTracker(int rails, uint32_t messages, uint32_t queueCapacity)
    : rails_(std::max(rails, 1)),
      messages_(std::max<uint32_t>(messages, 1)),
      capacity_(std::max<uint32_t>(queueCapacity, 1)),
      resendCapacity_(capacity_ * uint32_t(rails_)),
      state_(new MessageState[messages_]),
      order_(new uint32_t[messages_]),
      queue_(new Ring[rails_]) {
  for (int r = 0; r < rails_; ++r) queue_[r].items.reset(new Entry[capacity_]);
  resend_.items.reset(new Entry[resendCapacity_]);
}

void SendTracker::push(Ring& r, uint32_t cap, const Entry& e) {
  r.items[(r.head + r.size) % cap] = e;
  r.size++;
  r.bytes += e.bytes;
  if (e.leftover && e.resend) r.leftoverBytes += e.bytes;
}

SendTracker::Entry SendTracker::pop(Ring& r, uint32_t cap) {
  Entry e = r.items[r.head];
  r.head = (r.head + 1) % cap;
  r.size--;
  r.bytes -= e.bytes;
  if (e.leftover && e.resend) r.leftoverBytes -= e.bytes;
  return e;
}

void SendTracker::start(uint32_t message, const ChunkPlan& plan) {
  MessageState& m = state_[message];
  m.plan = plan;
  m.nextNew = 0;
  m.acked = 0;
  m.copies = 0;
  m.generation++;
  m.peerComplete = false;
  m.inUse = true;
  order_[(orderHead_ + orderSize_) % messages_] = message;
  orderSize_++;
}

void SendTracker::release(uint32_t message) { state_[message].inUse = false; }

bool SendTracker::done(uint32_t message) const {
  const MessageState& m = state_[message];
  return m.inUse && ((m.acked == m.plan.count && m.copies == 0) || m.peerComplete);
}

bool SendTracker::completeByPeer(uint32_t message, uint32_t partialRails, DropFn onDropped,
                                 void* context) {
  MessageState& m = state_[message];
  if (!m.inUse || m.nextNew < m.plan.count) return false;
  if (m.peerComplete || (m.acked == m.plan.count && m.copies == 0)) return true;
  m.peerComplete = true;
  auto ours = [&](const Entry& e) { return e.message == message && e.generation == m.generation; };
  // Bounded by the queue capacities; only messages that were not already fully acknowledged
  // (a copy in flight, or acknowledgements still on their way) get here.
  for (int r = 0; r < rails_; ++r) {
    Ring& q = queue_[r];
    uint32_t keep = std::min(q.size, q.posted + ((partialRails >> r) & 1u));
    for (uint32_t i = 0; i < keep; ++i) {
      Entry& e = q.items[(q.head + i) % capacity_];
      if (ours(e) && !e.leftover) {
        e.leftover = true;
        if (e.resend) q.leftoverBytes += e.bytes;
      }
    }
    // Never transmitted: removed, so that nothing reads the message's buffer once it is done.
    uint32_t kept = keep;
    for (uint32_t i = keep; i < q.size; ++i) {
      const Entry e = q.items[(q.head + i) % capacity_];
      if (ours(e)) {
        q.bytes -= e.bytes;
        if (onDropped) onDropped(context, r, e.bytes);
      } else {
        q.items[(q.head + kept++) % capacity_] = e;
      }
    }
    q.size = kept;
  }
  // Copies not yet placed are not needed at all.
  uint32_t kept = 0;
  for (uint32_t i = 0; i < resend_.size; ++i) {
    const Entry& e = at(resend_, resendCapacity_, i);
    if (!ours(e))
      resend_.items[(resend_.head + kept++) % resendCapacity_] = e;
    else
      resend_.bytes -= e.bytes;
  }
  resend_.size = kept;
  return true;
}

bool SendTracker::peek(Entry* out) const {
  if (resend_.size > 0) {
    *out = at(resend_, resendCapacity_, 0);
    return true;
  }
  if (orderSize_ == 0) return false;
  uint32_t message = order_[orderHead_];
  const MessageState& m = state_[message];
  *out = Entry{message, m.nextNew, m.plan.length(m.nextNew), m.generation, false, false};
  return true;
}

bool SendTracker::placeNext(int rail, uint64_t nowNs, uint64_t dueNs) {
  Ring& q = queue_[rail];
  if (q.size == capacity_) return false;
  Entry e;
  if (resend_.size > 0) {
    e = pop(resend_, resendCapacity_);
  } else if (orderSize_ > 0) {
    uint32_t message = order_[orderHead_];
    MessageState& m = state_[message];
    e = Entry{message, m.nextNew, m.plan.length(m.nextNew), m.generation, false, false};
    if (++m.nextNew == m.plan.count) {
      orderHead_ = (orderHead_ + 1) % messages_;
      orderSize_--;
    }
  } else {
    return false;
  }
  e.placedNs = nowNs;  // copied is false: new entries start so, railFailed clears re-sent ones
  e.dueNs = dueNs;
  push(q, capacity_, e);
  return true;
}

bool SendTracker::placeCopy(int from, uint32_t i, int to, uint64_t nowNs) {
  Ring& src = queue_[from];
  Ring& dst = queue_[to];
  if (to == from || i >= src.size || dst.size == capacity_) return false;
  Entry& original = src.items[(src.head + i) % capacity_];
  MessageState& m = state_[original.message];
  if (original.leftover || original.copy || original.copied || !m.inUse ||
      original.generation != m.generation || m.peerComplete) {
    return false;
  }
  original.copied = true;
  Entry c = original;
  c.resend = true;
  c.copy = true;
  c.copied = false;
  c.placedNs = nowNs;
  push(dst, capacity_, c);
  m.copies++;
  return true;
}

const SendTracker::Entry& SendTracker::entry(int rail, uint32_t i) const {
  return at(queue_[rail], capacity_, i);
}

void SendTracker::setPosted(int rail, uint32_t posted) {
  Ring& q = queue_[rail];
  posted = std::min(posted, q.size);
  while (q.posted < posted) q.postedBytes += at(q, capacity_, q.posted++).bytes;
  while (q.posted > posted) q.postedBytes -= at(q, capacity_, --q.posted).bytes;
}

uint32_t SendTracker::rejectOldest(int rail) {
  Ring& q = queue_[rail];
  if (q.posted == 0) return 0;
  Entry& e = q.items[q.head];
  if (e.rejections < 255) e.rejections++;
  return e.rejections;
}

uint32_t SendTracker::railFailed(int rail, uint64_t* bytes) {
  Ring& q = queue_[rail];
  uint32_t moved = 0;
  uint64_t movedBytes = 0;
  while (q.size > 0) {
    Entry e = pop(q, capacity_);
    if (e.leftover) continue;  // its message is complete: nothing to re-send
    if (e.copy) {
      // The original is still queued elsewhere (or was acknowledged): nothing is lost.
      MessageState& m = state_[e.message];
      if (e.generation == m.generation && m.copies > 0) m.copies--;
      continue;
    }
    e.resend = true;
    e.copied = false;  // a new placement: it may be copied again
    movedBytes += e.bytes;
    push(resend_, resendCapacity_, e);  // cannot overflow: it holds every rail queue
    ++moved;
  }
  q.posted = 0;
  q.postedBytes = 0;
  if (bytes) *bytes = movedBytes;
  return moved;
}

}  // namespace autopilot::net::core

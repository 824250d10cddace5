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
}

SendTracker::Entry SendTracker::pop(Ring& r, uint32_t cap) {
  Entry e = r.items[r.head];
  r.head = (r.head + 1) % cap;
  r.size--;
  r.bytes -= e.bytes;
  return e;
}

void SendTracker::start(uint32_t message, const ChunkPlan& plan) {
  MessageState& m = state_[message];
  m.plan = plan;
  m.nextNew = 0;
  m.acked = 0;
  m.inUse = true;
  order_[(orderHead_ + orderSize_) % messages_] = message;
  orderSize_++;
}

void SendTracker::release(uint32_t message) { state_[message].inUse = false; }

bool SendTracker::done(uint32_t message) const {
  const MessageState& m = state_[message];
  return m.inUse && m.acked == m.plan.count;
}

bool SendTracker::peek(Entry* out) const {
  if (resend_.size > 0) {
    *out = at(resend_, resendCapacity_, 0);
    return true;
  }
  if (orderSize_ == 0) return false;
  uint32_t message = order_[orderHead_];
  const MessageState& m = state_[message];
  *out = Entry{message, m.nextNew, m.plan.length(m.nextNew), false};
  return true;
}

bool SendTracker::placeNext(int rail) {
  Ring& q = queue_[rail];
  if (q.size == capacity_) return false;
  Entry e;
  if (resend_.size > 0) {
    e = pop(resend_, resendCapacity_);
  } else if (orderSize_ > 0) {
    uint32_t message = order_[orderHead_];
    MessageState& m = state_[message];
    e = Entry{message, m.nextNew, m.plan.length(m.nextNew), false};
    if (++m.nextNew == m.plan.count) {
      orderHead_ = (orderHead_ + 1) % messages_;
      orderSize_--;
    }
  } else {
    return false;
  }
  push(q, capacity_, e);
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

uint32_t SendTracker::railFailed(int rail, uint64_t* bytes) {
  Ring& q = queue_[rail];
  uint32_t moved = 0;
  uint64_t movedBytes = 0;
  while (q.size > 0) {
    Entry e = pop(q, capacity_);
    e.resend = true;
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

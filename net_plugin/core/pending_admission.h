// Where a newly accepted, still unidentified connection goes in a listener's bounded table of
// such connections (TCP rails, the ibverbs control listener). Anyone who can reach a listener
// can open connections that never speak; refusing newcomers when the table is full would let
// a handful of idle sockets keep every legitimate connect() (and every failed rail's
// reconnection) out. So a newcomer always gets a slot: a free one, unless its source already
// holds its share, in which case that source's oldest connection is evicted; when the table is
// full, the oldest connection overall is evicted. A legitimate peer identifies itself within a
// round trip and reconnects if it was evicted by mistake. Pure: unit-tested in
// test/net/unit/test_pending_admission.cc.
#pragma once

#include <cstdint>

namespace autopilot::net {

struct PendingSlotView {
  bool inUse = false;
  bool sameSource = false;  // from the newcomer's source address
  uint64_t sinceNs = 0;     // when it was accepted
};

struct PendingAdmission {
  int slot = -1;        // where the newcomer goes
  bool evicts = false;  // the slot's current connection must be closed first
};

inline PendingAdmission admitPending(const PendingSlotView* slots, int n, int maxPerSource) {
  int free = -1, fromSource = 0, oldestOfSource = -1, oldest = -1;
  for (int i = 0; i < n; ++i) {
    const PendingSlotView& s = slots[i];
    if (!s.inUse) {
      if (free < 0) free = i;
      continue;
    }
    if (oldest < 0 || s.sinceNs < slots[oldest].sinceNs) oldest = i;
    if (s.sameSource) {
      ++fromSource;
      if (oldestOfSource < 0 || s.sinceNs < slots[oldestOfSource].sinceNs) oldestOfSource = i;
    }
  }
  if (fromSource >= maxPerSource && oldestOfSource >= 0) return {oldestOfSource, true};
  if (free >= 0) return {free, false};
  return {oldest, oldest >= 0};
}

}  // namespace autopilot::net

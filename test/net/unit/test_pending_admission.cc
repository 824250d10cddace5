#include <catch2/catch.hpp>

#include "net_plugin/core/pending_admission.h"

using namespace autopilot::net;

TEST_CASE("admission of unidentified connections: free slot, per-source share, oldest evicted",
          "[pending_admission]") {
  PendingSlotView s[4];
  // Empty table: the first slot.
  PendingAdmission a = admitPending(s, 4, 2);
  CHECK(a.slot == 0);
  CHECK_FALSE(a.evicts);
  // A free slot is used while the newcomer's source holds less than its share.
  s[0] = {true, true, 10};
  s[2] = {true, false, 5};
  a = admitPending(s, 4, 2);
  CHECK(a.slot == 1);
  CHECK_FALSE(a.evicts);
  // The source at its share: its own oldest goes, even with free slots left.
  s[1] = {true, true, 20};
  a = admitPending(s, 4, 2);
  CHECK(a.slot == 0);
  CHECK(a.evicts);
  // Full table, newcomer from another source: the oldest overall goes.
  for (auto& v : s) v.sameSource = false;
  s[3] = {true, false, 30};
  a = admitPending(s, 4, 2);
  CHECK(a.slot == 2);
  CHECK(a.evicts);
  // Never refused, whatever the table holds.
  for (int i = 0; i < 4; ++i) s[i] = {true, true, uint64_t(100 - i)};
  a = admitPending(s, 4, 8);
  CHECK(a.slot == 3);
  CHECK(a.evicts);
}

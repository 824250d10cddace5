// Sender bookkeeping (placement, acknowledgement, migration on rail failure) and the receive
// matcher (clear-to-send descriptors, tags, multi-receive).
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <vector>

#include "net_plugin/core/receive_matcher.h"
#include "net_plugin/core/send_tracker.h"

using namespace autopilot::net::core;

namespace {
ChunkPlan plan(uint64_t total, uint64_t chunk) {
  ChunkPlan p;
  p.totalBytes = total;
  p.chunkBytes = chunk;
  p.count = uint32_t(total == 0 ? 1 : (total + chunk - 1) / chunk);
  return p;
}
}  // namespace

TEST_CASE("tracker: chunks are placed in message order and complete on acknowledgement",
          "[net][tracker]") {
  SendTracker t(2, 4, 8);
  t.start(2, plan(300, 100));
  t.start(0, plan(0, 1));
  SendTracker::Entry e;
  REQUIRE(t.peek(&e));
  CHECK(e.message == 2);
  CHECK(e.chunk == 0);
  CHECK(e.bytes == 100);
  REQUIRE(t.placeNext(0));
  REQUIRE(t.placeNext(1));
  REQUIRE(t.placeNext(0));
  REQUIRE(t.peek(&e));
  CHECK(e.message == 0);
  CHECK(e.bytes == 0);
  REQUIRE(t.placeNext(1));
  CHECK_FALSE(t.peek(&e));
  CHECK_FALSE(t.placeNext(0));
  CHECK(t.queued(0) == 2);
  CHECK(t.queuedBytes(0) == 200);
  // Only posted (transmitted) entries can be acknowledged.
  CHECK_FALSE(t.acknowledge(0, 1, [](const SendTracker::Entry&) {}));
  t.setPosted(0, 2);
  CHECK(t.postedBytes(0) == 200);
  std::vector<uint32_t> acked;
  REQUIRE(t.acknowledge(0, 2, [&](const SendTracker::Entry& x) { acked.push_back(x.chunk); }));
  CHECK(acked == std::vector<uint32_t>{0, 2});
  CHECK_FALSE(t.done(2));
  t.setPosted(1, 2);
  REQUIRE(t.acknowledge(1, 2, [](const SendTracker::Entry&) {}));
  CHECK(t.done(2));
  CHECK(t.done(0));
  t.release(2);
  CHECK_FALSE(t.inUse(2));
}

TEST_CASE("tracker: a failed rail's chunks are re-sent first, on other rails", "[net][tracker]") {
  SendTracker t(2, 2, 16);
  t.start(0, plan(1000, 100));
  for (int i = 0; i < 10; ++i) REQUIRE(t.placeNext(i % 2));
  t.setPosted(1, 3);  // rail 1 transmitted 3 of its 5
  uint64_t bytes = 0;
  CHECK(t.railFailed(1, &bytes) == 5);
  CHECK(bytes == 500);
  CHECK(t.queued(1) == 0);
  CHECK(t.posted(1) == 0);
  SendTracker::Entry e;
  REQUIRE(t.peek(&e));
  CHECK(e.chunk == 1);  // oldest first
  for (int i = 0; i < 5; ++i) REQUIRE(t.placeNext(0));
  CHECK(t.entry(0, 5).resend);
  CHECK_FALSE(t.entry(0, 0).resend);
  t.setPosted(0, 10);
  std::set<uint32_t> chunks;
  REQUIRE(t.acknowledge(0, 10, [&](const SendTracker::Entry& x) { chunks.insert(x.chunk); }));
  CHECK(chunks.size() == 10);
  CHECK(t.done(0));
}

// The verbs transport replays a chunk the receiver's NIC rejected once and fails on the second
// rejection: the count must follow the chunk through the re-send queue to its next rail.
TEST_CASE("tracker: a rejected chunk keeps its rejection count when re-sent", "[net][tracker]") {
  SendTracker t(2, 2, 8);
  t.start(0, plan(300, 100));
  for (int i = 0; i < 3; ++i) REQUIRE(t.placeNext(1));
  CHECK(t.rejectOldest(1) == 0);  // nothing posted: no write of it can have been rejected
  t.setPosted(1, 2);
  REQUIRE(t.acknowledge(1, 1, [](const SendTracker::Entry&) {}));  // chunk 0 landed
  CHECK(t.rejectOldest(1) == 1);                                   // chunk 1 rejected
  CHECK(t.entry(1, 0).chunk == 1);
  CHECK(t.entry(1, 1).rejections == 0);  // only the oldest posted write was rejected
  uint64_t bytes = 0;
  REQUIRE(t.railFailed(1, &bytes) == 2);
  REQUIRE(t.placeNext(0));
  REQUIRE(t.placeNext(0));
  CHECK(t.entry(0, 0).chunk == 1);
  CHECK(t.entry(0, 0).rejections == 1);
  CHECK(t.entry(0, 1).rejections == 0);
  t.setPosted(0, 1);
  CHECK(t.rejectOldest(0) == 2);  // the same chunk, rejected on another rail
  CHECK_FALSE(t.done(0));
}

// A chunk re-sent after its rail failed may duplicate one that did land: the receiver completes
// the message without the copy and may not read it for a long time.
TEST_CASE("tracker: a message the receiver reports complete is done; its copies are leftovers",
          "[net][tracker]") {
  SendTracker t(3, 2, 16);
  t.start(0, plan(400, 100));
  for (int i = 0; i < 4; ++i) REQUIRE(t.placeNext(i % 2));  // chunks 0,2 on rail 0; 1,3 on 1
  t.setPosted(0, 2);
  t.setPosted(1, 2);
  REQUIRE(t.acknowledge(0, 2, [](const SendTracker::Entry&) {}));
  uint64_t bytes = 0;
  CHECK(t.railFailed(1, &bytes) == 2);  // chunks 1 and 3 did land, but no ack came back
  REQUIRE(t.placeNext(0));              // copy of chunk 1: transmitted
  REQUIRE(t.placeNext(2));              // copy of chunk 3: half-written on rail 2
  t.setPosted(0, 1);
  t.start(1, plan(200, 100));
  REQUIRE(t.placeNext(2));  // the next message's chunk, behind the copy
  CHECK_FALSE(t.done(0));
  CHECK_FALSE(t.completeByPeer(1, 0));  // chunk 1 of message 1 was never placed: a lie
  REQUIRE(t.completeByPeer(0, 1u << 2));
  CHECK(t.done(0));
  // Transmitted and half-written copies stay to match acknowledgements, but are not held.
  CHECK(t.queued(0) == 1);
  CHECK(t.heldBytes(0) == 0);
  CHECK(t.queued(2) == 2);
  CHECK(t.heldBytes(2) == 100);  // only message 1's chunk
  CHECK(t.entry(2, 0).leftover);
  CHECK_FALSE(t.entry(2, 1).leftover);
  // The slot is reused: a late acknowledgement of the leftover does not count for the new one.
  t.release(0);
  t.start(0, plan(100, 100));
  int leftovers = 0;
  REQUIRE(t.acknowledge(0, 1, [&](const SendTracker::Entry& e) { leftovers += e.leftover; }));
  CHECK(leftovers == 1);
  CHECK(t.acknowledged(0) == 0);
  CHECK_FALSE(t.done(0));
  // A failed rail drops leftovers instead of re-sending them.
  CHECK(t.railFailed(2, &bytes) == 1);
  CHECK(bytes == 100);
  SendTracker::Entry e;
  REQUIRE(t.peek(&e));
  CHECK(e.message == 1);
}

TEST_CASE("tracker: copies of a completed message not yet transmitted are dropped",
          "[net][tracker]") {
  SendTracker t(2, 1, 8);
  t.start(0, plan(300, 100));
  for (int i = 0; i < 3; ++i) REQUIRE(t.placeNext(1));
  t.setPosted(1, 1);
  uint64_t bytes = 0;
  t.railFailed(1, &bytes);
  REQUIRE(t.placeNext(0));  // one copy placed, two still in the re-send queue
  CHECK(t.resendQueued() == 2);
  REQUIRE(t.completeByPeer(0, 0));
  CHECK(t.queued(0) == 0);  // untransmitted: removed
  CHECK(t.resendQueued() == 0);
  SendTracker::Entry e;
  CHECK_FALSE(t.peek(&e));
  CHECK(t.done(0));
}

TEST_CASE("tracker: a completed message's original chunks stay held until acknowledged",
          "[net][tracker]") {
  // The watermark may overtake another rail's acknowledgements: those originals did land, so
  // their acknowledgements must come; a rail that never delivers them is broken.
  SendTracker t(2, 1, 8);
  t.start(0, plan(200, 100));
  REQUIRE(t.placeNext(0));
  REQUIRE(t.placeNext(1));
  t.setPosted(0, 1);
  t.setPosted(1, 1);
  REQUIRE(t.acknowledge(0, 1, [](const SendTracker::Entry&) {}));
  REQUIRE(t.completeByPeer(0, 0));
  CHECK(t.done(0));
  CHECK(t.heldBytes(1) == 100);
  REQUIRE(t.acknowledge(1, 1, [](const SendTracker::Entry&) {}));
  CHECK(t.heldBytes(1) == 0);
  CHECK(t.queued(1) == 0);
}

// A late copy: the chunk travels on two rails at once and the receiver keeps the first that
// lands. Only the original's acknowledgement counts; the message waits for its copies too, so
// that no copy is still queued (and later written from the buffer) once NCCL has it back.
TEST_CASE("tracker: a late copy never counts as its chunk; its message waits for it",
          "[net][tracker]") {
  SendTracker t(3, 2, 8);
  t.start(0, plan(200, 100));
  REQUIRE(t.placeNext(0, 1000, 3000));
  REQUIRE(t.placeNext(0, 2000, 5000));
  CHECK(t.entry(0, 1).placedNs == 2000);
  CHECK(t.entry(0, 1).dueNs == 5000);
  CHECK_FALSE(t.placeCopy(0, 1, 0, 7000));  // not on its own rail
  REQUIRE(t.placeCopy(0, 1, 1, 7000));
  CHECK_FALSE(t.placeCopy(0, 1, 2, 7000));  // one copy at a time
  CHECK_FALSE(t.placeCopy(1, 0, 2, 7000));  // never a copy of a copy
  CHECK(t.copiesQueued(0) == 1);
  CHECK(t.entry(1, 0).copy);
  CHECK(t.entry(1, 0).resend);
  CHECK(t.entry(1, 0).chunk == 1);
  CHECK(t.entry(1, 0).placedNs == 7000);
  CHECK(t.heldBytes(1) == 100);
  // The copy lands first: its acknowledgement does not count as chunk 1's.
  t.setPosted(1, 1);
  REQUIRE(t.acknowledge(1, 1, [](const SendTracker::Entry&) {}));
  CHECK(t.acknowledged(0) == 0);
  CHECK(t.copiesQueued(0) == 0);
  CHECK_FALSE(t.done(0));
  t.setPosted(0, 2);
  REQUIRE(t.acknowledge(0, 2, [](const SendTracker::Entry&) {}));
  CHECK(t.done(0));

  // The original is acknowledged first: the message is not done while its copy is queued.
  t.release(0);
  t.start(0, plan(100, 100));
  REQUIRE(t.placeNext(0));
  REQUIRE(t.placeCopy(0, 0, 2, 0));
  t.setPosted(0, 1);
  REQUIRE(t.acknowledge(0, 1, [](const SendTracker::Entry&) {}));
  CHECK(t.acknowledged(0) == 1);
  CHECK_FALSE(t.done(0));
  // The receiver's report completes it; the copy, never transmitted, is dropped and its bytes
  // are reported so that the striper stops counting them in flight.
  std::vector<std::pair<int, uint64_t>> dropped;
  auto onDropped = [](void* context, int rail, uint64_t bytes) {
    static_cast<std::vector<std::pair<int, uint64_t>>*>(context)->push_back({rail, bytes});
  };
  REQUIRE(t.completeByPeer(0, 0, onDropped, &dropped));
  CHECK(t.done(0));
  CHECK(t.queued(2) == 0);
  CHECK(dropped == std::vector<std::pair<int, uint64_t>>{{2, 100}});
}

TEST_CASE("tracker: a failed rail drops its late copies; a failed original is re-sent",
          "[net][tracker]") {
  SendTracker t(3, 1, 8);
  t.start(0, plan(200, 100));
  REQUIRE(t.placeNext(0));
  REQUIRE(t.placeNext(0));
  REQUIRE(t.placeCopy(0, 0, 1, 0));
  REQUIRE(t.placeCopy(0, 1, 2, 0));
  t.setPosted(1, 1);
  uint64_t bytes = 0;
  CHECK(t.railFailed(1, &bytes) == 0);  // chunk 0's original is still on rail 0
  CHECK(t.copiesQueued(0) == 1);
  SendTracker::Entry e;
  CHECK_FALSE(t.peek(&e));
  // Rail 0 fails: both originals are re-sent (and may be copied again); chunk 1's copy stays.
  CHECK(t.railFailed(0, &bytes) == 2);
  REQUIRE(t.placeNext(1));
  REQUIRE(t.placeNext(1));
  CHECK_FALSE(t.entry(1, 0).copied);
  REQUIRE(t.placeCopy(1, 0, 2, 0));
  t.setPosted(1, 2);
  REQUIRE(t.acknowledge(1, 2, [](const SendTracker::Entry&) {}));
  CHECK(t.acknowledged(0) == 2);
  CHECK_FALSE(t.done(0));  // two copies on rail 2 still to come
  t.setPosted(2, 2);
  REQUIRE(t.acknowledge(2, 2, [](const SendTracker::Entry&) {}));
  CHECK(t.done(0));
}

TEST_CASE("tracker: queue capacity is respected", "[net][tracker]") {
  SendTracker t(1, 1, 3);
  t.start(0, plan(1000, 100));
  CHECK(t.placeNext(0));
  CHECK(t.placeNext(0));
  CHECK(t.placeNext(0));
  CHECK(t.queueFull(0));
  CHECK_FALSE(t.placeNext(0));
  t.setPosted(0, 99);
  CHECK(t.posted(0) == 3);
}

TEST_CASE(
    "tracker: random failures, late copies and acknowledgements deliver every chunk exactly once",
    "[net][tracker]") {
  uint64_t seed = 99;
  auto rnd = [&] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(seed >> 33);
  };
  for (int round = 0; round < 50; ++round) {
    const int rails = 4;
    SendTracker t(rails, 8, 32);
    std::map<std::pair<uint32_t, uint32_t>, int> acks;      // (message, chunk) -> times acked
    std::map<std::pair<uint32_t, uint32_t>, int> copyAcks;  // ... as a late copy
    uint32_t expected = 0;
    for (uint32_t m = 0; m < 8; ++m) {
      ChunkPlan p = plan(100 * (1 + rnd() % 40), 100);
      t.start(m, p);
      expected += p.count;
    }
    int guard = 0;
    while (true) {
      bool allDone = true;
      for (uint32_t m = 0; m < 8; ++m) allDone = allDone && t.done(m);
      if (allDone) break;
      REQUIRE(++guard < 100000);
      int r = int(rnd() % rails);
      switch (rnd() % 5) {
        case 0:
        case 1:
          t.placeNext(r);
          break;
        case 2:
          t.setPosted(r, t.posted(r) + rnd() % 4);
          REQUIRE(t.acknowledge(r, rnd() % (t.posted(r) + 1), [&](const SendTracker::Entry& e) {
            if (e.copy) {
              copyAcks[{e.message, e.chunk}]++;
            } else {
              acks[{e.message, e.chunk}]++;
            }
          }));
          break;
        case 3:
          if (rnd() % 8 == 0) t.railFailed(r, nullptr);
          break;
        case 4:
          // A late copy of a random queued chunk on another rail.
          if (t.queued(r) > 0) {
            t.placeCopy(r, rnd() % t.queued(r), int((r + 1 + rnd() % (rails - 1)) % rails), 0);
          }
          break;
      }
      // A message is done only once every chunk's original was acknowledged, once, and no copy
      // of it is left in a queue (it would be written from a buffer NCCL got back).
      for (uint32_t m = 0; m < 8; ++m) {
        if (!t.done(m)) continue;
        REQUIRE(t.copiesQueued(m) == 0);
        for (int q = 0; q < rails; ++q) {
          for (uint32_t i = 0; i < t.queued(q); ++i) REQUIRE(t.entry(q, i).message != m);
        }
      }
    }
    CHECK(acks.size() == expected);
    for (auto& [key, n] : acks) REQUIRE(n == 1);
    CHECK(copyAcks.size() <= expected);
  }
}

TEST_CASE("matcher: sends match receives in order; descriptors may arrive in any order",
          "[net][matcher]") {
  ReceiveMatcher m(4);
  ReceiveMatcher::Slot s;
  CHECK(m.match(0, 10, &s) == ReceiveMatcher::Match::kWait);
  PostedReceive r1{1, 1, {100}, {7}};
  PostedReceive r0{0, 1, {50}, {7}};
  CHECK(m.offer(r1) == ReceiveMatcher::Offer::kStored);
  CHECK(m.match(7, 10, &s) == ReceiveMatcher::Match::kWait);  // receive 0 not announced yet
  CHECK(m.offer(r0) == ReceiveMatcher::Offer::kStored);
  CHECK(m.offer(r0) == ReceiveMatcher::Offer::kDuplicate);
  REQUIRE(m.match(7, 50, &s) == ReceiveMatcher::Match::kMatched);
  CHECK(s.seq == 0);
  CHECK(s.capacity == 50);
  CHECK(m.offer(r0) == ReceiveMatcher::Offer::kStale);
  CHECK(m.match(7, 101, &s) == ReceiveMatcher::Match::kTooLarge);
  CHECK(m.match(8, 10, &s) == ReceiveMatcher::Match::kTagMismatch);
  REQUIRE(m.match(7, 0, &s) == ReceiveMatcher::Match::kMatched);
  CHECK(s.seq == 1);
  CHECK(m.nextSeq() == 2);
}

TEST_CASE("matcher: multi-receive buffers are picked by tag", "[net][matcher]") {
  ReceiveMatcher m(32);
  PostedReceive r{0, 3, {10, 20, 30}, {5, 6, 5}};
  REQUIRE(m.offer(r) == ReceiveMatcher::Offer::kStored);
  ReceiveMatcher::Slot s;
  REQUIRE(m.match(6, 20, &s) == ReceiveMatcher::Match::kMatched);
  CHECK(s.buffer == 1);
  REQUIRE(m.match(5, 10, &s) == ReceiveMatcher::Match::kMatched);
  CHECK(s.buffer == 0);
  CHECK(m.match(6, 1, &s) == ReceiveMatcher::Match::kTagMismatch);  // tag 6 already used
  REQUIRE(m.match(5, 30, &s) == ReceiveMatcher::Match::kMatched);
  CHECK(s.buffer == 2);
  CHECK(m.nextSeq() == 1);
}

TEST_CASE("matcher: malformed or out-of-window descriptors are rejected", "[net][matcher]") {
  ReceiveMatcher m(4);
  CHECK(m.offer(PostedReceive{0, 0, {}, {}}) == ReceiveMatcher::Offer::kInvalid);
  CHECK(m.offer(PostedReceive{0, 9, {}, {}}) == ReceiveMatcher::Offer::kInvalid);
  CHECK(m.offer(PostedReceive{4, 1, {1}, {0}}) == ReceiveMatcher::Offer::kInvalid);
  CHECK(m.offer(PostedReceive{3, 1, {1}, {0}}) == ReceiveMatcher::Offer::kStored);
  CHECK(m.offer(PostedReceive{~uint64_t(0), 1, {1}, {0}}) == ReceiveMatcher::Offer::kInvalid);
}

// common/ring.h: the bounded queue every hot path uses. Single-threaded behaviour (capacity,
// FIFO, full and empty, wraparound, reset) and concurrent producers and consumers, which
// scripts/ap.sh test also runs under ThreadSanitizer (target ring_tests).
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <thread>
#include <vector>

#include "common/ring.h"

using autopilot::Ring;
using autopilot::RingProducers;

// Head and tail on their own cache lines: the ring is 64-byte aligned and a whole number of
// lines long, so neither shares a line with its neighbours.
static_assert(alignof(Ring<int>) == 64);
static_assert(sizeof(Ring<int>) % 64 == 0 && sizeof(Ring<int>) >= 3 * 64);

TEMPLATE_TEST_CASE_SIG("ring: capacity, FIFO, full drops, empty", "[ring]", ((RingProducers P), P),
                       RingProducers::kSingle, RingProducers::kMulti) {
  CHECK(Ring<int, P>::roundUp(0) == 2);
  CHECK(Ring<int, P>::roundUp(2) == 2);
  CHECK(Ring<int, P>::roundUp(1000) == 1024);
  CHECK(Ring<int, P>::roundUp(1024) == 1024);
  Ring<int, P> q(5);
  CHECK(q.capacity() == 8);
  int v = -1;
  CHECK_FALSE(q.pop(&v));
  for (int i = 0; i < 8; ++i) CHECK(q.push(i));
  CHECK_FALSE(q.push(99));  // full: rejected, nothing overwritten
  for (int i = 0; i < 8; ++i) {
    REQUIRE(q.pop(&v));
    CHECK(v == i);
  }
  CHECK_FALSE(q.pop(&v));
}

TEMPLATE_TEST_CASE_SIG("ring: wraparound over many laps keeps order", "[ring]",
                       ((RingProducers P), P), RingProducers::kSingle, RingProducers::kMulti) {
  Ring<uint64_t, P> q(4);
  uint64_t next = 0, expect = 0, v = 0;
  // Fill levels 1..4 in turn, for 1000 laps of the 4 cells.
  for (int round = 0; round < 1000; ++round) {
    int fill = 1 + round % 4;
    for (int i = 0; i < fill; ++i) REQUIRE(q.push(next++));
    if (fill == 4) CHECK_FALSE(q.push(12345));
    uint64_t out[4];
    size_t n = q.popMany(out, 4);
    REQUIRE(n == size_t(fill));
    for (size_t i = 0; i < n; ++i) CHECK(out[i] == expect++);
    CHECK_FALSE(q.pop(&v));
  }
}

TEST_CASE("ring: reset empties it and it keeps working", "[ring]") {
  Ring<int> q(4);
  for (int i = 0; i < 3; ++i) REQUIRE(q.push(i));
  q.reset();
  int v = -1;
  CHECK_FALSE(q.pop(&v));
  for (int i = 10; i < 14; ++i) CHECK(q.push(i));
  CHECK_FALSE(q.push(14));
  for (int i = 10; i < 14; ++i) {
    REQUIRE(q.pop(&v));
    CHECK(v == i);
  }
}

// Each element encodes (producer, index); the consumer checks that every element arrives
// exactly once and that each producer's elements arrive in its order.
static void runConcurrent(int producers, bool multi) {
  constexpr uint64_t kPerProducer = 200000;
  Ring<uint64_t, RingProducers::kMulti> mq(256);
  Ring<uint64_t, RingProducers::kSingle> sq(256);
  std::vector<uint64_t> nextOf(size_t(producers), 0);
  std::atomic<bool> ok{true};
  std::thread consumer([&] {
    uint64_t got = 0, x = 0;
    while (got < kPerProducer * uint64_t(producers)) {
      if (!(multi ? mq.pop(&x) : sq.pop(&x))) {
        std::this_thread::yield();
        continue;
      }
      size_t p = size_t(x >> 32);
      uint64_t i = x & 0xffffffffu;
      if (p >= nextOf.size() || nextOf[p] != i) ok = false;
      if (p < nextOf.size()) nextOf[p] = i + 1;
      ++got;
    }
  });
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer; ++i) {
        uint64_t x = (uint64_t(p) << 32) | i;
        while (!(multi ? mq.push(x) : sq.push(x))) std::this_thread::yield();
      }
    });
  }
  for (auto& t : threads) t.join();
  consumer.join();
  CHECK(ok.load());
  for (int p = 0; p < producers; ++p) CHECK(nextOf[size_t(p)] == kPerProducer);
}

TEST_CASE("ring: one producer, one consumer on separate threads", "[ring][concurrent]") {
  runConcurrent(1, /*multi=*/false);
}

TEST_CASE("ring: three producers, one consumer on separate threads", "[ring][concurrent]") {
  runConcurrent(3, /*multi=*/true);
}

// Chunk planning and the receiver's chunk bitmap.
#include <catch2/catch.hpp>

#include "net_plugin/core/chunk_bitmap.h"
#include "net_plugin/core/chunk_plan.h"

using namespace autopilot::net::core;

namespace {
void checkCovers(const ChunkPlan& p) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < p.count; ++i) {
    REQUIRE(p.offset(i) == sum);
    if (i + 1 < p.count) REQUIRE(p.length(i) == p.chunkBytes);
    REQUIRE(p.length(i) <= p.chunkBytes);
    sum += p.length(i);
  }
  REQUIRE(sum == p.totalBytes);
}
}  // namespace

TEST_CASE("small and empty messages travel whole", "[net][chunk]") {
  ChunkPolicy policy;
  for (uint64_t size :
       {uint64_t(0), uint64_t(1), uint64_t(8), uint64_t(4096), policy.wholeBelowBytes - 1}) {
    ChunkPlan p = planChunks(size, 4, policy);
    CHECK(p.count == 1);
    CHECK(p.length(0) == size);
    checkCovers(p);
  }
}

TEST_CASE("large messages are cut into aligned chunks, a few per rail", "[net][chunk]") {
  ChunkPolicy policy;
  for (int rails : {1, 2, 4, 8}) {
    for (uint64_t size : {uint64_t(128) << 10, uint64_t(1) << 20, uint64_t(3) << 20,
                          (uint64_t(64) << 20) + 17, uint64_t(1) << 30, uint64_t(1) << 40}) {
      ChunkPlan p = planChunks(size, rails, policy);
      INFO("size " << size << " rails " << rails);
      CHECK(p.chunkBytes % 4096 == 0);
      CHECK(p.count <= policy.maxChunks);
      CHECK(p.chunkBytes >= policy.minChunkBytes);
      if (size <= policy.maxChunkBytes * policy.maxChunks)
        CHECK(p.chunkBytes <= policy.maxChunkBytes);
      checkCovers(p);
    }
  }
  // 1 MiB over 4 rails: 4 chunks per rail would be 64 KiB each.
  ChunkPlan p = planChunks(1 << 20, 4, policy);
  CHECK(p.count == 16);
  // Over one rail: 256 KiB chunks (still pipelined and acknowledged piecewise).
  CHECK(planChunks(1 << 20, 1, policy).count == 4);
}

TEST_CASE("bitmap: new, duplicate, invalid; completes exactly once", "[net][chunk]") {
  ChunkBitmap b(100);
  CHECK_FALSE(b.complete());
  CHECK(b.mark(0, 3) == ChunkBitmap::Mark::kNew);
  CHECK(b.mark(0, 3) == ChunkBitmap::Mark::kDuplicate);
  CHECK(b.mark(1, 4) == ChunkBitmap::Mark::kInvalid);  // count disagrees
  CHECK(b.mark(3, 3) == ChunkBitmap::Mark::kInvalid);  // index out of range
  CHECK(b.mark(0, 0) == ChunkBitmap::Mark::kInvalid);
  CHECK(b.mark(0, 101) == ChunkBitmap::Mark::kInvalid);  // beyond capacity
  CHECK(b.check(2, 3) == ChunkBitmap::Mark::kNew);
  CHECK(b.mark(2, 3) == ChunkBitmap::Mark::kNew);
  CHECK_FALSE(b.complete());
  CHECK(b.mark(1, 3) == ChunkBitmap::Mark::kNew);
  CHECK(b.complete());
  CHECK(b.landed() == 3);
  CHECK(b.mark(1, 3) == ChunkBitmap::Mark::kDuplicate);
  CHECK(b.landed() == 3);
  b.reset();
  CHECK_FALSE(b.complete());
  CHECK_FALSE(b.has(0));
  CHECK(b.mark(0, 1) == ChunkBitmap::Mark::kNew);
  CHECK(b.complete());
}

TEST_CASE("bitmap: random arrival orders with duplicates complete exactly once", "[net][chunk]") {
  ChunkBitmap b(1024);
  uint64_t seed = 12345;
  auto rnd = [&] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(seed >> 33);
  };
  for (int round = 0; round < 200; ++round) {
    b.reset();
    uint32_t count = 1 + rnd() % 1024;
    int completions = 0;
    uint32_t news = 0;
    while (!b.complete()) {
      bool was = b.complete();
      if (b.mark(rnd() % count, count) == ChunkBitmap::Mark::kNew) ++news;
      if (!was && b.complete()) ++completions;
    }
    for (int i = 0; i < 50; ++i)
      CHECK(b.mark(rnd() % count, count) == ChunkBitmap::Mark::kDuplicate);
    CHECK(completions == 1);
    CHECK(news == count);
  }
}

// How a message is cut into chunks. A chunk is the unit of striping, acknowledgement and
// migration: it has a fixed offset and length in the message, so re-sending it on another rail
// after a failure lands the same bytes at the same place (idempotent on the receiver).
#pragma once

#include <cstdint>

namespace autopilot::net::core {

struct ChunkPolicy {
  uint64_t wholeBelowBytes = 128 << 10;  // smaller messages travel whole, on one rail
  uint64_t minChunkBytes = 64 << 10;
  uint64_t maxChunkBytes = 1 << 20;
  uint32_t maxChunks = 1024;   // bounds the receiver's per-message bitmap
  uint32_t chunksPerRail = 4;  // target number of chunks per usable rail (balance vs overhead)
};

struct ChunkPlan {
  uint64_t totalBytes = 0;
  uint64_t chunkBytes = 0;  // length of every chunk but the last
  uint32_t count = 1;       // >= 1: a zero-byte message is one empty chunk

  uint64_t offset(uint32_t i) const { return uint64_t(i) * chunkBytes; }
  uint64_t length(uint32_t i) const { return i + 1 < count ? chunkBytes : totalBytes - offset(i); }
};

// Chunk size: about `chunksPerRail` chunks per usable rail, clamped to [min, max], rounded up
// to 4 KiB, then grown until the count fits maxChunks. Deterministic in its inputs.
ChunkPlan planChunks(uint64_t totalBytes, int usableRails, const ChunkPolicy& policy);

}  // namespace autopilot::net::core

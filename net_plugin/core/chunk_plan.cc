#include "net_plugin/core/chunk_plan.h"

#include <algorithm>

namespace autopilot::net::core {

ChunkPlan planChunks(uint64_t totalBytes, int usableRails, const ChunkPolicy& policy) {
  ChunkPlan plan;
  plan.totalBytes = totalBytes;
  if (totalBytes < policy.wholeBelowBytes || totalBytes <= policy.minChunkBytes) {
    plan.chunkBytes = totalBytes;
    plan.count = 1;
    return plan;
  }
  constexpr uint64_t kAlign = 4096;
  uint64_t rails = uint64_t(std::max(usableRails, 1));
  uint64_t target = totalBytes / (rails * std::max<uint32_t>(policy.chunksPerRail, 1));
  uint64_t minChunk = std::max<uint64_t>(policy.minChunkBytes, kAlign);
  uint64_t maxChunk = std::max(policy.maxChunkBytes, minChunk);
  uint64_t chunk = std::clamp(target, minChunk, maxChunk);
  uint32_t maxChunks = std::max<uint32_t>(policy.maxChunks, 1);
  uint64_t floorForCount = (totalBytes + maxChunks - 1) / maxChunks;
  chunk = std::max(chunk, floorForCount);
  chunk = (chunk + kAlign - 1) / kAlign * kAlign;
  plan.chunkBytes = chunk;
  plan.count = uint32_t((totalBytes + chunk - 1) / chunk);
  return plan;
}

}  // namespace autopilot::net::core

#include "net_plugin/core/recv_engine.h"

#include <algorithm>
#include <climits>

#include "common/clock.h"
#include "common/log.h"
#include "net_plugin/core/engine_timing.h"

namespace autopilot::net::core {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;

std::vector<int> telemetryIds(const std::vector<RailHealth::RailInfo>& rails) {
  std::vector<int> ids;
  for (const auto& r : rails) ids.push_back(r.telemetryId);
  return ids;
}

}  // namespace

RecvEngine::RecvEngine(uint32_t magic, uint64_t commId, const char* label, const CommConfig& config,
                       const std::vector<RailHealth::RailInfo>& rails, int slots)
    : CommBase(magic),
      commId_(commId),
      label_(label),
      config_(config),
      nRails_(int(rails.size())),
      nSlots_(slots),
      slots_(new RecvRequest[size_t(slots)]) {
  health_.init(commId_, "recv", rails, config_.health, monotonicNs());
  metrics_.init(telemetryIds(rails));
  for (int i = 0; i < nSlots_; ++i) {
    RecvRequest& q = slots_[i];
    q.owner = this;
    q.kind = RequestKind::kRecv;
    for (auto& b : q.bitmaps) b = ChunkBitmap(config_.chunks.maxChunks);
  }
}

RecvEngine::~RecvEngine() = default;

void RecvEngine::failComm(abi::Result error, const std::string& reason) {
  if (failed_ != abi::kSuccess) return;
  failed_ = error;
  AP_WARN(kFlags, "comm 0x%llx %s: %s; every pending receive fails", (unsigned long long)commId_,
          label_, reason.c_str());
}

abi::Result RecvEngine::postReceive(int n, void* const* data, const size_t* sizes, const int* tags,
                                    RecvRequest** request) {
  *request = nullptr;
  if (n < 1 || n > config_.maxRecvs) {
    AP_WARN(kFlags, "irecv with %d buffers: this plugin takes 1 to %d", n, config_.maxRecvs);
    return abi::kInvalidArgument;
  }
  for (int i = 0; i < n; ++i) {
    if (sizes[i] > abi::kMaxNetSizeBytes) {
      AP_WARN(kFlags, "irecv buffer of %zu bytes: more than a message may have", sizes[i]);
      return abi::kInvalidArgument;
    }
  }
  RecvRequest& q = slots_[nextSeq_ % uint64_t(nSlots_)];
  if (q.state != RecvRequest::State::kFree || !slotReusable(q)) return abi::kSuccess;
  q.state = RecvRequest::State::kPosted;
  q.seq = nextSeq_++;
  q.n = n;
  q.completeMask = 0;
  for (int i = 0; i < n; ++i) {
    q.data[i] = static_cast<uint8_t*>(data[i]);
    q.sizes[i] = sizes[i];
    q.tags[i] = tags[i];
    q.received[i] = 0;
    q.bitmaps[i].reset();
  }
  posted_++;
  *request = &q;
  // A broken comm still answers irecv with success: the error reaches NCCL through test() of
  // the request (the transport announces nothing then).
  return abi::kSuccess;
}

abi::Result RecvEngine::test(RecvRequest* q, int* done, int* sizes) {
  *done = 0;
  if (q->state == RecvRequest::State::kFree) {
    AP_WARN_ONCE(kFlags, "test() on a receive request that is not in flight");
    return abi::kInvalidArgument;
  }
  progress(monotonicNs());
  if (q->state == RecvRequest::State::kDone) {
    *done = 1;
    if (sizes) {
      for (int i = 0; i < q->n; ++i) sizes[i] = int(std::min<uint64_t>(q->received[i], INT_MAX));
    }
    q->state = RecvRequest::State::kFree;
    posted_--;
    if (posted_ == 0) passes_.idle();
    return abi::kSuccess;
  }
  return failed_;
}

ChunkBitmap::Mark RecvEngine::landChunk(int r, RecvRequest& q, uint32_t buffer, uint32_t chunk,
                                        uint32_t chunks, uint64_t bytes) {
  ChunkBitmap::Mark m = q.bitmaps[buffer].mark(chunk, chunks);
  if (m != ChunkBitmap::Mark::kNew) return m;
  q.received[buffer] += bytes;
  if (q.received[buffer] > q.sizes[buffer]) return ChunkBitmap::Mark::kInvalid;
  if (auto* c = metrics_.at(r)) {
    RailMetrics::add(c->chunksReceived, 1);
    RailMetrics::add(c->bytesReceived, bytes);
  }
  if (q.bitmaps[buffer].complete()) {
    q.completeMask |= uint8_t(1u << buffer);
    if (q.completeMask == uint8_t((1u << q.n) - 1)) q.state = RecvRequest::State::kDone;
  }
  return m;
}

int RecvEngine::controlRail() const {
  if (lastDataRail_ >= 0 && health_.live(lastDataRail_) && railCarries(lastDataRail_)) {
    return lastDataRail_;
  }
  int fallback = -1;
  for (int r = 0; r < nRails_; ++r) {
    if (!health_.live(r) || !railCarries(r)) continue;
    auto s = health_.state(r);
    if (s == RailHealth::State::kHealthy || s == RailHealth::State::kDegraded) return r;
    if (fallback < 0) fallback = r;
  }
  return fallback;
}

void RecvEngine::evaluateHealth(uint64_t nowNs) {
  if (nowNs >= nextEvaluateNs_) {
    nextEvaluateNs_ = nowNs + kEvaluateNs;
    health_.evaluate(nowNs, nullptr, nullptr);
  }
  uint64_t noRailNs = health_.noLiveRailForNs(nowNs);
  if (noRailNs != 0 && noRailNs >= config_.peerTimeoutNs && outstanding()) {
    failComm(abi::kRemoteError, "no rail left for " + std::to_string(noRailNs / 1000000) +
                                    " ms (the sender is gone or every link is down)");
  }
}

}  // namespace autopilot::net::core

// An in-memory Transport for testing the demo's collectives: N ranks on N threads, one FIFO per
// directed connection, sends matched to receives in posting order (NCCL's net semantics).
// Posting is refused at random and completion is delayed at random, so the tests exercise the
// retry paths and out-of-order completion across connections.
#pragma once

#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "bench/demo/transport.h"

namespace autopilot::demo::testing {

class MemoryFabric {
 public:
  explicit MemoryFabric(int nRanks) : n_(nRanks), links_(size_t(nRanks * nRanks)) {}

  struct Request {
    bool isSend;
    const void* src = nullptr;
    void* dst = nullptr;
    size_t bytes = 0;
    bool matched = false;
    int delay = 0;  // test() calls before it reports completion after matching
  };

  Request* post(int from, int to, bool isSend, const void* src, void* dst, size_t bytes,
                int delay) {
    std::lock_guard<std::mutex> lock(mu_);
    Link& l = links_[size_t(from * n_ + to)];
    auto req = std::make_unique<Request>();
    req->isSend = isSend;
    req->src = src;
    req->dst = dst;
    req->bytes = bytes;
    req->delay = delay;
    Request* raw = req.get();
    (isSend ? l.sends : l.recvs).push_back(raw);
    owned_.push_back(std::move(req));
    while (!l.sends.empty() && !l.recvs.empty()) {
      Request* s = l.sends.front();
      Request* r = l.recvs.front();
      l.sends.pop_front();
      l.recvs.pop_front();
      if (s->bytes > r->bytes) throw TransportError("send larger than the posted receive");
      std::memcpy(r->dst, s->src, s->bytes);
      s->matched = r->matched = true;
      ++l.matchedTransfers;
    }
    return raw;
  }

  bool complete(Request* r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!r->matched) return false;
    return r->delay-- <= 0;
  }

  uint64_t matched(int from, int to) {
    std::lock_guard<std::mutex> lock(mu_);
    return links_[size_t(from * n_ + to)].matchedTransfers;
  }

 private:
  struct Link {
    std::deque<Request*> sends, recvs;
    uint64_t matchedTransfers = 0;
  };
  int n_;
  std::mutex mu_;
  std::vector<Link> links_;
  std::vector<std::unique_ptr<Request>> owned_;
};

class MemoryTransport : public Transport {
 public:
  MemoryTransport(MemoryFabric& fabric, int rank, int nRanks, unsigned seed)
      : fabric_(fabric), rank_(rank), n_(nRanks), rng_(seed) {}
  int rank() const override { return rank_; }
  int nRanks() const override { return n_; }
  void* isend(int peer, const void* data, size_t bytes) override {
    if (refuse()) return nullptr;
    return fabric_.post(rank_, peer, true, data, nullptr, bytes, delay());
  }
  void* irecv(int peer, void* data, size_t bytes) override {
    if (refuse()) return nullptr;
    return fabric_.post(peer, rank_, false, nullptr, data, bytes, delay());
  }
  bool test(void* request) override {
    return fabric_.complete(static_cast<MemoryFabric::Request*>(request));
  }

 private:
  bool refuse() { return std::uniform_int_distribution<int>(0, 9)(rng_) == 0; }
  int delay() { return std::uniform_int_distribution<int>(0, 3)(rng_); }
  MemoryFabric& fabric_;
  int rank_, n_;
  std::mt19937 rng_;
};

}  // namespace autopilot::demo::testing

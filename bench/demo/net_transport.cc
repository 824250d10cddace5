#include "bench/demo/net_transport.h"

#include <sched.h>

#include <array>
#include <chrono>
#include <cstring>

namespace autopilot::demo {

NetTransport::NetTransport(host::HostNet& net, void* netContext, int device, int rank, int nRanks)
    : net_(net),
      ctx_(netContext),
      device_(device),
      rank_(rank),
      nRanks_(nRanks),
      sendComms_(size_t(nRanks), nullptr),
      recvComms_(size_t(nRanks), nullptr) {}

NetTransport::~NetTransport() {
  for (Region& r : regions_) {
    for (int p = 0; p < nRanks_; ++p) {
      if (r.sendHandles[size_t(p)]) net_.deregMr(sendComms_[size_t(p)], r.sendHandles[size_t(p)]);
      if (r.recvHandles[size_t(p)]) net_.deregMr(recvComms_[size_t(p)], r.recvHandles[size_t(p)]);
    }
  }
  for (void* c : sendComms_) {
    if (c) net_.closeSend(c);
  }
  for (void* c : recvComms_) {
    if (c) net_.closeRecv(c);
  }
}

void NetTransport::fail(const char* what, int peer, abi::Result r) const {
  throw TransportError(std::string(what) + " with rank " + std::to_string(peer) +
                       " failed: ncclResult " + std::to_string(int(r)));
}

void NetTransport::connectAll(const Publish& publish, const Collect& collect, int timeoutMs) {
  std::vector<void*> listenComms(size_t(nRanks_), nullptr);
  for (int p = 0; p < nRanks_; ++p) {
    if (p == rank_) continue;
    char handle[abi::kNetHandleMaxSize] = {};
    abi::Result r = net_.listen(ctx_, device_, handle, &listenComms[size_t(p)]);
    if (r != abi::kSuccess || listenComms[size_t(p)] == nullptr) fail("listen", p, r);
    publish(p, handle, sizeof(handle));
  }
  std::vector<std::array<char, abi::kNetHandleMaxSize>> peerHandles(static_cast<size_t>(nRanks_));
  for (int p = 0; p < nRanks_; ++p) {
    if (p != rank_) collect(p, peerHandles[size_t(p)].data(), abi::kNetHandleMaxSize);
  }
  // Both directions progress together: a blocking connect would starve the peer's accept.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    bool pending = false;
    for (int p = 0; p < nRanks_; ++p) {
      if (p == rank_) continue;
      if (sendComms_[size_t(p)] == nullptr) {
        abi::Result r =
            net_.connect(ctx_, device_, peerHandles[size_t(p)].data(), &sendComms_[size_t(p)]);
        if (r != abi::kSuccess) fail("connect", p, r);
        pending |= sendComms_[size_t(p)] == nullptr;
      }
      if (recvComms_[size_t(p)] == nullptr) {
        abi::Result r = net_.accept(listenComms[size_t(p)], &recvComms_[size_t(p)]);
        if (r != abi::kSuccess) fail("accept", p, r);
        pending |= recvComms_[size_t(p)] == nullptr;
      }
    }
    if (!pending) break;
    if (std::chrono::steady_clock::now() > deadline) {
      throw TransportError("connection setup timed out");
    }
    sched_yield();
  }
  for (void* l : listenComms) {
    if (l) net_.closeListen(l);  // NCCL closes a listen comm as soon as its accept completed
  }
}

void NetTransport::registerRegion(void* data, size_t bytes) {
  Region r{static_cast<char*>(data), bytes, std::vector<void*>(size_t(nRanks_), nullptr),
           std::vector<void*>(size_t(nRanks_), nullptr)};
  for (int p = 0; p < nRanks_; ++p) {
    if (p == rank_) continue;
    abi::Result s =
        net_.regMr(sendComms_[size_t(p)], data, bytes, abi::kPtrHost, &r.sendHandles[size_t(p)]);
    if (s != abi::kSuccess) fail("regMr (send)", p, s);
    s = net_.regMr(recvComms_[size_t(p)], data, bytes, abi::kPtrHost, &r.recvHandles[size_t(p)]);
    if (s != abi::kSuccess) fail("regMr (recv)", p, s);
  }
  regions_.push_back(std::move(r));
}

void* NetTransport::mhandleFor(const void* data, int peer, bool isSend) const {
  const char* p = static_cast<const char*>(data);
  for (const Region& r : regions_) {
    if (p >= r.begin && p <= r.begin + r.bytes) {
      return isSend ? r.sendHandles[size_t(peer)] : r.recvHandles[size_t(peer)];
    }
  }
  throw TransportError("buffer outside every registered region");
}

void* NetTransport::track(const Pending& p) {
  size_t slot;
  if (!freeSlots_.empty()) {
    slot = freeSlots_.back();
    freeSlots_.pop_back();
    pending_[slot] = p;
  } else {
    slot = pending_.size();
    pending_.push_back(p);
  }
  return reinterpret_cast<void*>(slot + 1);  // never NULL: NULL means "not posted"
}

void* NetTransport::isend(int peer, const void* data, size_t bytes) {
  void* request = nullptr;
  abi::Result r = net_.isend(sendComms_[size_t(peer)], const_cast<void*>(data), bytes, rank_,
                             mhandleFor(data, peer, true), nullptr, &request);
  if (r != abi::kSuccess) fail("isend", peer, r);
  return request ? track(Pending{request, true, peer}) : nullptr;
}

void* NetTransport::irecv(int peer, void* data, size_t bytes) {
  void* request = nullptr;
  size_t sizes[1] = {bytes};
  int tags[1] = {peer};
  void* buffers[1] = {data};
  void* mhandles[1] = {mhandleFor(data, peer, false)};
  void* phandles[1] = {nullptr};
  abi::Result r =
      net_.irecv(recvComms_[size_t(peer)], 1, buffers, sizes, tags, mhandles, phandles, &request);
  if (r != abi::kSuccess) fail("irecv", peer, r);
  return request ? track(Pending{request, false, peer}) : nullptr;
}

bool NetTransport::test(void* handle) {
  size_t slot = reinterpret_cast<size_t>(handle) - 1;
  Pending& p = pending_.at(slot);
  int done = 0;
  int sizes[abi::kProxyMaxSubs] = {};  // NCCL passes one int for sends, 64 for receives
  abi::Result r = net_.test(p.request, &done, sizes);
  if (r != abi::kSuccess) fail(p.isSend ? "send" : "receive", p.peer, r);
  if (!done) return false;
  freeSlots_.push_back(slot);
  return true;
}

}  // namespace autopilot::demo

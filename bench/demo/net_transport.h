// The demo's Transport over a net plugin loaded through the plugin-host harness, driven the way
// NCCL's proxy drives it: one send comm and one receive comm per peer, non-blocking
// connect/accept polled until ready, buffers registered once, isend/irecv retried while the
// plugin returns a NULL request, test() as the only progress hook.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/demo/transport.h"
#include "common/host/plugin_host.h"

namespace autopilot::demo {

class NetTransport : public Transport {
 public:
  // Exchanges listen handles: `publish(peer, handle)` must deliver our handle for `peer` to it,
  // and `collect(peer, handle)` must return the handle `peer` published for us (blocking).
  using Publish = std::function<void(int peer, const void* handle, size_t bytes)>;
  using Collect = std::function<void(int peer, void* handle, size_t bytes)>;

  NetTransport(host::HostNet& net, void* netContext, int device, int rank, int nRanks);
  ~NetTransport() override;

  // Sets up every connection; throws TransportError on failure or after `timeoutMs`.
  void connectAll(const Publish& publish, const Collect& collect, int timeoutMs);
  // Registers [data, data+bytes) with every comm (once, before transfers use it).
  void registerRegion(void* data, size_t bytes);

  int rank() const override { return rank_; }
  int nRanks() const override { return nRanks_; }
  void* isend(int peer, const void* data, size_t bytes) override;
  void* irecv(int peer, void* data, size_t bytes) override;
  bool test(void* request) override;

 private:
  struct Region {
    char* begin;
    size_t bytes;
    std::vector<void*> sendHandles;  // per peer
    std::vector<void*> recvHandles;
  };
  struct Pending {
    void* request;
    bool isSend;
    int peer;
  };
  void* track(const Pending& p);
  void* mhandleFor(const void* data, int peer, bool isSend) const;
  void fail(const char* what, int peer, abi::Result r) const;

  host::HostNet& net_;
  void* ctx_;
  int device_;
  int rank_;
  int nRanks_;
  std::vector<void*> sendComms_, recvComms_;
  std::vector<Region> regions_;
  std::vector<Pending> pending_;  // requests handed out, recycled by slot
  std::vector<size_t> freeSlots_;
};

}  // namespace autopilot::demo

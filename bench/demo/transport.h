// What the demo's collectives need from a network: per-peer, non-blocking, ordered
// point-to-point transfers, the way NCCL's proxy uses a net plugin (sends on a connection match
// receives on it in posting order; posting may be refused for now; test() drives progress).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace autopilot::demo {

// A transfer failed for good (the net plugin reported an error: no path left).
class TransportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int nRanks() const = 0;
  // Post a transfer with `peer`; returns an opaque request, or nullptr when it cannot be posted
  // now (retry after driving progress). Buffers stay untouched by the caller until completion.
  virtual void* isend(int peer, const void* data, size_t bytes) = 0;
  virtual void* irecv(int peer, void* data, size_t bytes) = 0;
  // True once the request completed (it is then released). Throws TransportError on failure.
  virtual bool test(void* request) = 0;
};

}  // namespace autopilot::demo

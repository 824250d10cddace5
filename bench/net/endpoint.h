// NetEndpoint: one process's view of the net plugin, loaded through the plugin-host harness
// exactly as NCCL loads it, and driven as NCCL's proxy drives it: connect/accept polled until
// the comm is non-NULL, isend/irecv retried while the request is NULL, test() as the only
// progress hook. Every wait has a deadline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/abi/net_abi.h"
#include "common/host/plugin_host.h"

namespace autopilot::bench {

class NetEndpoint {
 public:
  explicit NetEndpoint(int maxNetVersion = 11, uint64_t commId = 0x5eed);
  ~NetEndpoint();
  NetEndpoint(const NetEndpoint&) = delete;
  NetEndpoint& operator=(const NetEndpoint&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  host::HostNet* net() { return net_; }
  void* context() const { return ctx_; }
  int devices() const { return devices_; }

  abi::Result listen(int dev, void* handle, void** listenComm);
  // Polls accept/connect until the comm is ready, an error, or the deadline (kInternalError
  // with error() set).
  abi::Result accept(void* listenComm, void** recvComm, double timeoutSec);
  abi::Result connect(int dev, void* handle, void** sendComm, double timeoutSec);

  // Post, retrying while the plugin answers "not now" (NULL request).
  abi::Result isend(void* comm, void* data, size_t size, int tag, void** request,
                    double timeoutSec = 10);
  abi::Result irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** request,
                    double timeoutSec = 10, bool optionalCompletionHint = false);
  // Tests until done, an error, or the deadline.
  abi::Result wait(void* request, int* sizes, double timeoutSec);

 private:
  std::unique_ptr<host::PluginHost> host_;
  host::HostNet* net_ = nullptr;
  void* ctx_ = nullptr;
  int devices_ = 0;
  bool ok_ = false;
  std::string error_;
};

double nowSeconds();

}  // namespace autopilot::bench

#include "bench/net/endpoint.h"

#include <chrono>
#include <cstring>

#include "common/host/log_capture.h"

namespace autopilot::bench {

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

NetEndpoint::NetEndpoint(int maxNetVersion, uint64_t commId) {
  host::PluginHost::Options o;
  o.netPlugin = "autopilot";
  o.tunerPlugin = "none";
  o.profilerPlugin = "none";
  o.maxNetVersion = maxNetVersion;
  host_ = std::make_unique<host::PluginHost>(o);
  if (!host_->loadNet()) {
    error_ = "the net plugin did not load";
    return;
  }
  net_ = host_->net();
  abi::NetCommConfigV11 config{-1};
  if (net_->init(&ctx_, commId, &config, host::LogCapture::logger(), nullptr) != abi::kSuccess) {
    error_ = "net init failed";
    return;
  }
  if (net_->devices(&devices_) != abi::kSuccess || devices_ < 1) {
    error_ = "the net plugin reports no device";
    return;
  }
  ok_ = true;
}

NetEndpoint::~NetEndpoint() {
  if (net_ && ctx_) net_->finalize(ctx_);
  if (host_) host_->unloadAll();
}

abi::Result NetEndpoint::listen(int dev, void* handle, void** listenComm) {
  std::memset(handle, 0, abi::kNetHandleMaxSize);
  return net_->listen(ctx_, dev, handle, listenComm);
}

abi::Result NetEndpoint::accept(void* listenComm, void** recvComm, double timeoutSec) {
  double deadline = nowSeconds() + timeoutSec;
  *recvComm = nullptr;
  while (true) {
    abi::Result r = net_->accept(listenComm, recvComm);
    if (r != abi::kSuccess || *recvComm != nullptr) return r;
    if (nowSeconds() > deadline) {
      error_ = "accept timed out";
      return abi::kInternalError;
    }
  }
}

abi::Result NetEndpoint::connect(int dev, void* handle, void** sendComm, double timeoutSec) {
  double deadline = nowSeconds() + timeoutSec;
  *sendComm = nullptr;
  while (true) {
    abi::Result r = net_->connect(ctx_, dev, handle, sendComm);
    if (r != abi::kSuccess || *sendComm != nullptr) return r;
    if (nowSeconds() > deadline) {
      error_ = "connect timed out";
      return abi::kInternalError;
    }
  }
}

abi::Result NetEndpoint::isend(void* comm, void* data, size_t size, int tag, void** request,
                               double timeoutSec) {
  double deadline = nowSeconds() + timeoutSec;
  while (true) {
    *request = reinterpret_cast<void*>(0xbad);  // stale value: the plugin must overwrite it
    abi::Result r = net_->isend(comm, data, size, tag, comm, nullptr, request);
    if (r != abi::kSuccess || *request != nullptr) return r;
    if (nowSeconds() > deadline) {
      error_ = "isend kept returning NULL";
      return abi::kInternalError;
    }
  }
}

abi::Result NetEndpoint::irecv(void* comm, int n, void** data, size_t* sizes, int* tags,
                               void** request, double timeoutSec, bool optionalCompletionHint) {
  double deadline = nowSeconds() + timeoutSec;
  void* mh[8] = {comm, comm, comm, comm, comm, comm, comm, comm};
  while (true) {
    *request = optionalCompletionHint ? reinterpret_cast<void*>(abi::kNetOptionalRecvCompletion)
                                      : reinterpret_cast<void*>(0xbad);
    abi::Result r = net_->irecv(comm, n, data, sizes, tags, mh, nullptr, request);
    if (r != abi::kSuccess || *request != nullptr) return r;
    if (nowSeconds() > deadline) {
      error_ = "irecv kept returning NULL";
      return abi::kInternalError;
    }
  }
}

abi::Result NetEndpoint::wait(void* request, int* sizes, double timeoutSec) {
  double deadline = nowSeconds() + timeoutSec;
  int local[abi::kProxyMaxSubs] = {};
  while (true) {
    int done = 0;
    abi::Result r = net_->test(request, &done, sizes ? sizes : local);
    if (r != abi::kSuccess) return r;
    if (done) return abi::kSuccess;
    if (nowSeconds() > deadline) {
      error_ = "request did not complete in time";
      return abi::kInternalError;
    }
  }
}

}  // namespace autopilot::bench

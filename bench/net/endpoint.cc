#include "bench/net/endpoint.h"

#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/host/log_capture.h"

namespace autopilot::bench {

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

NetEndpoint::NetEndpoint(int maxNetVersion, uint64_t commId) {
  const char* yield = std::getenv("AUTOPILOT_HARNESS_YIELD");
  yieldWhenIdle_ = yield != nullptr && std::strcmp(yield, "1") == 0;
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

void* NetEndpoint::registerMemory(void* comm, void* data, size_t size) {
  if (size == 0) return nullptr;
  void* mhandle = nullptr;
  if (net_->regMr(comm, data, size, abi::kPtrHost, &mhandle) != abi::kSuccess) return nullptr;
  return mhandle;
}

void NetEndpoint::deregisterMemory(void* comm, void* mhandle) {
  if (mhandle != nullptr) net_->deregMr(comm, mhandle);
}

abi::Result NetEndpoint::isend(void* comm, void* data, size_t size, int tag, void** request,
                               double timeoutSec, void* mhandle) {
  double deadline = nowSeconds() + timeoutSec;
  if (mhandle == nullptr) mhandle = comm;
  while (true) {
    *request = reinterpret_cast<void*>(0xbad);  // stale value: the plugin must overwrite it
    abi::Result r = net_->isend(comm, data, size, tag, mhandle, nullptr, request);
    if (r != abi::kSuccess || *request != nullptr) return r;
    if (nowSeconds() > deadline) {
      error_ = "isend kept returning NULL";
      return abi::kInternalError;
    }
  }
}

abi::Result NetEndpoint::irecv(void* comm, int n, void** data, size_t* sizes, int* tags,
                               void** request, double timeoutSec, bool optionalCompletionHint,
                               void** mhandles) {
  double deadline = nowSeconds() + timeoutSec;
  void* mh[8] = {comm, comm, comm, comm, comm, comm, comm, comm};
  for (int i = 0; mhandles != nullptr && i < n && i < 8; ++i) {
    if (mhandles[i] != nullptr) mh[i] = mhandles[i];
  }
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

abi::Result NetEndpoint::test(void* request, int* done, int* sizes) {
  abi::Result r = net_->test(request, done, sizes);
  if (yieldWhenIdle_ && r == abi::kSuccess && !*done) sched_yield();
  return r;
}

abi::Result NetEndpoint::wait(void* request, int* sizes, double timeoutSec) {
  double deadline = nowSeconds() + timeoutSec;
  int local[abi::kProxyMaxSubs] = {};
  while (true) {
    int done = 0;
    abi::Result r = test(request, &done, sizes ? sizes : local);
    if (r != abi::kSuccess) return r;
    if (done) return abi::kSuccess;
    if (nowSeconds() > deadline) {
      error_ = "request did not complete in time";
      return abi::kInternalError;
    }
  }
}

}  // namespace autopilot::bench

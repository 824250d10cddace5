#include "net_plugin/transport/ibverbs/transport.h"

#include <algorithm>
#include <memory>

#include "common/log.h"
#include "net_plugin/core/pending_connects.h"
#include "net_plugin/core/transport_base.h"
#include "net_plugin/transport/ibverbs/connection.h"
#include "net_plugin/transport/ibverbs/gpu_direct.h"

namespace autopilot::net::ib {

namespace {

constexpr unsigned long kFlags = abi::subsys::kNet;
FlushRequest gFlushDone;  // iflush with nothing to read: complete at once

using core::commOf;

// The comm's rails, for a registration on either end.
bool commRails(void* comm, const int** rails, int* n) {
  auto* base = static_cast<CommBase*>(comm);
  if (base != nullptr && base->magic == SendComm::kMagic) {
    *rails = static_cast<SendComm*>(base)->railIds();
    *n = static_cast<SendComm*>(base)->railCount();
    return true;
  }
  if (base != nullptr && base->magic == RecvComm::kMagic) {
    *rails = static_cast<RecvComm*>(base)->railIds();
    *n = static_cast<RecvComm*>(base)->railCount();
    return true;
  }
  return false;
}

struct Context : core::TransportContext {
  core::PendingConnects<Connector> connects;
};

class IbTransport final : public core::TransportBase<IbRails, SendComm, RecvComm, ListenComm> {
 public:
  const char* name() const override { return "RDMA (ibverbs)"; }

  std::unique_ptr<core::TransportContext> newContext() override {
    return std::make_unique<Context>();
  }

  abi::Result getProperties(int dev, DeviceProperties* props) override {
    const core::NetDevice* d = device(dev);
    if (d == nullptr) return abi::kInvalidArgument;
    IbRails& ib = IbRails::instance();
    commonProperties(*d, dev, props);
    uint64_t maxMessage = UINT64_MAX;
    for (int r : d->rails) maxMessage = std::min(maxMessage, ib.rails()[size_t(r)].maxMessageBytes);
    // A message is at most maxChunks chunks of at most one RDMA message each.
    uint64_t maxBytes = maxMessage * core::commConfig().chunks.maxChunks;
    props->ptrSupport = abi::kPtrHost | (gpuDirectUsable() ? abi::kPtrCuda | abi::kPtrDmaBuf : 0);
    props->port = d->rails.empty() ? 1 : ib.rails()[size_t(d->rails[0])].port;
    props->maxComms = ib.maxComms(*d);
    props->maxP2pBytes = size_t(std::min<uint64_t>(abi::kMaxNetSizeBytes, maxBytes));
    props->maxCollBytes = size_t(std::min<uint64_t>(abi::kMaxCollNetSize, maxBytes));
    return abi::kSuccess;
  }

  abi::Result listen(uint64_t commId, int dev, int trafficClass, void* handle,
                     void** listenComm) override {
    IbRails::instance().ensureDiscovered();
    auto comm = std::make_unique<ListenComm>(commId, dev, trafficClass);
    abi::Result r = comm->listen(handle);
    if (r != abi::kSuccess) return r;
    *listenComm = static_cast<CommBase*>(comm.release());
    return abi::kSuccess;
  }

  abi::Result connect(core::TransportContext& ctx, uint64_t commId, int dev, int trafficClass,
                      void* handle, void** sendComm) override {
    IbRails::instance().ensureDiscovered();
    return core::connectStep<SendComm>(
        static_cast<Context&>(ctx).connects, handle,
        [&](std::unique_ptr<Connector>* fresh) {
          *fresh = std::make_unique<Connector>(commId, dev, trafficClass);
          return (*fresh)->start(static_cast<const uint8_t*>(handle));
        },
        sendComm);
  }

  abi::Result regMr(void* comm, void* data, size_t size, int type, uint64_t offset, int dmabufFd,
                    void** mhandle) override {
    const int* rails = nullptr;
    int n = 0;
    if (!commRails(comm, &rails, &n)) {
      AP_WARN(kFlags, "regMr: not a comm of this plugin's RDMA transport (%p)", comm);
      return abi::kInvalidArgument;
    }
    std::string why;
    if (type != abi::kPtrHost && !(type == abi::kPtrCuda && gpuDirectUsable(&why))) {
      AP_WARN(
          kFlags, "regMr: memory type %d is not supported: GPU memory is %s", type,
          type == abi::kPtrCuda ? ("not offered (" + why + ")").c_str() : "the only other type");
      return abi::kInternalError;
    }
    std::string error;
    bool receiving = static_cast<const CommBase*>(comm)->magic == RecvComm::kMagic;
    std::unique_ptr<MemoryHandle> mh =
        registerMemory(static_cast<const CommBase*>(comm), rails, n, data, size, type, dmabufFd,
                       offset, accessFor(receiving), &error);
    if (!mh) {
      AP_WARN(kFlags, "%s of %zu bytes at %p: %s", dmabufFd >= 0 ? "regMrDmaBuf" : "regMr", size,
              data, error.c_str());
      return abi::kSystemError;
    }
    *mhandle = mh.release();  // NCCL owns it until deregMr
    return abi::kSuccess;
  }

  abi::Result deregMr(void* comm, void* mhandle) override {
    const MemoryHandle* mh = memoryOf(static_cast<const CommBase*>(comm), mhandle);
    if (mh == nullptr) {
      AP_WARN(kFlags, "deregMr: %p is not a registration of comm %p", mhandle, comm);
      return abi::kInvalidArgument;
    }
    delete mh;
    return abi::kSuccess;
  }

  abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                    void** request) override {
    SendComm* c = commOf<SendComm>(sendComm, "isend");
    if (c == nullptr) return abi::kInvalidArgument;
    return c->isend(data, size, tag, mhandle, request);
  }

  abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                    void** mhandles, void** request) override {
    RecvComm* c = commOf<RecvComm>(recvComm, "irecv");
    if (c == nullptr) return abi::kInvalidArgument;
    return c->irecv(n, data, sizes, tags, mhandles, request);
  }

  abi::Result iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                     void** request) override {
    RecvComm* c = commOf<RecvComm>(recvComm, "iflush");
    if (c == nullptr) return abi::kInvalidArgument;
    return c->iflush(n, data, sizes, mhandles, &gFlushDone, request);
  }

 protected:
  abi::Result testFlush(RequestHeader* h, int* done) override {
    if (h == &gFlushDone) {
      *done = 1;
      return abi::kSuccess;
    }
    auto* q = static_cast<FlushReq*>(h);
    return static_cast<RecvComm*>(q->owner)->testFlush(q, done);
  }
};

}  // namespace

core::Transport& transport() {
  static IbTransport t;
  return t;
}

}  // namespace autopilot::net::ib

// TransportBase: what both transports' core::Transport implementations do alike, written
// once over the transport's own types: its rail discovery (`Rails`, a process-wide singleton
// with instance(), ensureDiscovered(), rails() and devices()), its comms and its listener.
// The transport adds what is its own: properties it alone knows, listen/connect, memory
// registration and the data path's entry points.
#pragma once

#include <string>
#include <vector>

#include "common/abi/net_abi.h"
#include "common/log.h"
#include "net_plugin/core/comm_config.h"
#include "net_plugin/core/opaque_handles.h"
#include "net_plugin/core/recv_engine.h"
#include "net_plugin/core/send_engine.h"
#include "net_plugin/core/transport.h"
#include "net_plugin/core/transport_glue.h"

namespace autopilot::net::core {

template <typename Rails, typename SendComm, typename RecvComm, typename ListenComm>
class TransportBase : public Transport {
 public:
  std::vector<std::string> railNames() override {
    Rails& rails = Rails::instance();
    rails.ensureDiscovered();
    std::vector<std::string> names;
    for (const auto& r : rails.rails()) names.push_back(r.name);
    return names;
  }

  abi::Result devices(int* ndev) override {
    Rails& rails = Rails::instance();
    rails.ensureDiscovered();
    *ndev = rails.devices().count();
    return abi::kSuccess;
  }

  abi::Result makeVDevice(int* d, const abi::NetVDevicePropsV12& props) override {
    Rails& rails = Rails::instance();
    rails.ensureDiscovered();
    return makeVirtualDevice(rails.devices(), props, d);
  }

  abi::Result accept(void* listenComm, void** recvComm) override {
    return acceptStep<ListenComm, RecvComm>(listenComm, recvComm);
  }

  abi::Result test(void* request, int* done, int* sizes) override {
    RequestHeader* h = requestOf(request, done);
    if (h == nullptr) return abi::kInvalidArgument;
    switch (h->kind) {
      case RequestKind::kSend: {
        auto* q = static_cast<SendRequest*>(h);
        return static_cast<SendComm*>(q->owner)->test(q, done, sizes);
      }
      case RequestKind::kRecv: {
        auto* q = static_cast<RecvRequest*>(h);
        return static_cast<RecvComm*>(q->owner)->test(q, done, sizes);
      }
      case RequestKind::kFlush:
        return testFlush(h, done);
    }
    return abi::kInvalidArgument;
  }

  abi::Result closeSend(void* sendComm) override {
    return closeComm<SendComm>(sendComm, "closeSend");
  }
  abi::Result closeRecv(void* recvComm) override {
    return closeComm<RecvComm>(recvComm, "closeRecv");
  }
  abi::Result closeListen(void* listenComm) override {
    return closeComm<ListenComm>(listenComm, "closeListen");
  }

 protected:
  // Device `dev` after discovery; NULL (logged) when it does not exist.
  const NetDevice* device(int dev) {
    Rails& rails = Rails::instance();
    rails.ensureDiscovered();
    const NetDevice* d = rails.devices().device(dev);
    if (d == nullptr) {
      AP_WARN(abi::subsys::kNet, "getProperties: device %d does not exist (%d devices)", dev,
              rails.devices().count());
    }
    return d;
  }

  // The properties every transport derives alike from its device; the transport then sets
  // pointer support, port, comm count and size limits.
  static void commonProperties(const NetDevice& d, int dev, DeviceProperties* props) {
    props->name = d.name.c_str();
    props->pciPath = d.pciPath.empty() ? nullptr : d.pciPath.c_str();
    props->guid = d.guid;
    props->regIsGlobal = 0;
    props->forceFlush = 0;
    props->speedMbps = d.speedMbps;
    props->latencyUs = 0;  // unknown: NCCL then uses its own default for the network
    props->maxRecvs = commConfig().maxRecvs;
    describeDeviceLayout(d, dev, props);
  }

  // A flush request handed out by iflush: complete unless the transport has reads in flight.
  virtual abi::Result testFlush(RequestHeader* /*request*/, int* done) {
    *done = 1;
    return abi::kSuccess;
  }
};

}  // namespace autopilot::net::core

// What both transports' NCCL entry points (transport/*/transport.cc) share around their own
// comm types: the device layout NCCL sees (physical or virtual), makeVDevice, and the
// re-entrant connect() that NCCL calls with the same handle until a comm comes out.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "common/abi/net_abi.h"
#include "common/log.h"
#include "net_plugin/core/device_table.h"
#include "net_plugin/core/opaque_handles.h"
#include "net_plugin/core/pending_connects.h"
#include "net_plugin/core/wire_bytes.h"
#include "net_plugin/net_api.h"

namespace autopilot::net::core {

// The last 8 bytes of NCCL's handle belong to the connecting side (both transports' handles
// leave them zero): it keeps there the token of its connection in progress.
inline constexpr size_t kConnectTokenAt = size_t(abi::kNetHandleMaxSize) - 8;

// vProps: a virtual device lists the physical devices it merges, a physical one itself (and is
// its own rail: see DeviceProperties::railId).
inline void describeDeviceLayout(const NetDevice& d, int dev, DeviceProperties* props) {
  if (d.isVirtual) {
    props->vProps.ndevs = int(d.children.size());
    for (size_t i = 0; i < d.children.size() && i < size_t(abi::kNetMaxDevsPerNicV12); ++i) {
      props->vProps.devs[i] = d.children[i];
    }
    props->railId = abi::kNetIdUndef;
  } else {
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
    props->railId = int16_t(dev);
  }
  props->planeId = abi::kNetIdUndef;
}

// The rails a connection on `device` uses: the device's first rails, as many as the peer
// offers (`peerRails`) and at most `maxRails`, into `railIds`. 0 (logged, as part of `what`:
// "listen", "connect") when the device does not exist.
inline int connectionRails(DeviceTable& table, int device, int peerRails, int maxRails,
                           int* railIds, const char* what) {
  const NetDevice* d = table.device(device);
  if (d == nullptr) {
    AP_WARN(abi::subsys::kNet, "%s: device %d does not exist", what, device);
    return 0;
  }
  int n = std::min({int(d->rails.size()), peerRails, maxRails});
  for (int i = 0; i < n; ++i) railIds[i] = d->rails[size_t(i)];
  return n;
}

inline abi::Result makeVirtualDevice(DeviceTable& table, const abi::NetVDevicePropsV12& props,
                                     int* d) {
  std::string error;
  // The table rejects counts beyond the 8 entries vProps has before reading them.
  int v = table.makeVirtual(props.devs, props.ndevs, &error);
  if (v < 0) {
    AP_WARN(abi::subsys::kNet, "makeVDevice: %s", error.c_str());
    return abi::kInvalidUsage;
  }
  AP_INFO(abi::subsys::kNet, "virtual net device %d: %s", v, table.device(v)->name.c_str());
  *d = v;
  return abi::kSuccess;
}

// One connect() call: finds the handle's connection in progress, or starts one
// (`start(std::unique_ptr<Connector>*)` returns its result), advances it with
// `Connector::progress(Comm**)`, and forgets it once it produced a comm or failed.
template <typename Comm, typename Connector, typename Start>
abi::Result connectStep(PendingConnects<Connector>& pending, void* handle, Start&& start,
                        void** sendComm) {
  uint8_t* token = static_cast<uint8_t*>(handle) + kConnectTokenAt;
  uint64_t id = bytes::get64(token);
  Connector* c = id != 0 ? pending.find(id) : nullptr;
  if (c == nullptr) {
    // First call for this handle (or NCCL handed a fresh copy): start.
    std::unique_ptr<Connector> fresh;
    abi::Result r = start(&fresh);
    if (r != abi::kSuccess) return r;
    c = fresh.get();
    id = pending.add(std::move(fresh));
    bytes::put64(token, id);
  }
  Comm* comm = nullptr;
  abi::Result r = c->progress(&comm);
  if (r != abi::kSuccess || comm != nullptr) {
    pending.remove(id);
    bytes::put64(token, 0);
  }
  if (comm != nullptr) *sendComm = static_cast<CommBase*>(comm);
  return r;
}

// One accept() call on a transport's ListenComm (`accept(RecvComm**)`): NULL until ready.
template <typename ListenComm, typename RecvComm>
abi::Result acceptStep(void* listenComm, void** recvComm) {
  ListenComm* l = commOf<ListenComm>(listenComm, "accept");
  if (l == nullptr) return abi::kInvalidArgument;
  RecvComm* comm = nullptr;
  abi::Result r = l->accept(&comm);
  if (comm != nullptr) *recvComm = static_cast<CommBase*>(comm);
  return r;
}

}  // namespace autopilot::net::core

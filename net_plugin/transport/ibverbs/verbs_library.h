// VerbsLibrary: rdma-core's libibverbs, opened with dlopen("libibverbs.so.1") on first use, so
// the plugin has no link-time dependency on it and still loads where rdma-core is absent (the
// verbs transport then reports no devices and the TCP transport, or NCCL's own, is used).
//
// <infiniband/verbs.h> is used for types and constants only. Every exported function is
// resolved with dlsym; several names are macros or static inline functions in rdma-core 44
// (ibv_reg_mr, ibv_query_port, ibv_post_send, ibv_post_recv, ibv_poll_cq): the inline ones go
// through the context's ops table exactly as the header's own inline code does, and the macros
// are replaced by calls to the exported functions they end up in.
//
// The library handle is never closed: verbs objects created through it may outlive any
// particular user, and unloading libibverbs under a live context would crash.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace autopilot::net::ib {

struct VerbsLibrary {
  // ---- exported functions (required unless marked optional)
  ibv_device** (*getDeviceList)(int* count) = nullptr;
  void (*freeDeviceList)(ibv_device** list) = nullptr;
  const char* (*getDeviceName)(ibv_device* device) = nullptr;
  __be64 (*getDeviceGuid)(ibv_device* device) = nullptr;
  ibv_context* (*openDevice)(ibv_device* device) = nullptr;
  int (*closeDevice)(ibv_context* context) = nullptr;
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  // The exported ibv_query_port takes the old (compat) layout; use queryPort() below.
  int (*queryPortExported)(ibv_context* context, uint8_t port,
                           _compat_ibv_port_attr* attr) = nullptr;
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid) = nullptr;
  // Optional (rdma-core >= 32): the GID entry with its type (RoCE v1/v2, IB).
  int (*queryGidEx)(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                    uint32_t flags, size_t entrySize) = nullptr;
  ibv_pd* (*allocPd)(ibv_context* context) = nullptr;
  int (*deallocPd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
  // Optional (rdma-core >= 34): memory given as a dma-buf file descriptor (GPU memory).
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                         int access) = nullptr;
  int (*deregMr)(ibv_mr* mr) = nullptr;
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel,
                      int compVector) = nullptr;
  int (*destroyCq)(ibv_cq* cq) = nullptr;
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask) = nullptr;
  int (*destroyQp)(ibv_qp* qp) = nullptr;
  int (*getAsyncEvent)(ibv_context* context, ibv_async_event* event) = nullptr;
  void (*ackAsyncEvent)(ibv_async_event* event) = nullptr;
  const char* (*wcStatusStr)(ibv_wc_status status) = nullptr;
  const char* (*eventTypeStr)(ibv_event_type type) = nullptr;

  // ---- what the header implements inline or as macros
  // ibv_query_port: the provider's extended query when it has one, else the exported call.
  int queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const;
  static int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    return qp->context->ops.post_send(qp, wr, bad);
  }
  static int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    return qp->context->ops.post_recv(qp, wr, bad);
  }
  static int pollCq(ibv_cq* cq, int entries, ibv_wc* wc) {
    return cq->context->ops.poll_cq(cq, entries, wc);
  }

  const char* statusText(ibv_wc_status status) const {
    return wcStatusStr ? wcStatusStr(status) : "unknown status";
  }

  // Opens `soname` and resolves every symbol into *out; false (with the reason in *why) when
  // the library is missing or lacks a required symbol. Exposed for tests; the plugin uses verbs().
  static bool open(const char* soname, VerbsLibrary* out, std::string* why);
};

// The process's libibverbs, opened once (thread-safe); NULL when unavailable. *why (optional)
// gets the reason, the same on every call.
const VerbsLibrary* verbs(std::string* why = nullptr);

}  // namespace autopilot::net::ib

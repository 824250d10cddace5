#include "net_plugin/transport/ibverbs/verbs_library.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>

namespace autopilot::net::ib {

namespace {

template <typename Fn>
bool resolve(void* handle, const char* name, Fn* out, bool required, std::string* missing) {
  // dlsym returns the default version of a versioned symbol (ibv_create_qp@@IBVERBS_1.1),
  // which is what a program linked against the current headers would bind to.
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*out == nullptr && required) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
  }
  return *out != nullptr;
}

}  // namespace

int VerbsLibrary::queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const {
  // As the header's ___ibv_query_port does: the provider's query_port op, when the context has
  // the extended ops table, fills the full structure; otherwise the exported compat call.
  verbs_context* vctx = verbs_get_ctx_op(context, query_port);
  if (vctx == nullptr) {
    std::memset(attr, 0, sizeof(*attr));
    return queryPortExported(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
  }
  return vctx->query_port(context, port, attr, sizeof(*attr));
}

bool VerbsLibrary::open(const char* soname, VerbsLibrary* out, std::string* why) {
  void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    if (why) *why = std::string(soname) + ": " + (err ? err : "cannot be opened");
    return false;
  }
  VerbsLibrary* lib = out;
  std::string missing;
  resolve(handle, "ibv_get_device_list", &lib->getDeviceList, true, &missing);
  resolve(handle, "ibv_free_device_list", &lib->freeDeviceList, true, &missing);
  resolve(handle, "ibv_get_device_name", &lib->getDeviceName, true, &missing);
  resolve(handle, "ibv_get_device_guid", &lib->getDeviceGuid, true, &missing);
  resolve(handle, "ibv_open_device", &lib->openDevice, true, &missing);
  resolve(handle, "ibv_close_device", &lib->closeDevice, true, &missing);
  resolve(handle, "ibv_query_device", &lib->queryDevice, true, &missing);
  resolve(handle, "ibv_query_port", &lib->queryPortExported, true, &missing);
  resolve(handle, "ibv_query_gid", &lib->queryGid, true, &missing);
  resolve(handle, "_ibv_query_gid_ex", &lib->queryGidEx, false, &missing);
  resolve(handle, "ibv_alloc_pd", &lib->allocPd, true, &missing);
  resolve(handle, "ibv_dealloc_pd", &lib->deallocPd, true, &missing);
  resolve(handle, "ibv_reg_mr", &lib->regMr, true, &missing);
  resolve(handle, "ibv_reg_dmabuf_mr", &lib->regDmabufMr, false, &missing);
  resolve(handle, "ibv_dereg_mr", &lib->deregMr, true, &missing);
  resolve(handle, "ibv_create_cq", &lib->createCq, true, &missing);
  resolve(handle, "ibv_destroy_cq", &lib->destroyCq, true, &missing);
  resolve(handle, "ibv_create_qp", &lib->createQp, true, &missing);
  resolve(handle, "ibv_modify_qp", &lib->modifyQp, true, &missing);
  resolve(handle, "ibv_destroy_qp", &lib->destroyQp, true, &missing);
  resolve(handle, "ibv_get_async_event", &lib->getAsyncEvent, true, &missing);
  resolve(handle, "ibv_ack_async_event", &lib->ackAsyncEvent, true, &missing);
  resolve(handle, "ibv_wc_status_str", &lib->wcStatusStr, true, &missing);
  resolve(handle, "ibv_event_type_str", &lib->eventTypeStr, true, &missing);
  if (!missing.empty()) {
    if (why) *why = std::string(soname) + " lacks " + missing;
    *out = VerbsLibrary{};
    dlclose(handle);
    return false;
  }
  return true;
}

const VerbsLibrary* verbs(std::string* why) {
  static std::once_flag once;
  // Function pointers only (trivially destructible): still valid for the static destructors of
  // the transport's process-wide verbs objects, whatever their order.
  static VerbsLibrary lib;
  static bool ok = false;
  static std::string reason;
  std::call_once(once, [] { ok = VerbsLibrary::open("libibverbs.so.1", &lib, &reason); });
  if (why) *why = reason;
  return ok ? &lib : nullptr;
}

}  // namespace autopilot::net::ib

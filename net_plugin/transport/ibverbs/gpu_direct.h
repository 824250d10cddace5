// Whether the verbs transport offers GPU memory to NCCL (ptrSupport NCCL_PTR_CUDA |
// NCCL_PTR_DMABUF). We cannot test GPUs here, so it is off unless NCCL_AUTOPILOT_IB_GPU_DIRECT=1,
// and even then only when everything it needs is really there at run time:
//  - libibverbs exports ibv_reg_dmabuf_mr, and every device's provider accepts dma-buf
//    registrations (a probe registration with an invalid descriptor must fail with something
//    other than "not supported": Soft-RoCE, for one, does not support them);
//  - the CUDA driver (libcuda.so.1) loads and initialises, and GPU 0 reports dma-buf support.
// The verdict and its reason are logged once. With it, regMr accepts CUDA memory (through
// nvidia-peermem) and regMrDmaBuf registers the dma-buf NCCL exports; iflush reads through every
// NIC that delivered data, so the NIC's writes to GPU memory are visible before NCCL uses them.
#pragma once

#include <string>

namespace autopilot::net::ib {

// Decided once (thread-safe), after device discovery.
bool gpuDirectUsable(std::string* why = nullptr);

}  // namespace autopilot::net::ib

// How the verbs provider registers a buffer, by where the memory lives. Host memory goes
// through ibv_reg_mr. CUDA device memory goes by dma-buf when both the GPU driver can
// export the range and the kernel/RNIC driver can import it (ibv_reg_dmabuf_mr, Linux
// 5.12+); otherwise through ibv_reg_mr on the device address, which only works with the
// nvidia-peermem module loaded. IBEX_GPU_REG=dmabuf|peermem forces one path. Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/base/rootfs.h"

namespace ibex::verbs {

enum class RegPath : uint8_t { kHost, kDmabuf, kPeerMem };
enum class GpuRegMode : uint8_t { kAuto, kDmabuf, kPeerMem };

struct GpuRegFacts {
    bool device_memory = false; // cudaMalloc'd (managed memory is host-accessible: kHost)
    bool cuda_dmabuf = false;   // the GPU exports dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)
    bool peermem = false;       // nvidia-peermem is loaded
    GpuRegMode mode = GpuRegMode::kAuto;
};

struct RegPlan {
    RegPath paths[2] = {RegPath::kHost, RegPath::kHost};
    int count = 0;     // paths to try in order; 0: none (see why)
    std::string why;   // what was chosen or why nothing can be
};

RegPlan plan_registration(const GpuRegFacts &facts);

// cuMemGetHandleForAddressRange wants a page-aligned range; the MR then starts `offset`
// bytes into the dma-buf.
struct DmabufRange {
    uint64_t base = 0;
    uint64_t size = 0;
    uint64_t offset = 0;
};
DmabufRange dmabuf_range(uint64_t addr, uint64_t length, uint64_t page);

// nvidia-peermem (or the older nv_peer_mem) is loaded.
bool peermem_loaded(const ibex::RootFs &fs);
// IBEX_GPU_REG: auto (default), dmabuf, peermem. False for anything else.
bool gpu_reg_mode_from_env(GpuRegMode *out, std::string *error);

const char *reg_path_name(RegPath p);

} // namespace ibex::verbs

#include "transport/verbs/gpu_reg.h"

#include <cstdlib>
#include <cstring>

namespace ibex::verbs {

const char *reg_path_name(RegPath p) {
    switch (p) {
    case RegPath::kHost: return "host";
    case RegPath::kDmabuf: return "dma-buf";
    case RegPath::kPeerMem: return "peer memory";
    }
    return "?";
}

RegPlan plan_registration(const GpuRegFacts &f) {
    RegPlan plan;
    if (!f.device_memory) {
        plan.paths[plan.count++] = RegPath::kHost;
        plan.why = "host memory";
        return plan;
    }
    switch (f.mode) {
    case GpuRegMode::kDmabuf:
        if (!f.cuda_dmabuf) {
            plan.why = "IBEX_GPU_REG=dmabuf but the GPU cannot export dma-bufs (driver or kernel too old)";
            return plan;
        }
        plan.paths[plan.count++] = RegPath::kDmabuf;
        plan.why = "dma-buf (IBEX_GPU_REG=dmabuf)";
        return plan;
    case GpuRegMode::kPeerMem:
        if (!f.peermem) {
            plan.why = "IBEX_GPU_REG=peermem but the nvidia_peermem module is not loaded";
            return plan;
        }
        plan.paths[plan.count++] = RegPath::kPeerMem;
        plan.why = "peer memory (IBEX_GPU_REG=peermem)";
        return plan;
    case GpuRegMode::kAuto: break;
    }
    // dma-buf first: it needs no out-of-tree module. The RNIC side can still refuse
    // (EOPNOTSUPP from an older kernel), so peer memory stays as the fallback.
    if (f.cuda_dmabuf) plan.paths[plan.count++] = RegPath::kDmabuf;
    if (f.peermem) plan.paths[plan.count++] = RegPath::kPeerMem;
    if (!plan.count)
        plan.why = "GPU memory needs dma-buf (CUDA 11.7+ driver, Linux 5.12+) or the nvidia_peermem module; neither is available";
    else if (plan.count == 2)
        plan.why = "dma-buf, falling back to peer memory";
    else
        plan.why = plan.paths[0] == RegPath::kDmabuf ? "dma-buf (nvidia_peermem not loaded)" : "peer memory (no dma-buf export)";
    return plan;
}

DmabufRange dmabuf_range(uint64_t addr, uint64_t length, uint64_t page) {
    DmabufRange r;
    r.base = addr & ~(page - 1);
    const uint64_t end = (addr + length + page - 1) & ~(page - 1);
    r.size = end - r.base;
    r.offset = addr - r.base;
    return r;
}

bool peermem_loaded(const ibex::RootFs &fs) {
    return fs.is_dir("/sys/module/nvidia_peermem") || fs.is_dir("/sys/module/nv_peer_mem") ||
           fs.exists("/sys/kernel/mm/memory_peers/nv_mem/version");
}

bool gpu_reg_mode_from_env(GpuRegMode *out, std::string *error) {
    *out = GpuRegMode::kAuto;
    const char *s = std::getenv("IBEX_GPU_REG");
    if (!s || !*s || !std::strcmp(s, "auto")) return true;
    if (!std::strcmp(s, "dmabuf")) *out = GpuRegMode::kDmabuf;
    else if (!std::strcmp(s, "peermem")) *out = GpuRegMode::kPeerMem;
    else {
        *error = std::string("IBEX_GPU_REG=\"") + s + "\": expected auto, dmabuf or peermem";
        return false;
    }
    return true;
}

} // namespace ibex::verbs

// GPU memory in the shm provider. An MR over GPU memory makes its owner export the CUDA
// allocation holding it (cudaIpcGetMemHandle, once per allocation) into the context's
// shared segment; a peer maps it (cudaIpcOpenMemHandle, once, cached in GpuMappings) and
// moves payload with one cudaMemcpyAsync on the GPU: device to device between two GPU
// buffers, host to device or back when one side is host memory. A peer in this same
// process needs no handle: the exporter's own pointer serves. Copies the initiator makes
// for a WRITE or READ complete their WR when the GPU is done (the requester's
// gpu_pending); the target's copies (SEND, and what the initiator could not reach) are
// waited for before the response. The CPU never touches GPU memory here.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "transport/shm/engine.h"

namespace ibex::shm {

bool is_gpu(const ShmContext &ctx, const void *p) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    for (const ShmContext::DeviceRange &r : ctx.device_ranges)
        if (a >= r.start && a < r.end) return true;
    return false;
}

namespace {

uint64_t peer_key(const ShmQp &qp) { return uint64_t(qp.peer_pid) << 32 | qp.peer_ctx_id; }

// The exported allocation holding [p, p + len), or nullptr.
const std::pair<const uint64_t, GpuExport> *export_holding(const ShmContext &ctx, uintptr_t p, uint64_t len) {
    auto it = ctx.gpu_exports.upper_bound(p);
    if (it == ctx.gpu_exports.begin()) return nullptr;
    --it;
    if (p - it->first > it->second.size || len > it->second.size - (p - it->first)) return nullptr;
    return &*it;
}

void log_once(const char *what, const char *detail) {
    static std::atomic<int> logged{0};
    if (logged.fetch_add(1) < 4) IBEX_LOG(info, "shm: %s: %s", what, detail);
}

} // namespace

void export_gpu(ShmContext &ctx, const ibex_mr &mr, uint64_t *alloc, uint64_t *off) {
    *alloc = *off = 0;
    const uintptr_t p = reinterpret_cast<uintptr_t>(mr.addr);
    const auto *held = export_holding(ctx, p, mr.length);
    if (!held) {
        cuda::IpcExport e{};
        const bool handle = cuda::ipc_export(mr.addr, &e) == IBEX_OK;
        if (!handle) {
            // Peers of this process still reach it at its own address.
            log_once("GPU memory without a CUDA IPC handle (peers in other processes cannot map it)", ibex_last_error());
            e.base = p;
            e.size = mr.length;
            e.device = cuda::pointer_device(mr.addr);
        }
        uint32_t slot = kGpuExports;
        for (uint32_t i = 0; i < kGpuExports && slot == kGpuExports; ++i)
            if (!ctx.shared->gpu_exports[i].id.load(std::memory_order_relaxed)) slot = i;
        if (slot == kGpuExports) {
            log_once("no room to export another GPU allocation", "its MRs are reached by the target's copies only");
            return;
        }
        const uint64_t id = ctx.next_gpu_export++;
        GpuExportEntry &x = ctx.shared->gpu_exports[slot];
        x.seq.fetch_add(1, std::memory_order_acq_rel);
        x.device = e.device;
        x.has_handle = handle;
        x.base = e.base;
        x.size = e.size;
        std::memcpy(x.handle, e.handle, sizeof x.handle);
        x.id.store(id, std::memory_order_relaxed);
        x.seq.fetch_add(1, std::memory_order_release);
        held = &*ctx.gpu_exports.emplace(e.base, GpuExport{id, e.size}).first;
        if (p - held->first > held->second.size || mr.length > held->second.size - (p - held->first)) return;
    }
    *alloc = kGpuAlloc | held->second.id;
    *off = p - held->first;
}

bool gpu_export_of(const ShmContext &ctx, const void *p, size_t len, uint64_t *id, uint64_t *off) {
    if (ctx.gpu_exports.empty()) return false;
    const auto *held = export_holding(ctx, reinterpret_cast<uintptr_t>(p), len);
    if (!held) return false;
    *id = kGpuAlloc | held->second.id;
    *off = reinterpret_cast<uintptr_t>(p) - held->first;
    return true;
}

uint8_t *gpu_peer_mapping(ShmQp &qp, uint64_t id, uint64_t off, uint64_t len) {
    if (!qp.peer_ctx) return nullptr;
    id &= ~kGpuAlloc;
    const uint64_t key = peer_key(qp);
    cuda::IpcExport e{};
    bool same_process = false;
    if (!qp.ctx->gpu_maps.has(key, id)) {
        bool found = false;
        for (const GpuExportEntry &x : qp.peer_ctx->gpu_exports) {
            const uint32_t seq = x.seq.load(std::memory_order_acquire);
            if (seq & 1 || x.id.load(std::memory_order_relaxed) != id) continue;
            std::memcpy(e.handle, x.handle, sizeof e.handle);
            e.base = x.base;
            e.size = x.size;
            e.device = x.device;
            same_process = qp.peer_pid == static_cast<uint32_t>(getpid());
            const bool handle = x.has_handle;
            std::atomic_thread_fence(std::memory_order_acquire);
            found = x.seq.load(std::memory_order_relaxed) == seq && (handle || same_process);
            break;
        }
        if (!found) return nullptr;
        if (same_process) {
            // This address space already holds it (and CUDA refuses a process its own handle).
            if (off > e.size || len > e.size - off) return nullptr;
            return reinterpret_cast<uint8_t *>(e.base) + off;
        }
    }
    uint8_t *p = nullptr;
    if (qp.ctx->gpu_maps.get(key, id, e, off, len, &p) != IBEX_OK) {
        log_once("a peer's GPU memory cannot be mapped here (its target copies instead)", ibex_last_error());
        return nullptr;
    }
    return p;
}

bool peer_lives(ShmQp &qp) {
    // CUDA keeps a dead exporter's allocation alive while it is mapped, so a copy into it
    // would succeed: the peer's process is looked at, at most every 100 ms.
    const uint64_t now = now_ns();
    if (now < qp.gpu_liveness_at) return true;
    qp.gpu_liveness_at = now + 100'000'000;
    return process_alive(qp.peer_pid) && !qp.peer->closed.load(std::memory_order_relaxed);
}

void forget_gpu_peer(ShmQp &qp) {
    if (!qp.peer_ctx || !qp.ctx->gpu_maps.size()) return;
    for (const ShmQp *other : qp.ctx->qps)
        if (other != &qp && other->peer_ctx && other->peer_pid == qp.peer_pid && other->peer_ctx_id == qp.peer_ctx_id) return;
    qp.ctx->gpu_maps.forget_peer(peer_key(qp));
}

ibex_status_t copy_gpu(void *dst, const void *src, size_t n, cuda::CopyFence *fence) {
    if (!n) return IBEX_OK;
    int device = cuda::pointer_device(dst);
    if (device < 0) device = cuda::pointer_device(src);
    if (device < 0) device = 0;
    IBEX_TRY(cuda::copy_async(dst, src, n, device));
    return fence ? cuda::fence_copies(fence) : cuda::wait_copies();
}

ibex_status_t copy_iovs_gpu(iovec *dst, unsigned long nd, const iovec *src, unsigned long ns, size_t len) {
    size_t di = 0, si = 0, doff = 0, soff = 0;
    while (len && di < nd && si < ns) {
        const size_t n = std::min({len, dst[di].iov_len - doff, src[si].iov_len - soff});
        IBEX_TRY(cuda::copy_async(static_cast<uint8_t *>(dst[di].iov_base) + doff,
                                  static_cast<const uint8_t *>(src[si].iov_base) + soff, n,
                                  std::max(0, std::max(cuda::pointer_device(dst[di].iov_base),
                                                       cuda::pointer_device(src[si].iov_base)))));
        len -= n;
        if ((doff += n) == dst[di].iov_len) ++di, doff = 0;
        if ((soff += n) == src[si].iov_len) ++si, soff = 0;
    }
    return cuda::wait_copies();
}

void flush_gpu_pending(ShmQp &qp, bool complete_flushed) {
    for (GpuPending &g : qp.gpu_pending) {
        cuda::drop_fence(g.fence); // the copy must be done before its mapping can close
        if (complete_flushed)
            complete(qp, qp.scq, g.wr_id, IBEX_WC_WR_FLUSH_ERR,
                     g.opcode == IBEX_WR_RDMA_READ ? IBEX_WC_RDMA_READ : IBEX_WC_RDMA_WRITE, 0);
    }
    qp.gpu_pending.clear();
}

} // namespace ibex::shm

// Choosing how payload moves: cross-memory attach where the kernel allows this process to
// reach the peer's memory (same user, ptrace scope, PID namespace), else the per-QP ring.
// IBEX_SHM_COPY forces a mechanism; each one in use is logged once per process.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <sys/uio.h>

#include "runtime/base/log.h"
#include "transport/shm/engine.h"

namespace ibex::shm {

const char *copy_name(Copy c) {
    switch (c) {
    case Copy::kCma: return "cma";
    case Copy::kRing: return "ring";
    case Copy::kMap: return "map";
    }
    return "?";
}

uint32_t forced_copy() {
    const char *v = std::getenv("IBEX_SHM_COPY");
    if (!v || !*v) return 0;
    for (Copy c : {Copy::kCma, Copy::kRing, Copy::kMap})
        if (std::strcmp(v, copy_name(c)) == 0) return static_cast<uint32_t>(c);
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) IBEX_LOG(warn, "IBEX_SHM_COPY=%s is not map, cma or ring: ignored", v);
    return 0;
}

bool cma_works(uint32_t pid, const CtxShared *peer) {
    uint64_t got = 0;
    iovec loc{&got, sizeof got};
    iovec rem{reinterpret_cast<void *>(static_cast<uintptr_t>(peer->probe_addr)), sizeof got};
    return process_vm_readv(static_cast<pid_t>(pid), &loc, 1, &rem, 1, 0) == sizeof got && got == peer->probe;
}

void note_copy_choice(Copy c, const char *why) {
    static std::atomic<bool> logged[4];
    const auto i = static_cast<uint32_t>(c) & 3;
    // A plain load first: this runs per WR, and the exchange would dirty a shared line.
    if (!logged[i].load(std::memory_order_relaxed) && !logged[i].exchange(true)) IBEX_LOG(info, "shm: copy mechanism %s (%s)", copy_name(c), why);
}

bool copy_stats(ibex_context *c, CopyStats *out) {
    if (!c || c->ops != &kShmProviderOps) return false;
    ShmContext *ctx = to_shm(c);
    std::lock_guard<std::mutex> l(ctx->mu);
    *out = ctx->copies;
    for (const ShmQp *qp : ctx->qps) // WRITEs through a lane are `map` copies too
        qp->lane.add_to(&out->map_ops, &out->map_bytes, &out->lane_ops);
    return true;
}

} // namespace ibex::shm

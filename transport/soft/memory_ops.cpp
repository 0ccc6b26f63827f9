// Protection domains and memory regions.
#include "runtime/base/cuda_memory.h"
#include "runtime/base/prefault.h"
#include "runtime/base/status.h"
#include "transport/soft/engine/staging.h"
#include "transport/soft/soft_ops.h"

namespace ibex::soft::ops {

ibex_status_t alloc_pd(ibex_context *c, ibex_pd **out) {
    auto *pd = new (std::nothrow) SoftPd{};
    if (!pd) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a protection domain");
    pd->context = c;
    pd->ctx = to_soft(c);
    Lock l(pd->ctx->mutex());
    ++pd->ctx->live_objects();
    *out = pd;
    return IBEX_OK;
}

ibex_status_t dealloc_pd(ibex_pd *p) {
    auto *pd = static_cast<SoftPd *>(p);
    {
        Lock l(pd->ctx->mutex());
        if (pd->users) return fail(IBEX_ERR_INVALID_STATE, "PD still has %d MR(s)/QP(s)", pd->users);
        --pd->ctx->live_objects();
    }
    delete pd;
    return IBEX_OK;
}

ibex_status_t reg_mr(ibex_pd *pd, void *addr, size_t length, unsigned access, ibex_mr **out) {
    SoftContext *ctx = ctx_of(pd);
    auto *mr = new (std::nothrow) SoftMr{};
    if (!mr) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a memory region");
    mr->pd = pd;
    mr->addr = addr;
    mr->length = length;
    mr->access = access;
    if (ibex_status_t st = staging::attach(*ctx, *mr); st != IBEX_OK) {
        delete mr;
        return st;
    }
    // What the engine writes into gets its pages mapped now, as an RNIC's registration pins
    // them: not a page fault per 4 KiB at the first packets that land there. Before the
    // context's lock, since a large region takes a while. Only memory the CPU owns (a GPU
    // buffer's pinned shadow, never the device or managed memory).
    if (access & (IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE)) {
        if (mr->host)
            base::prefault_range(mr->host, length);
        else if (cuda::memory_kind(addr) == cuda::MemoryKind::kHost)
            base::prefault_range(addr, length);
    }
    Lock l(ctx->mutex());
    const uint32_t key = ctx->mrs().add(mr);
    if (!key) {
        staging::detach(*ctx, *mr);
        delete mr;
        return fail(IBEX_ERR_NO_MEMORY, "memory region table full");
    }
    mr->lkey = mr->rkey = key;
    ctx->port().memory_registered(mr->host ? mr->host : addr, length);
    ++static_cast<SoftPd *>(pd)->users;
    *out = mr;
    return IBEX_OK;
}

ibex_status_t dereg_mr(ibex_mr *mr) {
    SoftContext *ctx = ctx_of(mr->pd);
    {
        Lock l(ctx->mutex());
        ctx->mrs().remove(mr->lkey);
        auto *smr = static_cast<SoftMr *>(mr);
        ctx->port().memory_deregistered(smr->host ? smr->host : mr->addr, mr->length);
        staging::detach(*ctx, *smr);
        --static_cast<SoftPd *>(mr->pd)->users;
    }
    delete static_cast<SoftMr *>(mr);
    return IBEX_OK;
}

} // namespace ibex::soft::ops

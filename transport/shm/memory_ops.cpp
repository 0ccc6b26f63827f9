// Protection domains, memory regions and the key table the responder checks requests
// against.
#include "runtime/base/status.h"
#include "transport/shm/engine.h"
#include "transport/shm/shm_ops.h"

namespace ibex::shm {

ibex_status_t alloc_pd(ibex_context *c, ibex_pd **out) {
    auto *pd = new (std::nothrow) ShmPd{};
    if (!pd) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a protection domain");
    pd->context = c;
    pd->ctx = to_shm(c);
    Lock l(pd->ctx->mu);
    ++pd->ctx->live_objects;
    *out = pd;
    return IBEX_OK;
}

ibex_status_t dealloc_pd(ibex_pd *p) {
    auto *pd = static_cast<ShmPd *>(p);
    {
        Lock l(pd->ctx->mu);
        if (pd->users) return fail(IBEX_ERR_INVALID_STATE, "PD still has %d MR(s)/QP(s)", pd->users);
        --pd->ctx->live_objects;
    }
    delete pd;
    return IBEX_OK;
}

ibex_status_t reg_mr(ibex_pd *pd, void *addr, size_t length, unsigned access, ibex_mr **out) {
    ShmContext *ctx = ctx_of(pd);
    auto *mr = new (std::nothrow) ibex_mr{pd, addr, length, 0, 0, access};
    if (!mr) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a memory region");
    Lock l(ctx->mu);
    const uint32_t key = ctx->mrs.add(mr);
    if (!key) {
        delete mr;
        return fail(IBEX_ERR_NO_MEMORY, "memory region table full");
    }
    mr->lkey = mr->rkey = key;
    if (cuda::is_device_pointer(addr)) {
        const uintptr_t start = reinterpret_cast<uintptr_t>(addr);
        ctx->device_ranges.push_back({start, start + length, key});
        ctx->device_mrs = ctx->device_ranges.size();
    }
    publish_mr(*ctx, *mr);
    ++static_cast<ShmPd *>(pd)->users;
    *out = mr;
    return IBEX_OK;
}

ibex_status_t dereg_mr(ibex_mr *mr) {
    ShmContext *ctx = ctx_of(mr->pd);
    {
        Lock l(ctx->mu);
        withdraw_mr(*ctx, *mr);
        auto &ranges = ctx->device_ranges;
        std::erase_if(ranges, [mr](const ShmContext::DeviceRange &r) { return r.key == mr->lkey; });
        ctx->device_mrs = ranges.size();
        ctx->mrs.remove(mr->lkey);
        for (ShmQp *qp : ctx->qps) qp->lane.close(); // a lane may copy from this MR
        --static_cast<ShmPd *>(mr->pd)->users;
    }
    delete mr;
    return IBEX_OK;
}

} // namespace ibex::shm

// Protection domains and memory regions, host memory or GPU memory (dma-buf or peer memory,
// as gpu_reg plans it).
#include <cerrno>
#include <cstring>
#include <string>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "runtime/base/cuda_memory.h"
#include "runtime/base/status.h"
#include "transport/verbs/gpu_reg.h"
#include "transport/verbs/objects.h"
#include "transport/verbs/ops.h"
#include "transport/verbs/work_map.h"

namespace ibex::verbs {
namespace {

// Registers device memory along the planned paths; the first that works wins.
ibv_mr *reg_device_mr(VerbsPd *pd, void *addr, size_t length, int access, RegPath *used, std::string *tried) {
    GpuRegFacts facts;
    facts.device_memory = true;
    facts.cuda_dmabuf = cuda::dmabuf_supported(cuda::pointer_device(addr));
    facts.peermem = pd->vctx->peermem;
    facts.mode = pd->vctx->gpu_mode;
    const RegPlan plan = plan_registration(facts);
    if (!plan.count) *tried = plan.why;
    const uint64_t va = reinterpret_cast<uintptr_t>(addr);
    for (int i = 0; i < plan.count; ++i) {
        ibv_mr *mr = nullptr;
        int e = 0;
        if (plan.paths[i] == RegPath::kDmabuf) {
            const DmabufRange r = dmabuf_range(va, length, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
            int fd = -1;
            if (cuda::export_dmabuf(r.base, r.size, &fd) != IBEX_OK) {
                *tried += std::string(tried->empty() ? "" : "; ") + ibex_last_error();
                continue;
            }
            mr = ibv_reg_dmabuf_mr(pd->ibv, r.offset, length, va, fd, access);
            e = errno;
            close(fd); // the MR holds its own reference to the dma-buf
        } else {
            mr = ibv_reg_mr(pd->ibv, addr, length, access);
            e = errno;
        }
        if (mr) {
            *used = plan.paths[i];
            return mr;
        }
        *tried += std::string(tried->empty() ? "" : "; ") + reg_path_name(plan.paths[i]) + ": " + strerror(e);
    }
    return nullptr;
}

} // namespace

ibex_status_t alloc_pd(ibex_context *c, ibex_pd **out) {
    VerbsContext *ctx = vctx_of(c);
    ibv_pd *ibv = ibv_alloc_pd(ctx->ibv);
    if (!ibv) return fail_errno(IBEX_ERR_NO_MEMORY, errno, "ibv_alloc_pd");
    auto *pd = new (std::nothrow) VerbsPd;
    if (!pd) {
        ibv_dealloc_pd(ibv);
        return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a protection domain");
    }
    pd->context = c;
    pd->vctx = ctx;
    pd->ibv = ibv;
    Lock l(ctx->mutex);
    ++ctx->live;
    *out = pd;
    return IBEX_OK;
}

ibex_status_t dealloc_pd(ibex_pd *p) {
    VerbsPd *pd = pd_of(p);
    {
        Lock l(pd->vctx->mutex);
        if (pd->users) return fail(IBEX_ERR_INVALID_STATE, "PD still has %d MR(s)/QP(s)", pd->users);
    }
    if (int e = ibv_dealloc_pd(pd->ibv)) return fail_errno(status_from_errno(e), e, "ibv_dealloc_pd");
    {
        Lock l(pd->vctx->mutex);
        --pd->vctx->live;
    }
    delete pd;
    return IBEX_OK;
}

ibex_status_t reg_mr(ibex_pd *p, void *addr, size_t length, unsigned access, ibex_mr **out) {
    VerbsPd *pd = pd_of(p);
    const int flags = static_cast<int>(access);
    ibv_mr *ibv = nullptr;
    RegPath path = RegPath::kHost;
    if (cuda::is_device_pointer(addr)) {
        std::string tried;
        ibv = reg_device_mr(pd, addr, length, flags | IBV_ACCESS_RELAXED_ORDERING, &path, &tried);
        if (!ibv) return fail(IBEX_ERR_NOT_SUPPORTED, "cannot register GPU memory %p (+%zu): %s", addr, length, tried.c_str());
    } else {
        ibv = ibv_reg_mr(pd->ibv, addr, length, flags);
        if (!ibv) {
            const int e = errno;
            return fail_errno(status_from_errno(e), e, "ibv_reg_mr(%p, %zu)%s", addr, length,
                              e == ENOMEM ? " (is RLIMIT_MEMLOCK large enough? ulimit -l)" : "");
        }
    }
    auto *mr = new (std::nothrow) VerbsMr;
    if (!mr) {
        ibv_dereg_mr(ibv);
        return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a memory region");
    }
    mr->pd = p;
    mr->addr = addr;
    mr->length = length;
    mr->lkey = ibv->lkey;
    mr->rkey = ibv->rkey;
    mr->access = access;
    mr->ibv = ibv;
    mr->path = path;
    Lock l(pd->vctx->mutex);
    ++pd->users;
    *out = mr;
    return IBEX_OK;
}

ibex_status_t dereg_mr(ibex_mr *m) {
    auto *mr = static_cast<VerbsMr *>(m);
    if (int e = ibv_dereg_mr(mr->ibv)) return fail_errno(status_from_errno(e), e, "ibv_dereg_mr");
    VerbsPd *pd = pd_of(mr->pd);
    {
        Lock l(pd->vctx->mutex);
        --pd->users;
    }
    delete mr;
    return IBEX_OK;
}

} // namespace ibex::verbs

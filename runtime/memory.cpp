// ibex_mem_alloc / ibex_mem_free: the provider's own allocator where it has one (shm), else
// page-aligned anonymous memory. Every live allocation is remembered with its PD, so a
// pointer that was never allocated, one freed twice or one passed with another PD gets a
// clear error instead of corrupting the heap.
#include <cerrno>
#include <map>
#include <mutex>
#include <sys/mman.h>

#include "runtime/base/status.h"
#include "transport/provider.h"

using ibex::fail;

namespace {

struct Live {
    ibex_pd *pd;
    size_t size;
    bool provider; // allocated by the provider's mem_alloc
};

std::mutex g_mu;
std::map<void *, Live> g_live;

} // namespace

extern "C" {

ibex_status_t ibex_mem_alloc(ibex_pd_t *pd, size_t size, void **ptr) {
    ibex::clear_error();
    if (ptr) *ptr = nullptr;
    if (!pd) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_mem_alloc: pd is NULL");
    if (!ptr) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_mem_alloc: ptr is NULL");
    if (!size) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_mem_alloc: size is 0");
    const ibex::ProviderOps *ops = pd->context->ops;
    void *p = nullptr;
    if (ops->mem_alloc) {
        IBEX_TRY(ops->mem_alloc(pd, size, &p));
    } else {
        p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return ibex::fail_errno(IBEX_ERR_NO_MEMORY, errno, "ibex_mem_alloc: mmap of %zu bytes", size);
    }
    std::lock_guard<std::mutex> l(g_mu);
    g_live[p] = {pd, size, ops->mem_alloc != nullptr};
    *ptr = p;
    return IBEX_OK;
}

ibex_status_t ibex_mem_free(ibex_pd_t *pd, void *ptr) {
    ibex::clear_error();
    if (!pd) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_mem_free: pd is NULL");
    if (!ptr) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_mem_free: ptr is NULL");
    Live live;
    {
        std::lock_guard<std::mutex> l(g_mu);
        auto it = g_live.find(ptr);
        if (it == g_live.end())
            return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_mem_free: %p was not returned by ibex_mem_alloc, or was freed already", ptr);
        if (it->second.pd != pd)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_mem_free: %p was allocated on another PD", ptr);
        live = it->second;
        g_live.erase(it);
    }
    if (live.provider) return pd->context->ops->mem_free(pd, ptr);
    munmap(ptr, live.size);
    return IBEX_OK;
}

ibex_status_t ibex_rkey_ptr(ibex_qp_t *qp, uint64_t remote_addr, uint32_t rkey, size_t length, unsigned access,
                            void **ptr) {
    ibex::clear_error();
    if (ptr) *ptr = nullptr;
    if (!qp) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_rkey_ptr: qp is NULL");
    if (!ptr) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_rkey_ptr: ptr is NULL");
    if (!length) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_rkey_ptr: length is 0");
    constexpr unsigned kRemote = IBEX_ACCESS_REMOTE_READ | IBEX_ACCESS_REMOTE_WRITE;
    if (!access || (access & ~kRemote))
        return fail(IBEX_ERR_INVALID_ARGUMENT,
                    "ibex_rkey_ptr: access 0x%x: give IBEX_ACCESS_REMOTE_READ and/or IBEX_ACCESS_REMOTE_WRITE", access);
    if (remote_addr + length < remote_addr)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_rkey_ptr: range wraps around the address space");
    const ibex::ProviderOps *ops = qp->pd->context->ops;
    if (!ops->rkey_ptr)
        return fail(IBEX_ERR_NOT_SUPPORTED, "ibex_rkey_ptr: provider \"%s\" maps no peer memory", ops->name);
    return ops->rkey_ptr(qp, remote_addr, rkey, length, access, ptr);
}

} // extern "C"

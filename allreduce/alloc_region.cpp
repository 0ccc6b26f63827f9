#include "allreduce/alloc_region.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/base/status.h"

namespace ibex::coll {

ibex_status_t AllocRegion::open(ibex_pd_t *pd, size_t bytes, unsigned access, const char *what, bool peers_map) {
    close();
    pd_ = pd;
    ibex_status_t st = IBEX_OK;
    if (!peers_map) {
        private_ = true;
        if (!(mem_ = std::aligned_alloc(4096, (bytes + 4095) & ~size_t(4095))))
            st = fail(IBEX_ERR_NO_MEMORY, "out of memory");
    } else if ((st = ibex_mem_alloc(pd, bytes, &mem_)) != IBEX_OK) {
        mem_ = nullptr;
    }
    if (st == IBEX_OK && access && (st = ibex_reg_mr(pd, mem_, bytes, access, &mr_)) != IBEX_OK) mr_ = nullptr;
    if (st != IBEX_OK) {
        const std::string why = ibex_last_error(); // ibex_mem_free clears it
        close();
        if (what) return fail(st, "%s of %zu bytes: %s", what, bytes, why.c_str());
        return fail(st, "%s", why.c_str());
    }
    bytes_ = bytes;
    return IBEX_OK;
}

uint8_t *AllocRegion::open_zeroed(ibex_pd_t *pd, size_t bytes, unsigned access, const char *what) {
    if (open(pd, bytes, access, what) != IBEX_OK) return nullptr;
    std::memset(mem_, 0, bytes);
    return data();
}

void AllocRegion::close() {
    if (mr_) ibex_dereg_mr(mr_);
    if (mem_ && private_) std::free(mem_);
    else if (mem_) ibex_mem_free(pd_, mem_);
    private_ = false;
    mr_ = nullptr;
    mem_ = nullptr;
    bytes_ = 0;
}

ibex_status_t RegisteredSlice::open(ibex_pd_t *pd, uint8_t *base, size_t bytes, unsigned access, const char *what) {
    close();
    if (ibex_status_t st = ibex_reg_mr(pd, base, bytes, access, &mr_); st != IBEX_OK) {
        mr_ = nullptr;
        const std::string why = ibex_last_error(); // fail() writes where this points
        return fail(st, "%s of %zu bytes: %s", what, bytes, why.c_str());
    }
    data_ = base;
    bytes_ = bytes;
    return IBEX_OK;
}

void RegisteredSlice::close() {
    if (mr_) ibex_dereg_mr(mr_);
    mr_ = nullptr;
    data_ = nullptr;
    bytes_ = 0;
}

} // namespace ibex::coll

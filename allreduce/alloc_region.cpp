#include "allreduce/alloc_region.h"

#include <string>

#include "runtime/base/status.h"

namespace ibex::coll {

ibex_status_t AllocRegion::open(ibex_pd_t *pd, size_t bytes, unsigned access, const char *what) {
    close();
    pd_ = pd;
    ibex_status_t st = ibex_mem_alloc(pd, bytes, &mem_);
    if (st != IBEX_OK) mem_ = nullptr;
    else if ((st = ibex_reg_mr(pd, mem_, bytes, access, &mr_)) != IBEX_OK) mr_ = nullptr;
    if (st != IBEX_OK) {
        const std::string why = ibex_last_error(); // ibex_mem_free clears it
        close();
        if (what) return fail(st, "%s of %zu bytes: %s", what, bytes, why.c_str());
        return fail(st, "%s", why.c_str());
    }
    bytes_ = bytes;
    return IBEX_OK;
}

void AllocRegion::close() {
    if (mr_) ibex_dereg_mr(mr_);
    if (mem_) ibex_mem_free(pd_, mem_);
    mr_ = nullptr;
    mem_ = nullptr;
    bytes_ = 0;
}

} // namespace ibex::coll

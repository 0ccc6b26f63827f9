// reduce_into() and friends: pick the kernel table once (CPU features, IBEX_REDUCE_ISA) and
// index it by type and op.
#include "allreduce/cpu/reduce.h"

#include <cassert>
#include <cstring>

#include "allreduce/cpu/kernels.h"
#include "runtime/base/config.h"
#include "runtime/base/log.h"

namespace ibex::coll {
namespace cpu {

const KernelTable &active_kernels() {
    static const KernelTable &chosen = [] () -> const KernelTable & {
        const char *want = config::get_string("IBEX_REDUCE_ISA", "");
        if (std::strcmp(want, "scalar") == 0) return scalar_kernels();
        if (*want && std::strcmp(want, "auto") != 0 && std::strcmp(want, "avx2") != 0)
            IBEX_LOG(warn, "IBEX_REDUCE_ISA=%s is not one of auto, avx2, scalar: using auto", want);
        if (const KernelTable *simd = avx2_kernels()) return *simd;
        if (std::strcmp(want, "avx2") == 0)
            IBEX_LOG(warn, "IBEX_REDUCE_ISA=avx2 but this CPU lacks AVX2 or F16C: using scalar");
        return scalar_kernels();
    }();
    return chosen;
}

} // namespace cpu

void reduce_into(void *out, const void *a, const void *b, size_t count, ibex_datatype_t type,
                 ibex_redop_t op) {
    assert(type >= 0 && type < IBEX_DATATYPE_COUNT && op >= 0 && op < IBEX_REDOP_COUNT);
    if (count == 0) return;
    cpu::active_kernels().reduce[type][op](out, a, b, count);
}

void finalize_avg(void *buf, size_t count, ibex_datatype_t type, int nranks) {
    assert(type >= 0 && type < IBEX_DATATYPE_COUNT && nranks > 0);
    if (count == 0) return;
    cpu::active_kernels().avg[type](buf, count, nranks);
}

const char *reduce_isa() { return cpu::active_kernels().name; }

} // namespace ibex::coll

// The kernel tables behind reduce_into(): one per instruction set, so tests and the
// benchmark can run each path side by side in one process.
#pragma once

#include <cstddef>

#include "ibex/coll.h"

namespace ibex::coll::cpu {

using ReduceFn = void (*)(void *out, const void *a, const void *b, size_t count);
using AvgFn = void (*)(void *buf, size_t count, int nranks);

struct KernelTable {
    const char *name;
    ReduceFn reduce[IBEX_DATATYPE_COUNT][IBEX_REDOP_COUNT]; // [IBEX_AVG] is the SUM kernel
    AvgFn avg[IBEX_DATATYPE_COUNT];
};

// Sets the five op entries of one type from Ops::run<Op> (avg takes the sum kernel).
template <class Ops> void fill_ops(KernelTable &t, ibex_datatype_t type) {
    t.reduce[type][IBEX_SUM] = Ops::template run<IBEX_SUM>;
    t.reduce[type][IBEX_PROD] = Ops::template run<IBEX_PROD>;
    t.reduce[type][IBEX_MIN] = Ops::template run<IBEX_MIN>;
    t.reduce[type][IBEX_MAX] = Ops::template run<IBEX_MAX>;
    t.reduce[type][IBEX_AVG] = Ops::template run<IBEX_SUM>;
}

const KernelTable &scalar_kernels();
// nullptr when this build has no AVX2 kernels (not x86-64) or the CPU lacks AVX2/F16C.
const KernelTable *avx2_kernels();
// What reduce_into() uses (see reduce_isa()).
const KernelTable &active_kernels();

} // namespace ibex::coll::cpu

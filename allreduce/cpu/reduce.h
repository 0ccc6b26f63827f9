// Element-wise reduction kernels on host memory: what every collective algorithm calls to
// combine two buffers. One definition of each (type, op) pair's arithmetic, so the SIMD
// and scalar paths, and every rank, produce the same bits.
#pragma once

#include <cstddef>

#include "ibex/coll.h"

namespace ibex::coll {

// out[i] = op(a[i], b[i]) for i < count; out may be a or b (not a partial overlap).
// IBEX_AVG reduces as IBEX_SUM; finalize_avg() divides afterwards. type and op must be
// valid (the C API checks them before anything reaches a kernel).
void reduce_into(void *out, const void *a, const void *b, size_t count, ibex_datatype_t type,
                 ibex_redop_t op);

// buf[i] /= nranks, for IBEX_AVG (the caller checks the op): applied once, by the rank
// that owns the final value, so every rank ends with the same bits. Integers truncate.
void finalize_avg(void *buf, size_t count, ibex_datatype_t type, int nranks);

// The kernel set in use: "avx2+f16c" or "scalar". Chosen once, at first use, from the
// CPU (cpuid); IBEX_REDUCE_ISA=scalar forces the fallback.
const char *reduce_isa();

} // namespace ibex::coll

// Element-wise reduction kernels on GPU memory: the CUDA twin of allreduce/cpu/reduce.h,
// with the same arithmetic bit for bit (f16/bf16 through f32 with round-to-nearest-even
// and the same NaN rules, wrapping integers, min/max NaN rules, no FMA contraction:
// compiled with -fmad=false). Declared without CUDA headers (cudaStream_t is
// CUstream_st *), so host-only code may include this; built without CUDA, every call
// answers IBEX_ERR_NOT_SUPPORTED.
#pragma once

#include <cstddef>

#include "ibex/coll.h"

struct CUstream_st;

namespace ibex::coll {

// out[i] = op(a[i], b[i]) on `stream` (nullptr: the legacy default stream); all three
// are device pointers; out may be a or b. IBEX_AVG reduces as IBEX_SUM. Queues the
// kernel and returns: the caller synchronises the stream before reading out.
ibex_status_t cuda_reduce_into(void *out, const void *a, const void *b, size_t count, ibex_datatype_t type,
                               ibex_redop_t op, CUstream_st *stream);

// The rank-order fold of nin inputs, ((in[0] op in[1]) op in[2]) ..., divided by avg_ranks
// for IBEX_AVG, stored into each of the nout outputs, in one pass over memory: the bits of
// cuda_reduce_into() applied pairwise and then cuda_finalize_avg(), for the collectives
// that reduce peers' buffers mapped on the GPU (allreduce/gpu_direct.h). 1 <= nin, nout
// <= kMaxFold; an output may be one of the inputs (each element is read before it is
// written).
constexpr int kMaxFold = 8;
ibex_status_t cuda_fold_into(void *const *outs, int nout, const void *const *ins, int nin, size_t count,
                             ibex_datatype_t type, ibex_redop_t op, int avg_ranks, CUstream_st *stream);

// buf[i] /= nranks (integers truncate), as finalize_avg() does on the host.
ibex_status_t cuda_finalize_avg(void *buf, size_t count, ibex_datatype_t type, int nranks, CUstream_st *stream);

} // namespace ibex::coll

// Built without CUDA: the kernels' entry points exist and say so.
#include "allreduce/cuda/reduce.h"
#include "runtime/base/status.h"

namespace ibex::coll {

ibex_status_t cuda_reduce_into(void *, const void *, const void *, size_t, ibex_datatype_t, ibex_redop_t, CUstream_st *) {
    return fail(IBEX_ERR_NOT_SUPPORTED, "cuda_reduce_into: built without CUDA");
}

ibex_status_t cuda_fold_into(void *const *, int, const void *const *, int, size_t, ibex_datatype_t, ibex_redop_t, int,
                             CUstream_st *) {
    return fail(IBEX_ERR_NOT_SUPPORTED, "cuda_fold_into: built without CUDA");
}

ibex_status_t cuda_finalize_avg(void *, size_t, ibex_datatype_t, int, CUstream_st *) {
    return fail(IBEX_ERR_NOT_SUPPORTED, "cuda_finalize_avg: built without CUDA");
}

} // namespace ibex::coll

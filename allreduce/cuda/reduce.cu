// The reduction kernels: one grid-stride kernel per (type, op), moving 16-byte packets
// when all three buffers allow it (the kernels are memory-bound; wide loads are what
// gets them near copy bandwidth), element by element otherwise and for the tail.
#include <cuda_runtime_api.h>

#include "allreduce/cuda/elementwise.cuh"
#include "allreduce/cuda/fold.cuh"
#include "allreduce/cuda/reduce.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

using gpu::bfloat_bits;
using gpu::half_bits;

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;

template <class T> union Packet {
    uint4 raw;
    T e[sizeof(uint4) / sizeof(T)];
};

template <class T, int Op>
__global__ void reduce_kernel(T *out, const T *a, const T *b, size_t count, bool packets) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    size_t done = 0;
    if (packets) {
        constexpr size_t per = sizeof(uint4) / sizeof(T);
        const size_t n = count / per;
        const uint4 *pa = reinterpret_cast<const uint4 *>(a);
        const uint4 *pb = reinterpret_cast<const uint4 *>(b);
        uint4 *po = reinterpret_cast<uint4 *>(out);
        for (size_t p = i; p < n; p += stride) {
            Packet<T> x, y, z;
            x.raw = pa[p];
            y.raw = pb[p];
#pragma unroll
            for (size_t k = 0; k < per; ++k) z.e[k] = gpu::combine<T, Op>(x.e[k], y.e[k]);
            po[p] = z.raw;
        }
        done = n * per;
    }
    for (size_t k = done + i; k < count; k += stride) out[k] = gpu::combine<T, Op>(a[k], b[k]);
}

// One pass of the fold: each thread's share is fold_share (allreduce/cuda/fold.cuh).
template <class T, int Op>
__global__ void fold_kernel(gpu::FoldPointers p, size_t count, bool packets, int avg_ranks) {
    gpu::fold_share<T, Op>(p, count, packets, avg_ranks, size_t(blockIdx.x) * blockDim.x + threadIdx.x,
                           size_t(gridDim.x) * blockDim.x);
}

template <class T> __global__ void avg_kernel(T *buf, size_t count, int nranks) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t k = size_t(blockIdx.x) * blockDim.x + threadIdx.x; k < count; k += stride)
        buf[k] = gpu::divide(buf[k], nranks);
}

unsigned blocks_for(size_t work) {
    const size_t b = (work + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <class T, int Op>
void launch(void *out, const void *a, const void *b, size_t count, cudaStream_t s) {
    const bool packets = aligned16(out) && aligned16(a) && aligned16(b);
    const size_t work = packets ? count / (16 / sizeof(T)) + 1 : count;
    reduce_kernel<T, Op><<<blocks_for(work), kThreads, 0, s>>>(static_cast<T *>(out), static_cast<const T *>(a),
                                                               static_cast<const T *>(b), count, packets);
}

template <class T> void launch_op(void *out, const void *a, const void *b, size_t count, ibex_redop_t op, cudaStream_t s) {
    switch (op) {
    case IBEX_SUM:
    case IBEX_AVG: launch<T, IBEX_SUM>(out, a, b, count, s); break;
    case IBEX_PROD: launch<T, IBEX_PROD>(out, a, b, count, s); break;
    case IBEX_MIN: launch<T, IBEX_MIN>(out, a, b, count, s); break;
    case IBEX_MAX: launch<T, IBEX_MAX>(out, a, b, count, s); break;
    default: break;
    }
}

template <class T, int Op> void launch_fold(const gpu::FoldPointers &p, size_t count, int avg_ranks, cudaStream_t s) {
    bool packets = true;
    for (int k = 0; k < p.nin; ++k) packets = packets && aligned16(p.in[k]);
    for (int k = 0; k < p.nout; ++k) packets = packets && aligned16(p.out[k]);
    const size_t work = packets ? count / (16 / sizeof(T)) + 1 : count;
    fold_kernel<T, Op><<<blocks_for(work), kThreads, 0, s>>>(p, count, packets, avg_ranks);
}

template <class T> void launch_fold_op(const gpu::FoldPointers &p, size_t count, ibex_redop_t op, int avg_ranks, cudaStream_t s) {
    switch (op) {
    case IBEX_SUM: launch_fold<T, IBEX_SUM>(p, count, 0, s); break;
    case IBEX_AVG: launch_fold<T, IBEX_SUM>(p, count, avg_ranks, s); break;
    case IBEX_PROD: launch_fold<T, IBEX_PROD>(p, count, 0, s); break;
    case IBEX_MIN: launch_fold<T, IBEX_MIN>(p, count, 0, s); break;
    case IBEX_MAX: launch_fold<T, IBEX_MAX>(p, count, 0, s); break;
    default: break;
    }
}

ibex_status_t launched(const char *what) {
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return IBEX_OK;
    return fail(IBEX_ERR_SYSTEM, "%s: %s", what, cudaGetErrorString(e));
}

} // namespace

ibex_status_t cuda_reduce_into(void *out, const void *a, const void *b, size_t count, ibex_datatype_t type,
                               ibex_redop_t op, CUstream_st *stream) {
    if (op < 0 || op >= IBEX_REDOP_COUNT) return fail(IBEX_ERR_INVALID_ARGUMENT, "cuda_reduce_into: op %d", int(op));
    if (!count) return IBEX_OK;
    switch (type) {
    case IBEX_U8: launch_op<uint8_t>(out, a, b, count, op, stream); break;
    case IBEX_I32: launch_op<int32_t>(out, a, b, count, op, stream); break;
    case IBEX_I64: launch_op<int64_t>(out, a, b, count, op, stream); break;
    case IBEX_F16: launch_op<half_bits>(out, a, b, count, op, stream); break;
    case IBEX_BF16: launch_op<bfloat_bits>(out, a, b, count, op, stream); break;
    case IBEX_F32: launch_op<float>(out, a, b, count, op, stream); break;
    case IBEX_F64: launch_op<double>(out, a, b, count, op, stream); break;
    default: return fail(IBEX_ERR_INVALID_ARGUMENT, "cuda_reduce_into: type %d", int(type));
    }
    return launched("cuda_reduce_into");
}

ibex_status_t cuda_fold_into(void *const *outs, int nout, const void *const *ins, int nin, size_t count,
                             ibex_datatype_t type, ibex_redop_t op, int avg_ranks, CUstream_st *stream) {
    if (op < 0 || op >= IBEX_REDOP_COUNT) return fail(IBEX_ERR_INVALID_ARGUMENT, "cuda_fold_into: op %d", int(op));
    if (nin < 1 || nin > kMaxFold || nout < 1 || nout > kMaxFold)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "cuda_fold_into: %d inputs and %d outputs (1 to %d each)", nin, nout,
                    kMaxFold);
    if (op == IBEX_AVG && avg_ranks < 1) return fail(IBEX_ERR_INVALID_ARGUMENT, "cuda_fold_into: avg over %d", avg_ranks);
    if (!count) return IBEX_OK;
    gpu::FoldPointers p{};
    for (int k = 0; k < nin; ++k) p.in[k] = ins[k];
    for (int k = 0; k < nout; ++k) p.out[k] = outs[k];
    p.nin = nin;
    p.nout = nout;
    switch (type) {
    case IBEX_U8: launch_fold_op<uint8_t>(p, count, op, avg_ranks, stream); break;
    case IBEX_I32: launch_fold_op<int32_t>(p, count, op, avg_ranks, stream); break;
    case IBEX_I64: launch_fold_op<int64_t>(p, count, op, avg_ranks, stream); break;
    case IBEX_F16: launch_fold_op<half_bits>(p, count, op, avg_ranks, stream); break;
    case IBEX_BF16: launch_fold_op<bfloat_bits>(p, count, op, avg_ranks, stream); break;
    case IBEX_F32: launch_fold_op<float>(p, count, op, avg_ranks, stream); break;
    case IBEX_F64: launch_fold_op<double>(p, count, op, avg_ranks, stream); break;
    default: return fail(IBEX_ERR_INVALID_ARGUMENT, "cuda_fold_into: type %d", int(type));
    }
    return launched("cuda_fold_into");
}

ibex_status_t cuda_finalize_avg(void *buf, size_t count, ibex_datatype_t type, int nranks, CUstream_st *stream) {
    if (nranks < 1) return fail(IBEX_ERR_INVALID_ARGUMENT, "cuda_finalize_avg: nranks %d", nranks);
    if (!count) return IBEX_OK;
    const unsigned blocks = blocks_for(count);
    switch (type) {
    case IBEX_U8: avg_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint8_t *>(buf), count, nranks); break;
    case IBEX_I32: avg_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<int32_t *>(buf), count, nranks); break;
    case IBEX_I64: avg_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<int64_t *>(buf), count, nranks); break;
    case IBEX_F16: avg_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<half_bits *>(buf), count, nranks); break;
    case IBEX_BF16: avg_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<bfloat_bits *>(buf), count, nranks); break;
    case IBEX_F32: avg_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float *>(buf), count, nranks); break;
    case IBEX_F64: avg_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<double *>(buf), count, nranks); break;
    default: return fail(IBEX_ERR_INVALID_ARGUMENT, "cuda_finalize_avg: type %d", int(type));
    }
    return launched("cuda_finalize_avg");
}

} // namespace ibex::coll

// The reduction kernels: one grid-stride kernel per (type, op), moving 16-byte packets
// when all three buffers allow it (the kernels are memory-bound; wide loads are what
// gets them near copy bandwidth), element by element otherwise and for the tail.
#include <cuda_runtime_api.h>

#include "allreduce/cuda/elementwise.cuh"
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

// The body of the mapped collectives' fold kernel (cuda_fold_into, allreduce/gpu_direct.h):
// one thread's share of the rank-order fold of several inputs into several outputs. It is
// host-callable, so a host test runs the kernel's own code on machines without a GPU
// (tests/allreduce/cuda/fold_host_test.cpp), as elementwise_host_test does for the
// arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allreduce/cuda/elementwise.cuh"
#include "allreduce/cuda/reduce.h"

namespace ibex::coll::gpu {

struct FoldPointers {
    const void *in[kMaxFold];
    void *out[kMaxFold];
    int nin, nout;
};

// 16 bytes moved as one load or store (the kernels are memory-bound).
struct alignas(16) Wide {
    uint32_t w[4];
};
template <class T> union Lanes {
    Wide raw;
    T e[sizeof(Wide) / sizeof(T)];
};

// Thread `first` of `stride` folds its 16-byte packets (when `packets`: every pointer is
// 16-byte aligned) and then its elements of what is left. Each element is read from every
// input before it is stored into any output, so an output may be an input.
template <class T, int Op>
IBEX_HD void fold_share(const FoldPointers &p, size_t count, bool packets, int avg_ranks, size_t first, size_t stride) {
    size_t done = 0;
    if (packets) {
        constexpr size_t per = sizeof(Wide) / sizeof(T);
        const size_t n = count / per;
        for (size_t q = first; q < n; q += stride) {
            Lanes<T> acc, x;
            acc.raw = static_cast<const Wide *>(p.in[0])[q];
            for (int k = 1; k < p.nin; ++k) {
                x.raw = static_cast<const Wide *>(p.in[k])[q];
                for (size_t e = 0; e < per; ++e) acc.e[e] = combine<T, Op>(acc.e[e], x.e[e]);
            }
            if (avg_ranks)
                for (size_t e = 0; e < per; ++e) acc.e[e] = divide(acc.e[e], avg_ranks);
            for (int k = 0; k < p.nout; ++k) static_cast<Wide *>(p.out[k])[q] = acc.raw;
        }
        done = n * per;
    }
    for (size_t e = done + first; e < count; e += stride) {
        T acc = static_cast<const T *>(p.in[0])[e];
        for (int k = 1; k < p.nin; ++k) acc = combine<T, Op>(acc, static_cast<const T *>(p.in[k])[e]);
        if (avg_ranks) acc = divide(acc, avg_ranks);
        for (int k = 0; k < p.nout; ++k) static_cast<T *>(p.out[k])[e] = acc;
    }
}

} // namespace ibex::coll::gpu

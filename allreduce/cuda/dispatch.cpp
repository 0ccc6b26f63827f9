#include "allreduce/cuda/dispatch.h"

#include <cstring>
#include <vector>

#include "allreduce/cpu/reduce.h"
#include "allreduce/cuda/reduce.h"
#include "runtime/base/simulated_device.h"
#include "runtime/base/status.h"

#if IBEX_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ibex::coll {
namespace {

#if IBEX_HAVE_CUDA
ibex_status_t cuda_error(cudaError_t e, const char *what) {
    cudaGetLastError();
    return fail(e == cudaErrorMemoryAllocation ? IBEX_ERR_NO_MEMORY : IBEX_ERR_SYSTEM, "%s: %s", what, cudaGetErrorString(e));
}

ibex_status_t sync_stream(const char *what) {
    const cudaError_t e = cudaStreamSynchronize(cudaStreamPerThread);
    return e == cudaSuccess ? IBEX_OK : cuda_error(e, what);
}

CUstream_st *stream() { return cudaStreamPerThread; }

// Per-thread operand copies for a reduction that mixes device memory with memory on the
// other side: grown on demand, kept for the thread's life.
struct Temp {
    void *p = nullptr;
    size_t bytes = 0;
    bool device = false;
    ~Temp() {
        if (!p) return;
        if (device) cudaFree(p);
        else cuda::free_pinned(p);
    }
    ibex_status_t reserve(size_t n, bool on_device) {
        if (p && bytes >= n) return IBEX_OK;
        if (p) {
            if (device) cudaFree(p);
            else cuda::free_pinned(p);
            p = nullptr;
            bytes = 0;
        }
        device = on_device;
        if (on_device) {
            if (const cudaError_t e = cudaMalloc(&p, n); e != cudaSuccess) return cuda_error(e, "reduction operand buffer");
        } else if (!(p = cuda::alloc_pinned(n))) {
            return IBEX_ERR_NO_MEMORY;
        }
        bytes = n;
        return IBEX_OK;
    }
};
thread_local Temp t_dev[2], t_host[2];

// Makes `*x` readable where the reduction runs (on the GPU or on the host), copying it
// into temp when it lives on the other side.
ibex_status_t bring(const void **x, size_t bytes, bool on_gpu, Temp &temp) {
    const bool ok = on_gpu ? cuda::device_accessible(*x) : !is_device_pointer(*x);
    if (ok) return IBEX_OK;
    IBEX_TRY(temp.reserve(bytes, on_gpu));
    if (const cudaError_t e = cudaMemcpyAsync(temp.p, *x, bytes, cudaMemcpyDefault, cudaStreamPerThread); e != cudaSuccess)
        return cuda_error(e, "reduction operand copy");
    *x = temp.p;
    return IBEX_OK;
}

// Makes `device` current for a scope, and the previous one again after it.
class OnDevice {
public:
    explicit OnDevice(int device) {
        if (cudaGetDevice(&prev_) == cudaSuccess && prev_ != device && cudaSetDevice(device) == cudaSuccess) return;
        prev_ = -1;
    }
    ~OnDevice() {
        if (prev_ >= 0) cudaSetDevice(prev_);
    }
    OnDevice(const OnDevice &) = delete;
    OnDevice &operator=(const OnDevice &) = delete;

private:
    int prev_ = -1;
};

// Queues work on the library's stream of `device` (cuda::library_stream), with that GPU
// current, so that the caller's next fence covers it.
template <typename Queue>
ibex_status_t on_library_stream(int device, Queue queue) {
    CUstream_st *s = nullptr;
    IBEX_TRY(cuda::library_stream(device, &s));
    OnDevice on(device);
    IBEX_TRY(queue(s));
    cuda::stream_used(device);
    return IBEX_OK;
}
#endif

bool simulated(const void *p) { return cuda::simulated::any() && cuda::simulated::backing(p); }

} // namespace

ibex_status_t fold_queued(void *const *outs, int nout, const void *const *ins, int nin, size_t count,
                          ibex_datatype_t type, ibex_redop_t op, int nranks, int device) {
    bool sim = false;
    for (int k = 0; k < nin; ++k) sim = sim || simulated(ins[k]);
    for (int k = 0; k < nout; ++k) sim = sim || simulated(outs[k]);
    if (sim) {
        // Through a temporary: an output may be an input read later in the fold.
        if (nin < 1) return fail(IBEX_ERR_INVALID_ARGUMENT, "fold of no inputs");
        const size_t bytes = count * ibex_datatype_size(type);
        std::vector<uint8_t> acc(bytes);
        std::memcpy(acc.data(), cuda::simulated::host_view(ins[0]), bytes);
        for (int k = 1; k < nin; ++k) reduce_into(acc.data(), acc.data(), cuda::simulated::host_view(ins[k]), count, type, op);
        if (op == IBEX_AVG) finalize_avg(acc.data(), count, type, nranks);
        for (int k = 0; k < nout; ++k) std::memcpy(cuda::simulated::host_view(outs[k]), acc.data(), bytes);
        return IBEX_OK;
    }
#if IBEX_HAVE_CUDA
    return on_library_stream(
        device, [&](CUstream_st *s) { return cuda_fold_into(outs, nout, ins, nin, count, type, op, nranks, s); });
#else
    (void)device;
    return fail(IBEX_ERR_INTERNAL, "device pointer without CUDA");
#endif
}

ibex_status_t settle_legacy_stream(int device) {
#if IBEX_HAVE_CUDA
    if (!cuda::available()) return IBEX_OK;
    OnDevice on(device);
    const cudaError_t e = cudaStreamSynchronize(cudaStreamLegacy);
    return e == cudaSuccess ? IBEX_OK : cuda_error(e, "cudaStreamSynchronize (legacy default stream)");
#else
    (void)device;
    return IBEX_OK;
#endif
}

ibex_status_t reduce_into_any(void *out, const void *a, const void *b, size_t count, ibex_datatype_t type,
                              ibex_redop_t op) {
    // Test seam: simulated GPU memory (runtime/base/simulated_device.h) is worked on through
    // its host backing. One relaxed load each when nothing is simulated.
    out = cuda::simulated::host_view(out);
    a = cuda::simulated::host_view(a);
    b = cuda::simulated::host_view(b);
    if (!is_device_pointer(out) && !is_device_pointer(a) && !is_device_pointer(b)) {
        reduce_into(out, a, b, count, type, op);
        return IBEX_OK;
    }
#if IBEX_HAVE_CUDA
    // The result's home decides where the arithmetic runs; an operand on the other side
    // is copied over first (the collectives' landing buffers are host memory).
    const bool on_gpu = cuda::device_accessible(out) && cuda::memory_kind(out) != cuda::MemoryKind::kPinnedHost;
    const size_t bytes = count * ibex_datatype_size(type);
    Temp *temps = on_gpu ? t_dev : t_host;
    IBEX_TRY(bring(&a, bytes, on_gpu, temps[0]));
    IBEX_TRY(bring(&b, bytes, on_gpu, temps[1]));
    if (!on_gpu) {
        IBEX_TRY(sync_stream("reduction operand copy"));
        reduce_into(out, a, b, count, type, op);
        return IBEX_OK;
    }
    IBEX_TRY(cuda_reduce_into(out, a, b, count, type, op, stream()));
    return sync_stream("cuda_reduce_into");
#else
    return fail(IBEX_ERR_INTERNAL, "device pointer without CUDA");
#endif
}

ibex_status_t finalize_avg_any(void *buf, size_t count, ibex_datatype_t type, int nranks) {
    buf = cuda::simulated::host_view(buf);
    if (!is_device_pointer(buf)) {
        finalize_avg(buf, count, type, nranks);
        return IBEX_OK;
    }
#if IBEX_HAVE_CUDA
    IBEX_TRY(cuda_finalize_avg(buf, count, type, nranks, stream()));
    return sync_stream("cuda_finalize_avg");
#else
    return fail(IBEX_ERR_INTERNAL, "device pointer without CUDA");
#endif
}

ibex_status_t copy_any(void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return IBEX_OK;
    dst = cuda::simulated::host_view(dst);
    src = cuda::simulated::host_view(src);
    if (!is_device_pointer(dst) && !is_device_pointer(src)) {
        std::memmove(dst, src, bytes);
        return IBEX_OK;
    }
#if IBEX_HAVE_CUDA
    if (const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamPerThread); e != cudaSuccess)
        return cuda_error(e, "cudaMemcpyAsync");
    return sync_stream("cudaMemcpy");
#else
    return fail(IBEX_ERR_INTERNAL, "device pointer without CUDA");
#endif
}

} // namespace ibex::coll

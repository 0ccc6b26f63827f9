#include "tools/ibex_allreduce_perf/memory.h"

#include <cstdlib>
#include <cstring>

#include "runtime/base/cuda_memory.h"
#include "runtime/base/status.h"

#if IBEX_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ibex::collperf {
namespace {

#if IBEX_HAVE_CUDA
ibex_status_t cuda_failed(cudaError_t e, const char *what) {
    cudaGetLastError();
    return fail(e == cudaErrorMemoryAllocation ? IBEX_ERR_NO_MEMORY : IBEX_ERR_SYSTEM, "%s: %s", what,
                cudaGetErrorString(e));
}
#endif

} // namespace

bool gpu_usable(std::string *why) {
    if (cuda::available()) return true;
    *why = std::string("no CUDA device: ") + cuda::unavailable_reason();
    return false;
}

PerfBuffer::~PerfBuffer() {
    if (!p_) return;
#if IBEX_HAVE_CUDA
    if (gpu_) {
        cudaFree(p_);
        return;
    }
#endif
    if (shared_) {
        ibex_comm_mem_free(shared_, p_);
        return;
    }
    std::free(p_);
}

ibex_status_t PerfBuffer::allocate(size_t bytes, bool gpu, int rank, ibex_comm_t *shared) {
    bytes_ = bytes ? bytes : 1;
    gpu_ = gpu;
    if (gpu) {
#if IBEX_HAVE_CUDA
        int count = 0;
        cudaError_t e = cudaGetDeviceCount(&count);
        if (e != cudaSuccess || count <= 0) return fail(IBEX_ERR_NOT_SUPPORTED, "no CUDA device: %s", cuda::unavailable_reason());
        void *p = nullptr;
        if ((e = cudaSetDevice(rank % count)) != cudaSuccess) return cuda_failed(e, "cudaSetDevice");
        if ((e = cudaMalloc(&p, bytes_)) != cudaSuccess) return cuda_failed(e, "cudaMalloc");
        p_ = static_cast<uint8_t *>(p);
        return fill(0);
#else
        (void)rank;
        return fail(IBEX_ERR_NOT_SUPPORTED, "no CUDA device: %s", cuda::unavailable_reason());
#endif
    }
    void *p = nullptr;
    if (shared) {
        IBEX_TRY(ibex_comm_mem_alloc(shared, bytes_, &p));
        shared_ = shared;
        p_ = static_cast<uint8_t *>(p);
        return fill(0);
    }
    if (posix_memalign(&p, 4096, bytes_) != 0) return fail(IBEX_ERR_NO_MEMORY, "posix_memalign(%zu)", bytes_);
    p_ = static_cast<uint8_t *>(p);
    return fill(0); // faults the pages in
}

// A copy whose one side is this buffer (to_buffer: host -> buffer).
ibex_status_t PerfBuffer::copy(void *dst, const void *src, size_t n, bool to_buffer) const {
#if IBEX_HAVE_CUDA
    if (gpu_) {
        const cudaError_t e = cudaMemcpy(dst, src, n, to_buffer ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
        return e == cudaSuccess ? IBEX_OK : cuda_failed(e, to_buffer ? "cudaMemcpy to the GPU" : "cudaMemcpy from the GPU");
    }
#else
    (void)to_buffer;
#endif
    std::memcpy(dst, src, n);
    return IBEX_OK;
}

ibex_status_t PerfBuffer::fill(uint8_t v) const {
#if IBEX_HAVE_CUDA
    if (gpu_) {
        cudaError_t e = cudaMemset(p_, v, bytes_);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        return e == cudaSuccess ? IBEX_OK : cuda_failed(e, "cudaMemset");
    }
#endif
    std::memset(p_, v, bytes_);
    return IBEX_OK;
}

} // namespace ibex::collperf

// Where the benchmark's buffers live: host memory (page-aligned, faulted in before
// anything is timed) or GPU memory (cudaMalloc on GPU rank % count, as nccl-tests always
// does). The collectives take either; the tool's own reads and writes (inputs, the
// poisoned output, the #wrong check) go through these calls, which copy across for GPU
// buffers so the check compares the very bits the collective left there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <ibex/coll.h>
#include <ibex/ibex.h>

namespace ibex::collperf {

// A CUDA build with a usable GPU here; otherwise *why says which is missing. Call it in
// the rank, after any fork: CUDA initialised before a fork does not survive in the child.
bool gpu_usable(std::string *why);

class PerfBuffer {
public:
    PerfBuffer() = default;
    ~PerfBuffer();
    PerfBuffer(const PerfBuffer &) = delete;
    PerfBuffer &operator=(const PerfBuffer &) = delete;

    // bytes of host or GPU memory (GPU: on GPU rank % count), zeroed. shared: host memory
    // from ibex_comm_mem_alloc on it (freed with the buffer, which must go first).
    ibex_status_t allocate(size_t bytes, bool gpu, int rank, ibex_comm_t *shared = nullptr);
    uint8_t *data() const { return p_; }
    bool on_gpu() const { return gpu_; }

    // host -> [dst, dst + n) inside this buffer, and [src, src + n) inside it -> host.
    ibex_status_t write(void *dst, const void *host, size_t n) const { return copy(dst, host, n, true); }
    ibex_status_t read(void *host, const void *src, size_t n) const { return copy(host, src, n, false); }
    // Every byte set to v.
    ibex_status_t fill(uint8_t v) const;

private:
    ibex_status_t copy(void *dst, const void *src, size_t n, bool to_buffer) const;

    uint8_t *p_ = nullptr;
    size_t bytes_ = 0;
    bool gpu_ = false;
    ibex_comm_t *shared_ = nullptr;
};

} // namespace ibex::collperf

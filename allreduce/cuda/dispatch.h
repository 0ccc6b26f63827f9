// Where the collectives choose between the host and the GPU kernels. The communicator
// calls these instead of reduce_into()/finalize_avg()/memcpy when a buffer may be on the
// GPU: each looks at where the memory lives (cudaPointerGetAttributes, cached "no CUDA"
// answer when there is no driver) and runs the CPU code for host memory, the CUDA
// kernels for device memory, synchronously in both cases.
#pragma once

#include <cstddef>

#include "ibex/coll.h"
#include "runtime/base/cuda_memory.h"

namespace ibex::coll {

// True for cudaMalloc memory (which the CPU cannot touch). False for host, pinned host
// and managed memory, and always when CUDA is absent.
inline bool is_device_pointer(const void *p) { return cuda::is_device_pointer(p); }

// reduce_into() for any memory, synchronous. Where `out` lives decides where the
// arithmetic runs: the CUDA kernels for GPU memory, the CPU kernels for host memory; an
// operand living on the other side is first copied into a per-thread buffer (pinned host
// memory is read by the GPU in place). Device buffers must belong to the calling
// thread's current GPU (or be reachable from it by peer access).
ibex_status_t reduce_into_any(void *out, const void *a, const void *b, size_t count, ibex_datatype_t type,
                              ibex_redop_t op);
ibex_status_t finalize_avg_any(void *buf, size_t count, ibex_datatype_t type, int nranks);
// cuda_fold_into() queued on the library's stream of `device` (cuda::library_stream),
// after the copies queued there before, and not waited for: the caller's next
// cuda::fence_copies() covers it. The buffers are device memory that GPU can reach (a
// peer's CUDA IPC mapping included). Simulated GPU memory is folded at once, on the CPU,
// through its host backing. The fold: nin inputs in rank order (divided by nranks for
// IBEX_AVG), stored into each of nout outputs, at most kMaxFold of each.
ibex_status_t fold_queued(void *const *outs, int nout, const void *const *ins, int nin, size_t count,
                          ibex_datatype_t type, ibex_redop_t op, int nranks, int device);
// Blocks until the work queued on `device`'s legacy default stream is done: a buffer that
// other processes will read must be complete (a cudaMemcpy from pageable memory returns
// before its DMA lands). Nothing to wait for without CUDA.
ibex_status_t settle_legacy_stream(int device);

// memcpy that also crosses between host and device memory (cudaMemcpy when either side
// is on the GPU).
ibex_status_t copy_any(void *dst, const void *src, size_t bytes);

} // namespace ibex::coll

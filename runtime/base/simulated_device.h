// Test seam: host memory that the library takes for GPU memory, so the GPU-buffer paths
// (the memory-type lookups, the soft provider's staging shadows, the collectives'
// dispatch) can be exercised on a host without a GPU. A test maps a "device view" the
// CPU cannot touch (PROT_NONE, as device memory is to the CPU) and hands over a host
// "backing" buffer of the same size: memory_kind() answers kDevice for the view, and
// copy_async(), copy_any() and the reductions reach its bytes through the backing. Any
// other CPU access to the view faults, as a CPU access to cudaMalloc memory does.
// Nothing in the library adds ranges; with none added every query is one relaxed load.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ibex::cuda::simulated {

// Treats [view, view + bytes) as memory of GPU 0 whose contents live at backing. False
// when the table (a handful of ranges) is full.
bool add_range(void *view, size_t bytes, void *backing);
// Forgets the range that starts at view (its slot is reused).
void remove_range(void *view);
// Forgets every range.
void clear();
// Some range is simulated.
bool any();
// The backing byte behind p when p lies in a simulated range, nullptr otherwise.
uint8_t *backing(const void *p);
// Copies to and from simulated ranges happen at once, unless deferred: then they queue
// and a fence over them completes only at its `queries`-th copies_done() (or at
// wait_copies()), standing in for a copy engine that is still busy. 0: at once.
void set_deferred_copies(int queries);
// Deferred copies that finish by the clock instead, as on a copy engine that moves
// bytes_per_us and starts each copy latency_us after the one before it ends (one stream,
// in order): a fence completes once the engine has reached its last copy. For measuring
// how the staging overlaps copies with the wire on a host without a GPU. move_bytes: the
// CPU moves the bytes when the fence completes, a cost a GPU's copy engine does not put on
// the CPU; false leaves them unmoved (the results are then wrong: timing only).
// bytes_per_us <= 0: off.
void set_copy_engine(double bytes_per_us, double latency_us, bool move_bytes = true);
// cuda_memory.cpp's side: queues a copy when deferring (false: copy it now).
bool defer_copy(void *dst, const void *src, size_t bytes);
// A fence over the copies queued since the last one (0: none), its completion check
// (performs the fence's copies, and every earlier one, when it completes), dropping one
// (its copies are performed: they were promised), and performing everything.
uint64_t fence();
bool fence_done(uint64_t id);
void drop(uint64_t id);
void finish_all();

// p itself unless it lies in a simulated range; then its backing byte.
inline const void *host_view(const void *p) {
    const uint8_t *b = any() ? backing(p) : nullptr;
    return b ? b : p;
}
inline void *host_view(void *p) { return const_cast<void *>(host_view(static_cast<const void *>(p))); }

} // namespace ibex::cuda::simulated

// Where a pointer lives, and the few CUDA services the transports need (pinned staging
// memory, host<->device copies, dma-buf export). libibex links the CUDA runtime
// statically; the runtime loads the driver (libcuda.so.1) on first use, so the library
// also runs on a host with no NVIDIA driver: available() is then false, every pointer
// is host memory and nothing here touches CUDA again. Built without CUDA
// (IBEX_HAVE_CUDA off) the same functions answer "host" and "not available". Ranges a
// test declares as simulated GPU memory (simulated_device.h) answer "device" and are
// copied through their host backing, with or without CUDA.
#pragma once

#include <cstddef>
#include <cstdint>

#include <ibex/ibex.h>

struct CUstream_st;

namespace ibex::cuda {

// kPinnedHost: page-locked by cudaHostAlloc/cudaHostRegister, so kernels can address it.
enum class MemoryKind : uint8_t { kHost, kPinnedHost, kDevice, kManaged };

// Compiled with CUDA support.
bool built();
// A CUDA driver is loaded and at least one GPU is visible. Decided once per process.
bool available();
// Why available() is false ("" when it is true).
const char *unavailable_reason();

// Host for anything CUDA does not know (plain malloc/stack), device for cudaMalloc,
// managed for cudaMallocManaged. Cheap when CUDA is unavailable (no driver call).
MemoryKind memory_kind(const void *p);
// The dispatch test of the collectives and transports: memory the CPU cannot touch.
inline bool is_device_pointer(const void *p) { return memory_kind(p) == MemoryKind::kDevice; }
// A kernel may dereference it (device, managed or pinned host memory).
inline bool device_accessible(const void *p) { return memory_kind(p) != MemoryKind::kHost; }
// Ordinal of the GPU holding a device pointer, -1 otherwise.
int pointer_device(const void *p);

// The GPU can export dma-buf handles for its allocations.
bool dmabuf_supported(int device);
// A dma-buf fd for [base, base+size) (both host-page aligned). The caller closes it.
ibex_status_t export_dmabuf(uint64_t base, uint64_t size, int *fd);

// CUDA IPC: what another process of this host needs to map a device allocation of ours
// (cudaIpcGetMemHandle's 64 bytes), and where that allocation lies here.
struct IpcExport {
    uint8_t handle[64];
    uint64_t base = 0; // the allocation holding the exported pointer
    uint64_t size = 0;
    int device = -1;
    // The GPU itself, the same number in every process (its PCI location, whatever
    // CUDA_VISIBLE_DEVICES numbers it there): ranks whose buffers share one GPU see it.
    uint32_t gpu_key = 0;
};
// Exports the device allocation holding p. NOT_SUPPORTED for host memory, for memory that
// CUDA IPC cannot export (cuMem allocations) and for simulated ranges, with the reason.
ibex_status_t ipc_export(const void *p, IpcExport *out);
// Maps an allocation another process exported, on its GPU; the detail says why not
// (a stale handle: the allocation was freed or its process died; this process's own
// allocation; a GPU without peer access to the exporter's).
ibex_status_t ipc_open(const IpcExport &e, void **out);
void ipc_close(void *mapped);

// Page-locked host memory for staging (nullptr on failure, detail recorded).
void *alloc_pinned(size_t bytes);
void free_pinned(void *p);

// Page-locked host memory made of ordinary anonymous pages (mmap, then cudaHostRegister):
// other processes can reach it with process_vm_readv/writev, which cudaHostAlloc's
// driver-mapped pages may refuse. memory_kind() says kPinnedHost for it (kHost without
// CUDA); is_pinned_mapped() tells it apart. nullptr on failure, detail recorded.
void *alloc_pinned_mapped(size_t bytes);
void free_pinned_mapped(void *p);
bool is_pinned_mapped(const void *p);

// Queues a copy between host and device memory (either direction, cudaMemcpyDefault) on
// this library's own stream of `device`; wait_copies() blocks until every copy this
// thread queued has finished. The stream is a blocking one, so copies are ordered after
// the work already queued on the legacy default stream of that device (a cudaMemcpy's
// trailing DMA included); ibex does not know the application's other streams, so it must
// synchronise those before handing buffers over.
ibex_status_t copy_async(void *dst, const void *src, size_t bytes, int device);
ibex_status_t wait_copies();

// A mark in this thread's queued copies, for callers that go on while copies run (the
// soft provider sends a staged WR once its copy is done, without blocking the post).
// fence_copies() covers every copy this thread queued since the last fence or
// wait_copies(); copies_done() answers without blocking and, once true, has released the
// fence; drop_fence() releases one that is no longer wanted. An empty fence is done.
// The stream copy_async() queues on for `device` (made on first use), for work that must be
// ordered with those copies, such as kernels; after queueing on it, stream_used(device)
// makes the next fence_copies() or wait_copies() of this thread cover that work too.
ibex_status_t library_stream(int device, CUstream_st **out);
void stream_used(int device);

struct CopyFence {
    uint64_t hw = 0;  // CUDA events, by id
    uint64_t sim = 0; // simulated copies (simulated_device.h), by id
    bool empty() const { return !hw && !sim; }
};
ibex_status_t fence_copies(CopyFence *out);
bool copies_done(CopyFence &f);
void drop_fence(CopyFence &f);

} // namespace ibex::cuda

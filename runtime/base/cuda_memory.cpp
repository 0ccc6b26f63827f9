#include "runtime/base/cuda_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/base/log.h"
#include "runtime/base/simulated_device.h"
#include "runtime/base/status.h"

#if IBEX_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <vector>
#endif

namespace ibex::cuda {

#if IBEX_HAVE_CUDA
namespace {

constexpr int kMaxDevices = 64;

struct State {
    std::once_flag once;
    bool ok = false;
    std::string reason;
    int devices = 0;
    std::mutex mutex;
    cudaStream_t streams[kMaxDevices] = {};
    // Copy fences (under mutex): the events of each, and recorded events to reuse.
    struct Fence {
        uint64_t id;
        int n;
        int device[4];
        cudaEvent_t event[4];
    };
    std::deque<Fence> fences;
    std::vector<cudaEvent_t> spare[kMaxDevices];
    uint64_t next_fence = 0;
    // Driver API entry points, reached through the runtime so no -lcuda is needed.
    CUresult (*get_handle)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long) = nullptr;
    CUresult (*device_attribute)(int *, CUdevice_attribute, CUdevice) = nullptr;
    CUresult (*address_range)(CUdeviceptr *, size_t *, CUdeviceptr) = nullptr;
};

State &state() {
    static State s;
    std::call_once(s.once, [] {
        int n = 0;
        const cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess || n <= 0) {
            s.reason = e != cudaSuccess ? std::string("CUDA: ") + cudaGetErrorString(e) : "CUDA: no GPU visible";
            cudaGetLastError();
            return;
        }
        s.ok = true;
        s.devices = n < kMaxDevices ? n : kMaxDevices;
        cudaDriverEntryPointQueryResult q;
        void *fn = nullptr;
        if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &fn, 12000, cudaEnableDefault, &q) ==
                cudaSuccess && q == cudaDriverEntryPointSuccess)
            s.get_handle = reinterpret_cast<decltype(s.get_handle)>(fn);
        fn = nullptr;
        if (cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            s.device_attribute = reinterpret_cast<decltype(s.device_attribute)>(fn);
        fn = nullptr;
        if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            s.address_range = reinterpret_cast<decltype(s.address_range)>(fn);
        cudaGetLastError();
    });
    return s;
}

// Streams this thread queued copies on since its last wait_copies().
thread_local uint64_t t_pending = 0;

// Switches the calling thread's current device for a scope, and back.
class DeviceGuard {
public:
    explicit DeviceGuard(int device) {
        if (cudaGetDevice(&old_) != cudaSuccess) old_ = -1;
        if (old_ != device) cudaSetDevice(device);
    }
    ~DeviceGuard() {
        int now = -1;
        if (old_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != old_) cudaSetDevice(old_);
    }

private:
    int old_ = -1;
};

// Binds a device's primary context to the calling thread for a scope. The driver entry
// points (cuMemGetAddressRange, cuMemGetHandleForAddressRange) need a current context and,
// unlike the runtime's calls, do not bind one: on a thread that has made no runtime call
// yet (a communicator's progress thread) they fail with CUDA_ERROR_INVALID_CONTEXT.
// cudaSetDevice binds it (CUDA 12 and later), even where the device is already current.
class ContextGuard {
public:
    explicit ContextGuard(int device) {
        if (cudaGetDevice(&old_) != cudaSuccess) old_ = -1;
        ok_ = cudaSetDevice(device) == cudaSuccess;
        if (!ok_) cudaGetLastError();
    }
    ~ContextGuard() {
        if (old_ >= 0) cudaSetDevice(old_);
    }
    bool ok() const { return ok_; }

private:
    int old_ = -1;
    bool ok_ = false;
};

ibex_status_t cuda_fail(cudaError_t e, const char *what) {
    cudaGetLastError();
    return fail(e == cudaErrorMemoryAllocation ? IBEX_ERR_NO_MEMORY : IBEX_ERR_SYSTEM, "%s: %s", what, cudaGetErrorString(e));
}

} // namespace

bool built() { return true; }
// Asked on every collective (memory_kind): the answer is cached past state()'s call_once.
bool available() {
    static const bool ok = state().ok;
    return ok;
}
const char *unavailable_reason() { return state().ok ? "" : state().reason.c_str(); }

static MemoryKind hw_memory_kind(const void *p) {
    if (!p || !available()) return MemoryKind::kHost;
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return MemoryKind::kHost;
    }
    if (a.type == cudaMemoryTypeDevice) return MemoryKind::kDevice;
    if (a.type == cudaMemoryTypeManaged) return MemoryKind::kManaged;
    if (a.type == cudaMemoryTypeHost) return MemoryKind::kPinnedHost;
    return MemoryKind::kHost;
}

static int hw_pointer_device(const void *p) {
    if (!p || !available()) return -1;
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ? a.device : -1;
}

bool dmabuf_supported(int device) {
    State &s = state();
    if (!s.ok || !s.device_attribute || !s.get_handle || device < 0) return false;
    int v = 0;
    return s.device_attribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device) == CUDA_SUCCESS && v;
}

ibex_status_t export_dmabuf(uint64_t base, uint64_t size, int *fd) {
    State &s = state();
    if (!s.ok || !s.get_handle) return fail(IBEX_ERR_NOT_SUPPORTED, "dma-buf export: cuMemGetHandleForAddressRange unavailable");
    const int device = hw_pointer_device(reinterpret_cast<const void *>(base));
    if (device < 0)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "dma-buf export: 0x%llx is not GPU memory", static_cast<unsigned long long>(base));
    ContextGuard g(device);
    if (!g.ok()) return fail(IBEX_ERR_SYSTEM, "dma-buf export: cannot make GPU %d current on this thread", device);
    int handle = -1;
    const CUresult r = s.get_handle(&handle, static_cast<CUdeviceptr>(base), size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != CUDA_SUCCESS || handle < 0)
        return fail(r == CUDA_ERROR_NOT_SUPPORTED ? IBEX_ERR_NOT_SUPPORTED : IBEX_ERR_SYSTEM,
                    "cuMemGetHandleForAddressRange(0x%llx, %llu) failed: CUresult %d", static_cast<unsigned long long>(base),
                    static_cast<unsigned long long>(size), static_cast<int>(r));
    *fd = handle;
    return IBEX_OK;
}

// FNV-1a of an IPC handle, for the debug log: two exports whose handles match are one
// underlying block (cudaMalloc sub-allocates small buffers from larger ones).
static uint64_t handle_digest(const uint8_t (&h)[64]) {
    uint64_t d = 1469598103934665603ull;
    for (uint8_t b : h) d = (d ^ b) * 1099511628211ull;
    return d;
}

// domain << 16 | bus << 8 | device, with the top bit set so that 0 means unknown.
static uint32_t hw_gpu_key(int device) {
    static std::atomic<uint32_t> keys[kMaxDevices];
    if (device < 0 || device >= kMaxDevices) return 0;
    uint32_t k = keys[device].load(std::memory_order_relaxed);
    if (k) return k;
    int domain = 0, bus = 0, dev = 0;
    if (cudaDeviceGetAttribute(&domain, cudaDevAttrPciDomainId, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&dev, cudaDevAttrPciDeviceId, device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    k = uint32_t(1) << 31 | (static_cast<uint32_t>(domain) & 0x7fff) << 16 | (static_cast<uint32_t>(bus) & 0xff) << 8 |
        (static_cast<uint32_t>(dev) & 0xff);
    keys[device].store(k, std::memory_order_relaxed);
    return k;
}

static ibex_status_t hw_ipc_export(const void *p, IpcExport *out) {
    State &s = state();
    if (!s.ok) return fail(IBEX_ERR_NOT_SUPPORTED, "CUDA IPC: %s", unavailable_reason());
    if (!s.address_range) return fail(IBEX_ERR_NOT_SUPPORTED, "CUDA IPC: cuMemGetAddressRange unavailable");
    const int device = hw_pointer_device(p);
    if (device < 0) return fail(IBEX_ERR_INVALID_ARGUMENT, "CUDA IPC: %p is not GPU memory", p);
    ContextGuard g(device);
    if (!g.ok()) return fail(IBEX_ERR_SYSTEM, "CUDA IPC: cannot make GPU %d current on this thread", device);
    CUdeviceptr base = 0;
    size_t size = 0;
    if (const CUresult r = s.address_range(&base, &size, reinterpret_cast<CUdeviceptr>(p)); r != CUDA_SUCCESS)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "CUDA IPC: %p is not in a device allocation (CUresult %d)", p, static_cast<int>(r));
    cudaIpcMemHandle_t h;
    if (const cudaError_t e = cudaIpcGetMemHandle(&h, reinterpret_cast<void *>(base)); e != cudaSuccess) {
        cudaGetLastError();
        return fail(IBEX_ERR_NOT_SUPPORTED, "CUDA IPC: cudaIpcGetMemHandle(%p) failed: %s (cuMem and managed allocations cannot be exported this way)",
                    reinterpret_cast<void *>(base), cudaGetErrorString(e));
    }
    static_assert(sizeof h == sizeof out->handle);
    std::memcpy(out->handle, &h, sizeof h);
    out->base = base;
    out->size = size;
    out->device = device;
    out->gpu_key = hw_gpu_key(device);
    IBEX_LOG(debug, "CUDA IPC: exported %p as allocation %p + %llu bytes, handle %016llx", p, reinterpret_cast<void *>(base),
             static_cast<unsigned long long>(size), static_cast<unsigned long long>(handle_digest(out->handle)));
    return IBEX_OK;
}

static ibex_status_t hw_ipc_open(const IpcExport &e, void **out) {
    State &s = state();
    if (!s.ok) return fail(IBEX_ERR_NOT_SUPPORTED, "CUDA IPC: %s", unavailable_reason());
    if (e.device < 0 || e.device >= s.devices)
        return fail(IBEX_ERR_REMOTE, "CUDA IPC: the exporter's GPU %d is not visible here", e.device);
    cudaIpcMemHandle_t h;
    std::memcpy(&h, e.handle, sizeof h);
    DeviceGuard g(e.device);
    void *p = nullptr;
    if (const cudaError_t err = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess); err != cudaSuccess) {
        cudaGetLastError();
        return fail(IBEX_ERR_REMOTE,
                    "CUDA IPC: cannot map the peer's GPU allocation of %llu bytes on GPU %d: %s (a stale handle: freed, or "
                    "its process exited; or a handle of this process, or of a GPU without peer access)",
                    static_cast<unsigned long long>(e.size), e.device, cudaGetErrorString(err));
    }
    IBEX_LOG(debug, "CUDA IPC: opened the peer's %p + %llu bytes (handle %016llx) at %p", reinterpret_cast<void *>(e.base),
             static_cast<unsigned long long>(e.size), static_cast<unsigned long long>(handle_digest(e.handle)), p);
    *out = p;
    return IBEX_OK;
}

static void hw_ipc_close(void *p) {
    if (p && cudaIpcCloseMemHandle(p) != cudaSuccess) cudaGetLastError();
}

static void *hw_alloc_pinned(size_t bytes) {
    if (!available()) {
        fail(IBEX_ERR_NOT_SUPPORTED, "pinned memory: %s", unavailable_reason());
        return nullptr;
    }
    void *p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cuda_fail(e, "cudaHostAlloc");
        return nullptr;
    }
    return p;
}

static void hw_free_pinned(void *p) {
    if (p) cudaFreeHost(p);
}

static ibex_status_t hw_host_register(void *p, size_t bytes) {
    const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
    return e == cudaSuccess ? IBEX_OK : cuda_fail(e, "cudaHostRegister");
}

static void hw_host_unregister(void *p) {
    if (cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
}

static ibex_status_t hw_stream(int device, cudaStream_t *out) {
    State &s = state();
    if (!s.ok) return fail(IBEX_ERR_NOT_SUPPORTED, "device stream: %s", unavailable_reason());
    if (device < 0 || device >= s.devices) return fail(IBEX_ERR_INVALID_ARGUMENT, "device stream: GPU %d", device);
    std::lock_guard<std::mutex> l(s.mutex);
    if (!s.streams[device]) {
        DeviceGuard g(device);
        // A blocking stream: its copies start only after the work queued before them on
        // the legacy default stream. A plain cudaMemcpy from pageable memory returns
        // before its DMA to the GPU is done; with a non-blocking stream a collective
        // issued right after it read the old bytes (seen on an H200: a GPU allreduce
        // differing from the host one once no cudaHostAlloc happened to synchronise
        // the device in between).
        const cudaError_t e = cudaStreamCreateWithFlags(&s.streams[device], cudaStreamDefault);
        if (e != cudaSuccess) return cuda_fail(e, "cudaStreamCreate");
    }
    *out = s.streams[device];
    return IBEX_OK;
}

static void hw_stream_used(int device) {
    if (device >= 0 && device < kMaxDevices) t_pending |= uint64_t(1) << device;
}

static ibex_status_t hw_copy_async(void *dst, const void *src, size_t bytes, int device) {
    cudaStream_t stream;
    IBEX_TRY(hw_stream(device, &stream));
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
    if (e != cudaSuccess) return cuda_fail(e, "cudaMemcpyAsync");
    hw_stream_used(device);
    return IBEX_OK;
}

static ibex_status_t hw_wait_copies() {
    State &s = state();
    ibex_status_t st = IBEX_OK;
    for (int d = 0; t_pending && d < kMaxDevices; ++d) {
        if (!(t_pending & (uint64_t(1) << d))) continue;
        t_pending &= ~(uint64_t(1) << d);
        const cudaError_t e = cudaStreamSynchronize(s.streams[d]);
        if (e != cudaSuccess && st == IBEX_OK) st = cuda_fail(e, "cudaStreamSynchronize");
    }
    return st;
}

// Records an event on each stream this thread queued copies on since its last fence or
// wait; more GPUs than a fence holds: waits instead (an empty fence).
static ibex_status_t hw_fence_copies(uint64_t *id) {
    *id = 0;
    if (!t_pending) return IBEX_OK;
    if (__builtin_popcountll(t_pending) > 4) return hw_wait_copies();
    State &s = state();
    State::Fence f{};
    std::lock_guard<std::mutex> l(s.mutex);
    for (int d = 0; t_pending && d < kMaxDevices; ++d) {
        if (!(t_pending & (uint64_t(1) << d))) continue;
        t_pending &= ~(uint64_t(1) << d);
        DeviceGuard g(d);
        cudaEvent_t ev = nullptr;
        if (!s.spare[d].empty()) {
            ev = s.spare[d].back();
            s.spare[d].pop_back();
        } else if (const cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess) {
            return cuda_fail(e, "cudaEventCreate");
        }
        if (const cudaError_t e = cudaEventRecord(ev, s.streams[d]); e != cudaSuccess) {
            s.spare[d].push_back(ev);
            return cuda_fail(e, "cudaEventRecord");
        }
        f.device[f.n] = d;
        f.event[f.n++] = ev;
    }
    f.id = ++s.next_fence;
    s.fences.push_back(f);
    *id = f.id;
    return IBEX_OK;
}

// wait: block until done (drop_fence); else only query.
static bool hw_fence_done(uint64_t id, bool wait) {
    if (!id) return true;
    State &s = state();
    std::lock_guard<std::mutex> l(s.mutex);
    for (auto it = s.fences.begin(); it != s.fences.end(); ++it) {
        if (it->id != id) continue;
        for (int k = 0; k < it->n; ++k) {
            const cudaError_t e = wait ? cudaEventSynchronize(it->event[k]) : cudaEventQuery(it->event[k]);
            if (e == cudaErrorNotReady) return false;
            if (e != cudaSuccess) cudaGetLastError(); // a failed copy: the error surfaces at the next wait
        }
        for (int k = 0; k < it->n; ++k) s.spare[it->device[k]].push_back(it->event[k]);
        s.fences.erase(it);
        return true;
    }
    return true; // unknown: released already
}

#else // !IBEX_HAVE_CUDA

bool built() { return false; }
bool available() { return false; }
const char *unavailable_reason() { return "built without CUDA (IBEX_WITH_CUDA=OFF or no nvcc)"; }
static MemoryKind hw_memory_kind(const void *) { return MemoryKind::kHost; }
static int hw_pointer_device(const void *) { return -1; }
bool dmabuf_supported(int) { return false; }
ibex_status_t export_dmabuf(uint64_t, uint64_t, int *) {
    return fail(IBEX_ERR_NOT_SUPPORTED, "dma-buf export: %s", unavailable_reason());
}
static ibex_status_t hw_ipc_export(const void *, IpcExport *) {
    return fail(IBEX_ERR_NOT_SUPPORTED, "CUDA IPC: %s", unavailable_reason());
}
static ibex_status_t hw_ipc_open(const IpcExport &, void **) {
    return fail(IBEX_ERR_NOT_SUPPORTED, "CUDA IPC: %s", unavailable_reason());
}
static void hw_ipc_close(void *) {}
static void *hw_alloc_pinned(size_t) {
    fail(IBEX_ERR_NOT_SUPPORTED, "pinned memory: %s", unavailable_reason());
    return nullptr;
}
static void hw_free_pinned(void *) {}
static ibex_status_t hw_host_register(void *, size_t) { return IBEX_OK; }
static void hw_host_unregister(void *) {}
static ibex_status_t hw_copy_async(void *, const void *, size_t, int) {
    return fail(IBEX_ERR_NOT_SUPPORTED, "device copy: %s", unavailable_reason());
}
static void hw_stream_used(int) {}

static ibex_status_t hw_stream(int, CUstream_st **out) {
    *out = nullptr;
    return fail(IBEX_ERR_NOT_SUPPORTED, "device stream: %s", unavailable_reason());
}
static ibex_status_t hw_wait_copies() { return IBEX_OK; }
static ibex_status_t hw_fence_copies(uint64_t *id) {
    *id = 0;
    return IBEX_OK;
}
static bool hw_fence_done(uint64_t, bool) { return true; }

#endif

// Simulated ranges (runtime/base/simulated_device.h) come first: a test stands them in
// for device memory whether or not a GPU is present.
MemoryKind memory_kind(const void *p) {
    if (simulated::any() && simulated::backing(p)) return MemoryKind::kDevice;
    return hw_memory_kind(p);
}

int pointer_device(const void *p) {
    if (simulated::any() && simulated::backing(p)) return 0;
    return hw_pointer_device(p);
}

ibex_status_t ipc_export(const void *p, IpcExport *out) {
    if (simulated::any() && simulated::backing(p))
        return fail(IBEX_ERR_NOT_SUPPORTED, "CUDA IPC: %p is simulated GPU memory, which no other process can map", p);
    return hw_ipc_export(p, out);
}

ibex_status_t ipc_open(const IpcExport &e, void **out) { return hw_ipc_open(e, out); }

void ipc_close(void *mapped) { hw_ipc_close(mapped); }

// Without a GPU, staging for simulated ranges takes plain host memory; available() is
// decided once per process, so free_pinned() takes the same branch as alloc_pinned().
void *alloc_pinned(size_t bytes) {
    if (!available() && simulated::any()) {
        void *p = std::malloc(bytes ? bytes : 1);
        if (!p) fail(IBEX_ERR_NO_MEMORY, "staging memory of %zu bytes", bytes);
        return p;
    }
    return hw_alloc_pinned(bytes);
}

void free_pinned(void *p) {
    if (!available()) std::free(p);
    else hw_free_pinned(p);
}

namespace {
std::mutex g_mapped_mutex;
std::vector<std::pair<uintptr_t, size_t>> g_mapped; // live alloc_pinned_mapped ranges
} // namespace

void *alloc_pinned_mapped(size_t bytes) {
    const size_t len = (bytes ? bytes + 4095 : 4096) & ~size_t(4095);
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fail_errno(IBEX_ERR_NO_MEMORY, errno, "staging memory of %zu bytes", len);
        return nullptr;
    }
    if (available() && hw_host_register(p, len) != IBEX_OK) {
        const std::string why = ibex_last_error();
        munmap(p, len);
        fail(IBEX_ERR_NO_MEMORY, "pinning %zu bytes of staging memory: %s", len, why.c_str());
        return nullptr;
    }
    std::lock_guard<std::mutex> l(g_mapped_mutex);
    g_mapped.emplace_back(reinterpret_cast<uintptr_t>(p), len);
    return p;
}

void free_pinned_mapped(void *p) {
    if (!p) return;
    size_t len = 0;
    {
        std::lock_guard<std::mutex> l(g_mapped_mutex);
        for (auto it = g_mapped.begin(); it != g_mapped.end(); ++it)
            if (it->first == reinterpret_cast<uintptr_t>(p)) {
                len = it->second;
                g_mapped.erase(it);
                break;
            }
    }
    if (!len) return;
    if (available()) hw_host_unregister(p);
    munmap(p, len);
}

bool is_pinned_mapped(const void *p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> l(g_mapped_mutex);
    for (const auto &[start, len] : g_mapped)
        if (a >= start && a < start + len) return true;
    return false;
}

ibex_status_t copy_async(void *dst, const void *src, size_t bytes, int device) {
    if (simulated::any()) {
        uint8_t *d = simulated::backing(dst);
        const uint8_t *s = simulated::backing(src);
        if (d || s) {
            if (!simulated::defer_copy(d ? d : dst, s ? s : src, bytes)) std::memmove(d ? d : dst, s ? s : src, bytes);
            return IBEX_OK;
        }
    }
    return hw_copy_async(dst, src, bytes, device);
}

ibex_status_t library_stream(int device, CUstream_st **out) { return hw_stream(device, out); }

void stream_used(int device) { hw_stream_used(device); }

ibex_status_t wait_copies() {
    if (simulated::any()) simulated::finish_all();
    return hw_wait_copies();
}

ibex_status_t fence_copies(CopyFence *out) {
    out->sim = simulated::any() ? simulated::fence() : 0;
    return hw_fence_copies(&out->hw);
}

bool copies_done(CopyFence &f) {
    if (f.hw && !hw_fence_done(f.hw, false)) return false;
    f.hw = 0;
    if (f.sim && !simulated::fence_done(f.sim)) return false;
    f.sim = 0;
    return true;
}

void drop_fence(CopyFence &f) {
    hw_fence_done(f.hw, true);
    if (f.sim) simulated::drop(f.sim);
    f = CopyFence{};
}

} // namespace ibex::cuda

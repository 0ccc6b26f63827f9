// The C API's memory-type query (ibex.h, "GPU buffers").
#include "runtime/base/cuda_memory.h"

extern "C" {

ibex_memory_type_t ibex_memory_type(const void *ptr) {
    switch (ibex::cuda::memory_kind(ptr)) {
    case ibex::cuda::MemoryKind::kDevice: return IBEX_MEMORY_CUDA_DEVICE;
    case ibex::cuda::MemoryKind::kManaged: return IBEX_MEMORY_CUDA_MANAGED;
    default: return IBEX_MEMORY_HOST;
    }
}

int ibex_cuda_available(void) { return ibex::cuda::available() ? 1 : 0; }

} // extern "C"

#include "runtime/base/prefault.h"

#include <cstdint>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace ibex::base {

bool prefault_range(void *addr, size_t len) {
    if (!addr || !len) return true;
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t start = reinterpret_cast<uintptr_t>(addr) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(addr) + len + page - 1) & ~(page - 1);
    return madvise(reinterpret_cast<void *>(start), end - start, MADV_POPULATE_WRITE) == 0;
}

} // namespace ibex::base

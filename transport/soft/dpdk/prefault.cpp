#include "transport/soft/dpdk/prefault.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

#include <rte_mempool.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace ibex::soft::dpdk {

bool prefault_range(void *addr, size_t len) {
    if (!addr || !len) return true;
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t start = reinterpret_cast<uintptr_t>(addr) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(addr) + len + page - 1) & ~(page - 1);
    return madvise(reinterpret_cast<void *>(start), end - start, MADV_POPULATE_WRITE) == 0;
}

size_t prefault_memif_regions() {
    // memif names its region memfds "memif_region_<n>"; a peer's appear under the same name.
    FILE *maps = std::fopen("/proc/self/maps", "re");
    if (!maps) return 0;
    size_t covered = 0;
    char line[512];
    while (std::fgets(line, sizeof line, maps)) {
        if (!std::strstr(line, "/memfd:memif_region_")) continue;
        uintptr_t lo = 0, hi = 0;
        char perms[8] = {};
        if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &lo, &hi, perms) != 3 || hi <= lo) continue;
        if (perms[0] != 'r' || perms[1] != 'w') continue;
        if (prefault_range(reinterpret_cast<void *>(lo), hi - lo)) covered += hi - lo;
    }
    std::fclose(maps);
    return covered;
}

size_t prefault_mempool(rte_mempool *pool) {
    if (!pool) return 0;
    size_t covered = 0;
    rte_mempool_mem_iter(
        pool,
        [](rte_mempool *, void *arg, rte_mempool_memhdr *hdr, unsigned) {
            if (prefault_range(hdr->addr, hdr->len)) *static_cast<size_t *>(arg) += hdr->len;
        },
        &covered);
    return covered;
}

} // namespace ibex::soft::dpdk

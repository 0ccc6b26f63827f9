#include "transport/soft/dpdk/prefault.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <rte_mempool.h>

#include "runtime/base/prefault.h"

namespace ibex::soft::dpdk {

using base::prefault_range;

namespace {

// Calls fn(start, end, inode) for every writable memif region mapping of this process.
template <class Fn> void for_each_memif_region(Fn &&fn) {
    // memif names its region memfds "memif_region_<n>"; a peer's appear under the same name.
    FILE *maps = std::fopen("/proc/self/maps", "re");
    if (!maps) return;
    char line[512];
    while (std::fgets(line, sizeof line, maps)) {
        if (!std::strstr(line, "/memfd:memif_region_")) continue;
        uintptr_t lo = 0, hi = 0;
        uint64_t inode = 0;
        char perms[8] = {};
        if (std::sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %*s %*s %" SCNu64, &lo, &hi, perms, &inode) != 4 || hi <= lo)
            continue;
        if (perms[0] == 'r' && perms[1] == 'w') fn(lo, hi, inode);
    }
    std::fclose(maps);
}

} // namespace

std::vector<uint64_t> memif_region_inodes() {
    std::vector<uint64_t> out;
    for_each_memif_region([&](uintptr_t, uintptr_t, uint64_t inode) { out.push_back(inode); });
    return out;
}

size_t prefault_memif_regions(std::vector<uint64_t> *inodes) {
    size_t covered = 0;
    for_each_memif_region([&](uintptr_t lo, uintptr_t hi, uint64_t inode) {
        if (prefault_range(reinterpret_cast<void *>(lo), hi - lo)) covered += hi - lo;
        if (inodes) inodes->push_back(inode);
    });
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

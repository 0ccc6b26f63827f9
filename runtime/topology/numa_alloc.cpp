// Buffers placed on a NUMA node with libnuma, for registration near the NIC.
#include "runtime/base/log.h"
#include "runtime/base/status.h"

#include <ibex/topology.h>

#include <numa.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>

namespace {

std::atomic<bool> g_fallback_logged{false};

// Both paths map anonymous memory themselves so that ibex_numa_free() is one munmap
// whichever path was taken (numa_alloc_onnode()'s memory would need numa_free()).
void *map_anonymous(size_t size) {
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

} // namespace

extern "C" {

ibex_status_t ibex_numa_alloc(size_t size, int node, void **ptr) {
    if (!ptr || size == 0) return ibex::fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_numa_alloc: null ptr or zero size");
    *ptr = nullptr;
    // libnuma's other calls are undefined before numa_available() says NUMA works.
    bool have_numa = numa_available() >= 0;
    if (node >= 0 && have_numa &&
        (node > numa_max_node() || !numa_bitmask_isbitset(numa_all_nodes_ptr, static_cast<unsigned>(node))))
        return ibex::fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_numa_alloc: NUMA node %d does not exist (max %d)", node,
                          numa_max_node());
    if (node >= 0 && !have_numa && !g_fallback_logged.exchange(true))
        IBEX_LOG(info, "libnuma: NUMA is not available here; buffers for node %d use ordinary memory", node);

    void *p = map_anonymous(size);
    if (!p) return ibex::fail_errno(IBEX_ERR_NO_MEMORY, errno, "ibex_numa_alloc: mmap of %zu bytes", size);
    if (node >= 0 && have_numa) numa_tonode_memory(p, size, node);
    *ptr = p;
    return IBEX_OK;
}

void ibex_numa_free(void *ptr, size_t size) {
    if (ptr) munmap(ptr, size);
}

} // extern "C"

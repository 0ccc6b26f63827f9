// Collective buffers from ibex_comm_mem_alloc (NCCL's ncclMemAlloc): where the
// communicator's ranks share one host over shm, memory its peers map (an ibex_mem_alloc
// region registered for remote reads and writes), so that a collective whose buffers lie
// in it reads and writes them in place (allreduce/shm_direct.h) instead of staging them;
// elsewhere ordinary page-aligned memory. Each shared allocation carries an id that this
// process never reuses, by which peers cache their mapping of it: a region freed and
// another allocated at the same address is never taken for the old one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include <ibex/ibex.h>

#include "allreduce/alloc_region.h"

namespace ibex::coll {

class CommMemory {
public:
    // What a peer needs to map an allocation.
    struct Region {
        uint64_t id = 0; // 0: none
        uint64_t base = 0, bytes = 0;
        uint32_t rkey = 0;
    };

    // pd: the shm link's, whose peers map the memory; nullptr: plain memory.
    ibex_status_t alloc(ibex_pd_t *pd, size_t bytes, void **out);
    // Bytes of the allocation at p (0: none of ours): what else refers to it (registrations)
    // goes before free(p).
    size_t size_of(const void *p) const;
    void free(void *p);
    // The shared allocation holding [p, p + len), if there is one.
    bool find(const void *p, size_t len, Region *out) const;
    void clear();

private:
    struct Entry {
        std::unique_ptr<AllocRegion> region;
        uint64_t id = 0; // 0: plain memory
        size_t bytes = 0;
    };
    mutable std::mutex mu_;
    std::map<uintptr_t, Entry> live_; // by base address
    uint64_t next_id_ = 1;
};

} // namespace ibex::coll

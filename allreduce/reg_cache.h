// Registration cache: user buffers are registered on first use and the registration is
// reused by later collectives on the same memory. Host buffers are registered as the
// whole pages around them; GPU buffers exactly: a device allocation need not start on a
// host page (cudaMalloc aligns to 256 bytes), the bytes before it may be no allocation
// at all, and the memory type of a region is decided where it starts. Each entry keeps
// the memory type it was registered as, and a lookup only takes an entry of the same
// type, so a stale host entry over addresses that are now GPU memory is never used. Bounded: beyond
// max_entries the least recently used entry not needed by the running collective and not
// registered explicitly by the user is dropped.
//
// Like NCCL's, the cache cannot see free()/munmap(): memory given back to the system
// keeps its registration until evicted or deregistered. The soft provider does not pin
// pages, so a stale entry costs nothing there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include <ibex/ibex.h>

namespace ibex::coll {

class RegCache {
public:
    RegCache(ibex_pd_t *pd, size_t max_entries) : pd_(pd), max_(max_entries) {}
    ~RegCache();
    RegCache(const RegCache &) = delete;
    RegCache &operator=(const RegCache &) = delete;

    // Marks the start of a collective: entries used from now on are not evicted until
    // the next call.
    void next_epoch();
    // A registration covering [p, p + len) (registering one if needed).
    ibex_status_t get(const void *p, size_t len, ibex_mr_t **mr);
    // User-requested registration: kept until remove() or the end of the communicator.
    ibex_status_t add(void *p, size_t len);
    ibex_status_t remove(void *p);
    size_t size() const;

private:
    struct Entry {
        uintptr_t end;
        ibex_mr_t *mr;
        uint64_t last_use;
        bool pinned;
        bool device; // registered as GPU memory
    };
    ibex_status_t insert_locked(uintptr_t start, uintptr_t end, bool pinned, bool device, ibex_mr_t **mr);
    void evict_locked();

    ibex_pd_t *pd_;
    size_t max_;
    mutable std::mutex mu_;
    std::multimap<uintptr_t, Entry> entries_; // by start address
    uint64_t epoch_ = 1;
};

} // namespace ibex::coll

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
#include <memory>
#include <vector>
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
    // Drops every registration that overlaps [p, p + len), the user's own included: the
    // memory is about to be freed (ibex_comm_mem_free).
    void forget(const void *p, size_t len);
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

// One cache per protection domain a communicator's channels use (its device's, and the
// shm device's for ranks of the same host): a user buffer is registered with each.
class RegCaches {
public:
    void add_domain(ibex_pd_t *pd, size_t max_entries) { caches_.push_back(std::make_unique<RegCache>(pd, max_entries)); }
    RegCache &of(int domain) { return *caches_[static_cast<size_t>(domain)]; }
    void clear() { caches_.clear(); }
    void next_epoch() {
        for (auto &c : caches_) c->next_epoch();
    }
    // Registers [p, p + len) with every domain (cached).
    ibex_status_t get_all(const void *p, size_t len) {
        ibex_mr_t *mr = nullptr;
        for (auto &c : caches_)
            if (ibex_status_t st = c->get(p, len, &mr); st != IBEX_OK) return st;
        return IBEX_OK;
    }
    ibex_status_t add(void *p, size_t len) {
        for (auto &c : caches_)
            if (ibex_status_t st = c->add(p, len); st != IBEX_OK) return st;
        return IBEX_OK;
    }
    void forget(const void *p, size_t len) {
        for (auto &c : caches_) c->forget(p, len);
    }
    ibex_status_t remove(void *p) {
        ibex_status_t out = IBEX_OK;
        for (auto &c : caches_)
            if (ibex_status_t st = c->remove(p); st != IBEX_OK && out == IBEX_OK) out = st;
        return out;
    }

private:
    std::vector<std::unique_ptr<RegCache>> caches_;
};

} // namespace ibex::coll

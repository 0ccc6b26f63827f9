#include "allreduce/comm_memory.h"

#include "runtime/base/status.h"

namespace ibex::coll {

ibex_status_t CommMemory::alloc(ibex_pd_t *pd, size_t bytes, void **out) {
    Entry e;
    e.region = std::make_unique<AllocRegion>();
    constexpr unsigned kAccess = IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_READ | IBEX_ACCESS_REMOTE_WRITE;
    IBEX_TRY(e.region->open(pd, bytes, pd ? kAccess : 0, "ibex_comm_mem_alloc", pd != nullptr));
    e.bytes = bytes;
    *out = e.region->data();
    std::lock_guard l(mu_);
    if (pd) e.id = next_id_++;
    live_[reinterpret_cast<uintptr_t>(*out)] = std::move(e);
    return IBEX_OK;
}

size_t CommMemory::size_of(const void *p) const {
    std::lock_guard l(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(p));
    return it == live_.end() ? 0 : it->second.bytes;
}

void CommMemory::free(void *p) {
    std::unique_ptr<AllocRegion> gone; // freed outside the lock
    std::lock_guard l(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(p));
    if (it == live_.end()) return;
    gone = std::move(it->second.region);
    live_.erase(it);
}

bool CommMemory::find(const void *p, size_t len, Region *out) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard l(mu_);
    auto it = live_.upper_bound(a);
    if (it == live_.begin()) return false;
    --it;
    const Entry &e = it->second;
    if (!e.id || a - it->first > e.bytes || len > e.bytes - (a - it->first)) return false;
    *out = {e.id, it->first, e.bytes, e.region->rkey()};
    return true;
}

void CommMemory::clear() {
    std::lock_guard l(mu_);
    live_.clear();
}

} // namespace ibex::coll

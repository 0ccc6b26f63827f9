#include "allreduce/reg_cache.h"

#include <unistd.h>

#include "runtime/base/cuda_memory.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

constexpr unsigned kAccess = IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE;

uintptr_t page_size() {
    static const uintptr_t p = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    return p;
}

} // namespace

RegCache::~RegCache() {
    for (auto &[start, e] : entries_) ibex_dereg_mr(e.mr);
}

void RegCache::next_epoch() {
    std::lock_guard l(mu_);
    ++epoch_;
    evict_locked(); // entries the last collective needed beyond the bound go now
}

size_t RegCache::size() const {
    std::lock_guard l(mu_);
    return entries_.size();
}

ibex_status_t RegCache::insert_locked(uintptr_t start, uintptr_t end, bool pinned, bool device, ibex_mr_t **mr) {
    ibex_mr_t *m = nullptr;
    IBEX_TRY(ibex_reg_mr(pd_, reinterpret_cast<void *>(start), end - start, kAccess, &m));
    entries_.emplace(start, Entry{end, m, epoch_, pinned, device});
    *mr = m;
    evict_locked();
    return IBEX_OK;
}

void RegCache::evict_locked() {
    while (entries_.size() > max_) {
        auto victim = entries_.end();
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (it->second.pinned || it->second.last_use == epoch_) continue;
            if (victim == entries_.end() || it->second.last_use < victim->second.last_use) victim = it;
        }
        if (victim == entries_.end()) return; // everything is in use: allow the overshoot
        ibex_dereg_mr(victim->second.mr);
        entries_.erase(victim);
    }
}

ibex_status_t RegCache::get(const void *p, size_t len, ibex_mr_t **mr) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p), e = a + (len ? len : 1);
    const bool device = cuda::is_device_pointer(p);
    std::lock_guard l(mu_);
    for (auto it = entries_.begin(); it != entries_.end() && it->first <= a; ++it) {
        if (it->second.end >= e && it->second.device == device) {
            it->second.last_use = epoch_;
            *mr = it->second.mr;
            return IBEX_OK;
        }
    }
    if (device) return insert_locked(a, e, false, true, mr);
    const uintptr_t ps = page_size();
    return insert_locked(a & ~(ps - 1), (e + ps - 1) & ~(ps - 1), false, false, mr);
}

ibex_status_t RegCache::add(void *p, size_t len) {
    if (!p || !len) return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_comm_register: empty buffer");
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard l(mu_);
    ibex_mr_t *mr = nullptr;
    return insert_locked(a, a + len, true, cuda::is_device_pointer(p), &mr);
}

ibex_status_t RegCache::remove(void *p) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    std::lock_guard l(mu_);
    bool found = false;
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->first <= a && a < it->second.end) {
            ibex_dereg_mr(it->second.mr);
            it = entries_.erase(it);
            found = true;
        } else {
            ++it;
        }
    }
    return found ? IBEX_OK : fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_comm_deregister: %p is not registered", p);
}

void RegCache::forget(const void *p, size_t len) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p), e = a + len;
    std::lock_guard l(mu_);
    for (auto it = entries_.begin(); it != entries_.end() && it->first < e;) {
        if (it->second.end > a) {
            ibex_dereg_mr(it->second.mr);
            it = entries_.erase(it);
        } else {
            ++it;
        }
    }
}

} // namespace ibex::coll

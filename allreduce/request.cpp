// Requests: the per-thread cache of finished ones, completion, and sleeping on one.
#include "allreduce/request.h"

#include <new>

namespace ibex::coll {

namespace {

// Finished requests kept for reuse by the thread that let go of them last (the caller that
// waited, as a rule, which is also the thread that issues the next collectives). Bounded:
// a burst of outstanding requests beyond it goes back to the heap.
struct RequestCache {
    static constexpr int kMax = 1024;
    ibex_request *free[kMax];
    int n = 0;
    bool gone = false; // destroyed at thread exit: later requests bypass it
    ~RequestCache() {
        for (int i = 0; i < n; ++i) delete free[i];
        n = 0;
        gone = true;
    }
};
thread_local RequestCache request_cache;

void recycle(ibex_request *r) {
    RequestCache &rc = request_cache;
    if (rc.n == RequestCache::kMax || rc.gone) {
        delete r;
        return;
    }
    r->comm = nullptr;
    r->done.store(false, std::memory_order_relaxed);
    r->sleepers.store(0, std::memory_order_relaxed);
    r->status = IBEX_OK;
    r->detail.reset();
    r->refs.store(2, std::memory_order_relaxed);
    rc.free[rc.n++] = r;
}

} // namespace

ibex_request *request_new() {
    RequestCache &rc = request_cache;
    if (rc.n > 0 && !rc.gone) return rc.free[--rc.n];
    return new (std::nothrow) ibex_request;
}

void complete(ibex_request *r, ibex_status_t st, const std::string &detail) {
    if (!r) return;
    r->status = st;
    if (st != IBEX_OK) r->detail.reset(new (std::nothrow) std::string(detail));
    // Paired with request_sleep: either it sees done before sleeping, or this sees it asleep.
    r->done.store(true, std::memory_order_seq_cst);
    if (r->sleepers.load(std::memory_order_seq_cst) > 0) {
        std::lock_guard l(r->mu);
        r->cv.notify_all();
    }
    r->release();
}

bool request_sleep(ibex_request *r, std::chrono::microseconds at_most) {
    r->sleepers.fetch_add(1, std::memory_order_seq_cst);
    bool done;
    {
        std::unique_lock l(r->mu);
        const auto ready = [&] { return r->done.load(std::memory_order_seq_cst); };
        done = at_most.count() < 0 ? (r->cv.wait(l, ready), true) : r->cv.wait_for(l, at_most, ready);
    }
    r->sleepers.fetch_sub(1, std::memory_order_relaxed);
    return done;
}

bool request_done(ibex_request *r) { return r->done.load(std::memory_order_acquire); }

} // namespace ibex::coll

void ibex_request::release() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) ibex::coll::recycle(this);
}

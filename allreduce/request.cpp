// Requests: the per-thread cache of finished ones, completion, and sleeping on one.
#include "allreduce/request.h"

#include <algorithm>
#include <new>
#include <vector>

namespace ibex::coll {

namespace {

// Finished requests kept for reuse by the thread that let go of them last (the caller that
// waited, as a rule, which is also the thread that issues the next collectives). It keeps
// up to as many as this thread has created (at least kMin): a thread that issues bursts of
// N requests before waiting (nccl-tests' way, ibex_allreduce_perf's default) then reuses
// them, as Open MPI's request free lists do, while a thread that only waits on another's
// requests keeps kMin and gives the rest back to the heap.
struct RequestCache {
    static constexpr size_t kMin = 1024;
    std::vector<ibex_request *> free;
    size_t created = 0; // requests this thread took from the heap
    bool gone = false;  // destroyed at thread exit: later requests bypass it
    ~RequestCache() {
        for (ibex_request *r : free) delete r;
        free.clear();
        gone = true;
    }
    bool keeps_another() const { return !gone && free.size() < std::max(kMin, created); }
};
thread_local RequestCache request_cache;

void recycle(ibex_request *r) {
    RequestCache &rc = request_cache;
    if (!rc.keeps_another()) {
        delete r;
        return;
    }
    r->comm = nullptr;
    r->done.store(false, std::memory_order_relaxed);
    r->sleepers.store(0, std::memory_order_relaxed);
    r->status = IBEX_OK;
    r->detail.reset();
    r->refs.store(2, std::memory_order_relaxed);
    try {
        rc.free.push_back(r);
    } catch (const std::bad_alloc &) {
        delete r;
    }
}

} // namespace

ibex_request *request_new() {
    RequestCache &rc = request_cache;
    if (!rc.gone && !rc.free.empty()) {
        ibex_request *r = rc.free.back();
        rc.free.pop_back();
        return r;
    }
    if (!rc.gone) ++rc.created;
    return new (std::nothrow) ibex_request;
}

size_t request_cache_size() {
    const RequestCache &rc = request_cache;
    return rc.gone ? 0 : rc.free.size();
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

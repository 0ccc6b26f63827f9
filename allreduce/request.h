// A collective's request: what ibex_allreduce and the others hand back to test or wait on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include <ibex/coll.h>

// A collective's completion, shared by the caller and the stream's driver; whichever lets
// go last recycles it (ibex::coll::request_new). `done` is read without the lock: the lock
// and the condition variable serve only a caller that sleeps on the request.
struct ibex_request {
    ibex_comm *comm = nullptr; // the stream it belongs to (driven by a waiting caller)
    std::atomic<bool> done{false};
    std::atomic<int> sleepers{0}; // callers blocked on cv; complete() notifies only then
    ibex_status_t status = IBEX_OK;
    std::atomic<int> refs{2};
    std::unique_ptr<std::string> detail; // a failure's message (kept apart: requests are many)
    std::mutex mu;
    std::condition_variable cv;
    void release();
};

namespace ibex::coll {

// A request from this thread's cache of finished ones, else a new one (nullptr: out of
// memory). Issuing many small collectives, a malloc and a free of a mutex and a condition
// variable per collective is a measurable share of its time. The cache keeps as many as
// the thread has created, at least 1024 (request.cpp).
ibex_request *request_new();
// How many finished requests this thread's cache holds (for tests).
size_t request_cache_size();
// Completes and releases a request (nullptr: nothing to do).
void complete(ibex_request *r, ibex_status_t st, const std::string &detail);
bool request_done(ibex_request *r);
// Sleeps until r is done, at most at_most (negative: no limit); true when it is done.
bool request_sleep(ibex_request *r, std::chrono::microseconds at_most);

} // namespace ibex::coll

// Completion queues: a process-local ring, and an eventfd the application blocks on; the
// progress thread (or the waiting thread itself, without one) fills the ring.
#include <cerrno>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "transport/shm/engine.h"
#include "transport/shm/shm_ops.h"

namespace ibex::shm {

ibex_status_t create_cq(ibex_context *c, int cqe, ibex_cq **out) {
    auto *cq = new (std::nothrow) ShmCq(static_cast<size_t>(cqe));
    if (!cq) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a CQ of %d entries", cqe);
    cq->context = c;
    cq->cqe = cqe;
    cq->ctx = to_shm(c);
    cq->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (cq->event_fd < 0) {
        const int e = errno;
        delete cq;
        return fail_errno(IBEX_ERR_SYSTEM, e, "eventfd for a CQ");
    }
    Lock l(cq->ctx->mu);
    ++cq->ctx->live_objects;
    *out = cq;
    return IBEX_OK;
}

ibex_status_t destroy_cq(ibex_cq *c) {
    ShmCq *cq = cq_of(c);
    {
        Lock l(cq->ctx->mu);
        if (cq->users) return fail(IBEX_ERR_INVALID_STATE, "CQ is still used by %d QP(s)", cq->users);
        --cq->ctx->live_objects;
    }
    close(cq->event_fd);
    delete cq;
    return IBEX_OK;
}

ibex_status_t poll_cq(ibex_cq *c, int max, ibex_wc_t *wc, int *count) {
    ShmCq *cq = cq_of(c);
    cq->ctx->note_app_poll();
    Lock l(cq->ctx->mu);
    if (cq->ring.empty() && !cq->ctx->quiet()) progress_once(*cq->ctx);
    int n = 0;
    while (n < max && !cq->ring.empty()) {
        wc[n++] = cq->ring.front();
        cq->ring.pop();
    }
    *count = n;
    return IBEX_OK;
}

ibex_status_t cq_fd(ibex_cq *c, int *fd) {
    *fd = cq_of(c)->event_fd;
    return IBEX_OK;
}

ibex_status_t req_notify_cq(ibex_cq *c) {
    ShmCq *cq = cq_of(c);
    cq->ctx->note_app_blocking(); // armed to sleep on the CQ's fd: progress is the thread's
    Lock l(cq->ctx->mu);
    cq->arm();
    return IBEX_OK;
}

ibex_status_t cq_wait(ibex_cq *c, int timeout_ms) {
    ShmCq *cq = cq_of(c);
    ShmContext *ctx = cq->ctx;
    ctx->note_app_blocking();
    const uint64_t start = now_ns();
    for (;;) {
        {
            Lock l(ctx->mu);
            if (!cq->ring.empty()) return IBEX_OK;
            if (!ctx->progress_thread) progress_once(*ctx);
            if (!cq->ring.empty()) return IBEX_OK;
            cq->armed = true;
        }
        int wait = ctx->progress_thread ? timeout_ms : 1;
        if (timeout_ms >= 0) {
            const int64_t left = timeout_ms - int64_t((now_ns() - start) / 1000000);
            if (left <= 0) return fail(IBEX_ERR_TIMEOUT, "no completion within %d ms", timeout_ms);
            wait = ctx->progress_thread ? static_cast<int>(left) : 1;
        }
        cq->wait_event(wait);
    }
}

} // namespace ibex::shm

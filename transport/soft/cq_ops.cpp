// Completion queues: polling, and the event descriptor a waiting application blocks on.
#include <cerrno>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "runtime/base/status.h"
#include "transport/soft/engine/staging.h"
#include "transport/soft/soft_ops.h"

namespace ibex::soft::ops {

namespace {

int take(SoftCq *cq, int max, ibex_wc_t *wc) {
    int n = 0;
    while (n < max && !cq->ring.empty()) {
        wc[n++] = cq->ring.front();
        cq->ring.pop();
    }
    return n;
}

} // namespace

ibex_status_t create_cq(ibex_context *c, int cqe, ibex_cq **out) {
    auto *cq = new (std::nothrow) SoftCq(static_cast<size_t>(cqe));
    if (!cq) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a CQ of %d entries", cqe);
    cq->context = c;
    cq->cqe = cqe;
    cq->ctx = to_soft(c);
    cq->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (cq->event_fd < 0) {
        int e = errno;
        delete cq;
        return fail_errno(IBEX_ERR_SYSTEM, e, "eventfd for a CQ");
    }
    {
        Lock l(cq->ctx->mutex());
        ++cq->ctx->live_objects();
    }
    *out = cq;
    return IBEX_OK;
}

ibex_status_t destroy_cq(ibex_cq *c) {
    SoftCq *cq = cq_of(c);
    {
        Lock l(cq->ctx->mutex());
        if (cq->users) return fail(IBEX_ERR_INVALID_STATE, "CQ is still used by %d QP(s)", cq->users);
        --cq->ctx->live_objects();
    }
    close(cq->event_fd);
    delete cq;
    return IBEX_OK;
}

ibex_status_t poll_cq(ibex_cq *c, int max, ibex_wc_t *wc, int *count) {
    SoftCq *cq = cq_of(c);
    SoftContext *ctx = cq->ctx;
    ctx->note_app_progress();
    Lock l(ctx->mutex());
    if (cq->ring.empty()) ctx->progress_once();
    // GPU memory: what completions report must be on the GPU before they are seen.
    if (staging::active())
        IBEX_TRY(staging::flush(*ctx));
    *count = take(cq, max, wc);
    return IBEX_OK;
}

ibex_status_t cq_fd(ibex_cq *c, int *fd) {
    *fd = cq_of(c)->event_fd;
    return IBEX_OK;
}

ibex_status_t req_notify_cq(ibex_cq *c) {
    SoftCq *cq = cq_of(c);
    Lock l(cq->ctx->mutex());
    cq->arm();
    return IBEX_OK;
}

ibex_status_t cq_wait(ibex_cq *c, int timeout_ms) {
    SoftCq *cq = cq_of(c);
    SoftContext *ctx = cq->ctx;
    const uint64_t start = SoftContext::now_ns();
    for (;;) {
        {
            Lock l(ctx->mutex());
            if (!cq->ring.empty()) return IBEX_OK;
            if (!ctx->config().progress_thread) ctx->progress_once();
            if (!cq->ring.empty()) return IBEX_OK;
            cq->armed = true;
        }
        ctx->app_went_idle();
        int wait = ctx->config().progress_thread ? timeout_ms : 1;
        if (timeout_ms >= 0) {
            const int64_t left = timeout_ms - int64_t((SoftContext::now_ns() - start) / 1000000);
            if (left <= 0) return fail(IBEX_ERR_TIMEOUT, "no completion within %d ms", timeout_ms);
            wait = ctx->config().progress_thread ? static_cast<int>(left) : 1;
        }
        cq->wait_event(wait);
    }
}

} // namespace ibex::soft::ops

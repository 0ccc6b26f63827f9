// Completion queues: each with a completion channel and a small backlog, so that arming
// takes completions the hardware will not signal again and the fd handed out (an epoll
// over the channel and an eventfd) is readable whenever completions wait.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "runtime/base/status.h"
#include "transport/verbs/objects.h"
#include "transport/verbs/ops.h"
#include "transport/verbs/work_map.h"

namespace ibex::verbs {
namespace {

constexpr int kPollBatch = 32; // completions taken per ibv_poll_cq call

void destroy_cq_parts(VerbsCq *cq) {
    if (cq->ibv) ibv_destroy_cq(cq->ibv);
    if (cq->channel) ibv_destroy_comp_channel(cq->channel);
    if (cq->epoll_fd >= 0) close(cq->epoll_fd);
    if (cq->event_fd >= 0) close(cq->event_fd);
}

// Moves up to `max` hardware completions into wc; returns how many, or -1 on error.
int poll_hw(VerbsCq *cq, int max, ibex_wc_t *wc) {
    ibv_wc hw[kPollBatch];
    int total = 0;
    while (total < max) {
        const int n = ibv_poll_cq(cq->ibv, std::min(max - total, kPollBatch), hw);
        if (n < 0) return total ? total : -1;
        for (int i = 0; i < n; ++i) convert_wc(hw[i], &wc[total + i]);
        total += n;
        if (n < std::min(max - total + n, kPollBatch)) break;
    }
    return total;
}

// Fills the backlog from the hardware CQ; with the backlog lock held.
void refill_backlog(VerbsCq *cq) {
    while (cq->backlog_count < kBacklog) {
        const int tail = (cq->backlog_head + cq->backlog_count) % kBacklog;
        const int room = std::min(kBacklog - cq->backlog_count, kBacklog - tail);
        const int n = poll_hw(cq, room, &cq->backlog[tail]);
        if (n <= 0) return;
        cq->backlog_count += n;
        if (n < room) return;
    }
}

// Takes the completion events the channel holds (non-blocking) and acknowledges them.
void drain_events(VerbsCq *cq) {
    ibv_cq *ev_cq;
    void *ev_ctx;
    for (int i = 0; i < 1024 && ibv_get_cq_event(cq->channel, &ev_cq, &ev_ctx) == 0; ++i) ibv_ack_cq_events(ev_cq, 1);
    uint64_t v;
    [[maybe_unused]] ssize_t r = read(cq->event_fd, &v, sizeof v);
}

// Arms the CQ; completions already queued (which the hardware will not signal again)
// are taken into the backlog and make the fd readable at once, as on the soft provider.
ibex_status_t arm(VerbsCq *cq) {
    drain_events(cq);
    if (int e = ibv_req_notify_cq(cq->ibv, 0)) return fail_errno(status_from_errno(e), e, "ibv_req_notify_cq");
    refill_backlog(cq);
    if (cq->backlog_count) {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t r = write(cq->event_fd, &one, sizeof one);
    }
    return IBEX_OK;
}

} // namespace

ibex_status_t create_cq(ibex_context *c, int cqe, ibex_cq **out) {
    VerbsContext *ctx = vctx_of(c);
    auto *cq = new (std::nothrow) VerbsCq;
    if (!cq) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a CQ");
    cq->context = c;
    cq->vctx = ctx;
    auto bail = [&](ibex_status_t st) {
        destroy_cq_parts(cq);
        delete cq;
        return st;
    };
    cq->channel = ibv_create_comp_channel(ctx->ibv);
    if (!cq->channel) return bail(fail_errno(IBEX_ERR_SYSTEM, errno, "ibv_create_comp_channel"));
    const int fl = fcntl(cq->channel->fd, F_GETFL);
    if (fl < 0 || fcntl(cq->channel->fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return bail(fail_errno(IBEX_ERR_SYSTEM, errno, "O_NONBLOCK on the completion channel"));
    cq->ibv = ibv_create_cq(ctx->ibv, cqe, cq, cq->channel, 0);
    if (!cq->ibv) {
        const int e = errno;
        return bail(fail_errno(status_from_errno(e), e, "ibv_create_cq(%d entries)", cqe));
    }
    cq->cqe = cq->ibv->cqe;
    cq->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    cq->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (cq->event_fd < 0 || cq->epoll_fd < 0) return bail(fail_errno(IBEX_ERR_SYSTEM, errno, "eventfd/epoll for a CQ"));
    for (int fd : {cq->channel->fd, cq->event_fd}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        if (epoll_ctl(cq->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) return bail(fail_errno(IBEX_ERR_SYSTEM, errno, "epoll_ctl"));
    }
    {
        Lock l(ctx->mutex);
        ++ctx->live;
    }
    *out = cq;
    return IBEX_OK;
}

ibex_status_t destroy_cq(ibex_cq *c) {
    VerbsCq *cq = cq_of(c);
    {
        Lock l(cq->vctx->mutex);
        if (cq->users) return fail(IBEX_ERR_INVALID_STATE, "CQ is still used by %d QP(s)", cq->users);
        --cq->vctx->live;
    }
    destroy_cq_parts(cq);
    delete cq;
    return IBEX_OK;
}

ibex_status_t poll_cq(ibex_cq *c, int max, ibex_wc_t *wc, int *count) {
    VerbsCq *cq = cq_of(c);
    int n = 0;
    {
        Lock l(cq->mutex);
        while (n < max && cq->backlog_count) {
            wc[n++] = cq->backlog[cq->backlog_head];
            cq->backlog_head = (cq->backlog_head + 1) % kBacklog;
            --cq->backlog_count;
        }
    }
    if (n < max) {
        const int m = poll_hw(cq, max - n, wc + n);
        if (m < 0 && !n) return fail(IBEX_ERR_SYSTEM, "ibv_poll_cq failed");
        if (m > 0) n += m;
    }
    *count = n;
    return IBEX_OK;
}

ibex_status_t cq_fd(ibex_cq *c, int *fd) {
    *fd = cq_of(c)->epoll_fd;
    return IBEX_OK;
}

ibex_status_t req_notify_cq(ibex_cq *c) {
    VerbsCq *cq = cq_of(c);
    Lock l(cq->mutex);
    return arm(cq);
}

ibex_status_t cq_wait(ibex_cq *c, int timeout_ms) {
    VerbsCq *cq = cq_of(c);
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
        {
            Lock l(cq->mutex);
            refill_backlog(cq);
            if (cq->backlog_count) return IBEX_OK;
            IBEX_TRY(arm(cq));
            if (cq->backlog_count) {
                drain_events(cq);
                return IBEX_OK;
            }
        }
        // Slices of at most 100 ms bound the wait even if an event goes astray.
        int slice = 100;
        if (timeout_ms >= 0) {
            const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
            const int64_t left = timeout_ms - spent.count();
            if (left <= 0) return fail(IBEX_ERR_TIMEOUT, "no completion within %d ms", timeout_ms);
            slice = static_cast<int>(std::min<int64_t>(slice, left));
        }
        pollfd p{cq->channel->fd, POLLIN, 0};
        const int r = poll(&p, 1, slice);
        if (r < 0 && errno != EINTR) return fail_errno(IBEX_ERR_SYSTEM, errno, "poll on the completion channel");
        if (r > 0) {
            Lock l(cq->mutex);
            drain_events(cq);
        }
    }
}

} // namespace ibex::verbs

// Device discovery, contexts, and the progress loop: poll the rings, then sleep on the
// context's futex doorbell (in its shared segment, so a peer process can wake it) until a
// peer rings it or the nearest timer is due.
#include <algorithm>
#include <climits>
#include <cstring>
#include <ctime>
#include <linux/futex.h>
#include <random>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/base/config.h"
#include "runtime/base/status.h"
#include "transport/send_posting.h"
#include "transport/shm/engine.h"
#include "transport/shm/shm_ops.h"

namespace ibex::shm {

namespace {

constexpr uint64_t kSpinNs = 50'000;           // polling before the thread sleeps
constexpr uint64_t kMaxSleepNs = 50'000'000;   // bounded sleep: the loop re-checks `stop`
// While the application polls (poll_cq, ibex_progress run the same progress), the thread
// naps instead of competing with it for the lock and a core: many ranks, few cores. A nap
// is a futex wait that a blocking application call cuts short, so it can be long: each
// wake-up is a context switch that, on a host with as many busy threads as cores, takes
// the core from a polling application thread.
constexpr uint64_t kAppPollingNs = 200'000;
constexpr uint64_t kNapNs = 1'000'000;
constexpr uint64_t kOfferRetryNs = 200'000; // an fd a peer's full queue refused goes again

std::atomic<uint32_t> g_next_ctx{0};

uint64_t next_deadline(const ShmContext &ctx) {
    uint64_t d = ctx.offers_pending ? now_ns() + kOfferRetryNs : 0;
    for (const ShmQp *qp : ctx.qps)
        if (const uint64_t q = requester_deadline(*qp); q && (!d || q < d)) d = q;
    return d;
}

// private_word: the word is this process's own (the nap), not in a shared segment.
void futex_wait(std::atomic<uint32_t> *word, uint32_t seen, uint64_t ns, bool private_word = false) {
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), private_word ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT, seen, &ts,
            nullptr, 0);
}

void wake_nap(ShmContext &ctx) {
    ctx.nap.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&ctx.nap), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void progress_main(ShmContext *ctx) {
    uint64_t idle_since = 0;
    uint64_t polls_seen = 0, app_polled_at = 0;
    while (!ctx->stop.load(std::memory_order_relaxed)) {
        bool did = false, app_inside = false;
        {
            // Never wait for the lock: whoever holds it is an application call inside the
            // provider (a post copying a large WRITE in place, a poll), which makes progress
            // itself. Blocking here would cost that call a futex wake at its unlock.
            std::unique_lock l(ctx->mu, std::try_to_lock);
            if (l.owns_lock())
                did = progress_once(*ctx);
            else
                app_inside = true;
        }
        const uint64_t now = now_ns();
        if (const uint64_t polls = ctx->app_polls.load(std::memory_order_relaxed); polls != polls_seen || app_inside) {
            polls_seen = polls;
            app_polled_at = now;
        }
        // The nap's word is read before app_blocking: a wake in between makes the wait
        // return at once instead of being lost.
        const uint32_t nap_seen = ctx->nap.load(std::memory_order_acquire);
        if (app_polled_at && now - app_polled_at < kAppPollingNs && !ctx->app_blocking.load(std::memory_order_acquire) &&
            !ctx->stop.load(std::memory_order_relaxed)) {
            futex_wait(&ctx->nap, nap_seen, kNapNs, true);
            idle_since = 0;
            continue;
        }
        app_polled_at = 0;
        if (did) {
            idle_since = 0;
            continue;
        }
        if (!idle_since) idle_since = now;
        if (now - idle_since < kSpinNs) {
            sched_yield();
            continue;
        }
        ctx->shared->sleeping.store(1);
        const uint32_t seen = ctx->shared->doorbell.load();
        uint64_t deadline = 0;
        {
            std::unique_lock l(ctx->mu, std::try_to_lock);
            if (l.owns_lock()) {
                did = progress_once(*ctx);
                deadline = next_deadline(*ctx);
            } else {
                did = true; // an application call is inside: look again rather than sleep
            }
        }
        if (!did && !ctx->stop.load()) {
            uint64_t wait = kMaxSleepNs;
            if (deadline) wait = deadline > now ? std::min(wait, deadline - now) : 1;
            futex_wait(&ctx->shared->doorbell, seen, wait);
        }
        ctx->shared->sleeping.store(0);
        idle_since = 0;
    }
}

} // namespace

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

void ring_doorbell(CtxShared *peer) {
    if (!peer) return;
    peer->doorbell.fetch_add(1);
    if (peer->sleeping.load())
        syscall(SYS_futex, reinterpret_cast<uint32_t *>(&peer->doorbell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void ShmContext::note_app_blocking() {
    if (app_blocking.load(std::memory_order_relaxed)) return;
    app_blocking.store(true, std::memory_order_release);
    wake_nap(*this);
}

bool progress_once(ShmContext &ctx, uint64_t now) {
    const uint32_t bell = ctx.shared->doorbell.load(std::memory_order_acquire);
    bool did = false, quiet = true;
    retry_offers(ctx);
    for (ShmQp *qp : ctx.qps) {
        did |= serve_requests(*qp);
        did |= requester_progress(*qp, now);
        quiet = quiet && qp->sq.empty() && qp->gpu_pending.empty() && !qp->in_send &&
                (!qp->self || (!qp->self->req.peek() && !qp->self->resp.peek()));
    }
    ctx.quiet_bell.store(!did && quiet ? bell : ShmContext::kNotQuiet, std::memory_order_release);
    return did;
}

void list_devices(std::vector<DeviceEntry> &out) { out.push_back({"shm", "shm"}); }

bool claims(const char *device) { return std::strcmp(device, "shm") == 0; }

ibex_status_t open_device(const char *device, const ibex_context_attr_t *attr, ibex_context **out) {
    reclaim_dead_segments();
    auto *ctx = new (std::nothrow) ShmContext;
    if (!ctx) return fail(IBEX_ERR_NO_MEMORY, "cannot allocate a context");
    ctx->ops = &kShmProviderOps;
    ctx->device_name = device;
    ctx->id = g_next_ctx.fetch_add(1) + 1;
    const uint32_t pid = static_cast<uint32_t>(getpid());
    if (ibex_status_t st = ctx->seg.create(ctx_segment_name(pid, ctx->id), sizeof(CtxShared)); st != IBEX_OK) {
        delete ctx;
        return st;
    }
    ctx->shared = new (ctx->seg.addr()) CtxShared{};
    ctx->shared->pid = pid;
    ctx->shared->nonce = std::random_device{}() | uint64_t(std::random_device{}()) << 32;
    ctx->shared->probe = ctx->shared->nonce;
    ctx->shared->probe_addr = reinterpret_cast<uintptr_t>(&ctx->shared->probe);
    ctx->shared->magic = kCtxMagic;
    open_fd_socket(*ctx);
    // IBEX_PROGRESS_THREAD=0 takes the thread away as on the soft providers: every
    // completion then comes from the application's own ibex calls.
    ctx->progress_thread = (!attr || attr->progress_thread) && config::get_bool("IBEX_PROGRESS_THREAD", true);
    ctx->path = PathDefaults::from_env();
    if (ctx->progress_thread) ctx->thread = std::thread(progress_main, ctx);
    *out = ctx;
    return IBEX_OK;
}

ibex_status_t close_device(ibex_context *c) {
    ShmContext *ctx = to_shm(c);
    {
        Lock l(ctx->mu);
        if (ctx->live_objects || !ctx->qps.empty())
            return fail(IBEX_ERR_INVALID_STATE, "context still has %d PD(s)/CQ(s): destroy them first", ctx->live_objects);
    }
    ctx->stop.store(true);
    if (ctx->thread.joinable()) {
        wake_nap(*ctx);
        ring_doorbell(ctx->shared);
        ctx->thread.join();
    }
    close_fd_socket(*ctx);
    delete ctx;
    return IBEX_OK;
}

ibex_status_t query_counters(ibex_context *c, ibex_counters_t *out) {
    ShmContext *ctx = to_shm(c);
    Lock l(ctx->mu);
    copy_counters(ctx->counters, out);
    return IBEX_OK;
}

ibex_status_t query_device(ibex_context *, ibex_device_attr_t *out) {
    out->max_msg_size = kMaxSoftMessage;
    out->max_mtu = IBEX_MTU_4096; // what QPs announce; nothing here is cut into packets by it
    // A message costs a work request and a completion through shared rings, a few hundred
    // ns, beside its bytes' copy at some 10 GB/s a core: a sixteenth of a 16 KiB copy.
    out->efficient_msg_bytes = size_t(16) << 10;
    return IBEX_OK;
}

ibex_status_t progress(ibex_context *c) {
    ShmContext *ctx = to_shm(c);
    ctx->note_app_poll();
    if (ctx->quiet()) return IBEX_OK;
    Lock l(ctx->mu);
    progress_once(*ctx);
    return IBEX_OK;
}

} // namespace ibex::shm

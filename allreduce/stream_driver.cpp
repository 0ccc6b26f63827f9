#include "allreduce/stream_driver.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include "allreduce/comm.h"
#include "allreduce/op_start.h"
#include "allreduce/stream_pass.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {

namespace {

// How long the progress thread naps between looks while callers drive. With nothing
// queued, the op running is a caller's own, and a caller that leaves without leaving
// work needs no driver until it comes back: a long nap, which a caller leaving work
// behind ends (caller_left_work). With ops queued (issued without waiting), callers come
// and go between their waits; a short nap, so that none of them pays a wake-up. Each
// look is itself a wake-up on a core a caller spins on (a 1 MiB allreduce stream, 2 ranks
// on 2 cores: 5600 context switches a second, 8% of its bandwidth), so while the callers
// keep coming back the short naps double kShortNapDoublings times (1, 2, then 4 ms): work a
// caller leaves behind waits that long at most for this thread.
constexpr std::chrono::milliseconds kLongNap{20};
constexpr std::chrono::milliseconds kShortNap{1};
constexpr int kShortNapDoublings = 2;

// Under mu, as a caller stops driving or queues an op: whether the thread, in its long
// nap, must wake, because nobody else will drive what is queued or running.
bool caller_left_work(ibex_comm *c) {
    if (!c->long_nap || c->waiters.load(std::memory_order_acquire) > 0) return false;
    if (c->queue.empty() && !c->running_op) return false;
    c->nap_kick = true;
    return true;
}

// How much longer the progress thread keeps away after a caller's last turn at the stream:
// handover_us from when it first saw caller_turns at its present count.
std::chrono::nanoseconds caller_handover_left(ibex_comm *c, uint64_t *seen, Clock::time_point *seen_at) {
    const Clock::time_point now = Clock::now();
    if (const uint64_t turns = c->caller_turns.load(std::memory_order_acquire); turns != *seen) {
        *seen = turns;
        *seen_at = now;
    }
    return std::chrono::microseconds(c->opt.handover_us) - (now - *seen_at);
}

} // namespace

void progress_main(ibex_comm *c) {
    std::unique_lock dl(c->drive_mu);
    DriveState &d = c->drive;
    d.last_activity = d.last_move = d.last_boot_check = Clock::now();
    uint64_t turns_seen = c->caller_turns.load(std::memory_order_acquire);
    Clock::time_point turns_seen_at = d.last_move;
    for (;;) {
        if (c->waiters.load(std::memory_order_acquire) > 0) {
            // A caller drives the stream: stay out of its way until it is done, and a little
            // longer, since a caller waiting on one request after another comes straight back.
            // The drive lock is taken again only once no caller is left: blocking on it
            // while a caller holds it would cost that caller a wake-up at every release.
            // Each look costs this thread a wake-up on a core a caller is spinning on, so
            // the looks are rare and a caller that leaves work behind ends the nap.
            dl.unlock();
            {
                std::unique_lock l(c->mu);
                for (int naps = 0; naps < 1000000 && c->waiters.load(std::memory_order_acquire) > 0; ++naps) {
                    // Ops queued behind the callers' own: a short nap, as they may leave them.
                    c->long_nap = c->queue.empty();
                    const auto nap = c->long_nap ? kLongNap : kShortNap * (1 << std::min(naps, kShortNapDoublings));
                    if (c->driver_cv.wait_for(l, nap,
                                              [&] { return c->aborting || c->stopping || c->nap_kick; }))
                        break;
                }
                c->long_nap = false;
                c->nap_kick = false;
            }
            dl.lock();
            if (!c->aborting) continue;
        } else if (const auto left = caller_handover_left(c, &turns_seen, &turns_seen_at); left.count() > 0) {
            dl.unlock();
            {
                std::unique_lock l(c->mu);
                c->driver_cv.wait_for(l, left, [&] { return c->aborting || c->stopping; });
            }
            dl.lock();
            if (!c->aborting) continue;
        }
        const Pass p = drive_pass(c);
        if (p == Pass::stop) break;
        if (p == Pass::idle) drive_idle(c, dl, c->opt.spin_us, false);
    }
    // Aborting or stopping: nothing runs any more. Retired GPU ops succeeded: they
    // complete first, once their results are on the GPU.
    std::vector<ibex_request *> retired;
    c->gpu.settle(&retired);
    for (ibex_request *r : retired) complete(r, IBEX_OK, "");
    if (d.have) {
        c->exec.finish();
        c->gpu.abandon();
        c->direct.abandon();
        complete(d.op.req, IBEX_ERR_INVALID_STATE, "communicator aborted");
        d.have = false;
    }
    std::vector<Op> rest;
    {
        std::lock_guard l(c->mu);
        c->queue.drain_into(&rest);
        c->running_op = false;
        c->idle_cv.notify_all();
    }
    for (Op &o : rest) complete(o.req, IBEX_ERR_INVALID_STATE, "communicator aborted");
}

void stop_progress_thread(ibex_comm *c, bool abort) {
    {
        std::lock_guard l(c->mu);
        c->stopping = true;
        if (abort) c->aborting = true;
    }
    c->driver_cv.notify_all();
    if (c->thread.joinable()) {
        wake(c);
        c->thread.join();
    }
    // A caller still inside request_wait leaves as soon as it sees its request done, which
    // the thread's exit guaranteed; only then may the communicator go.
    for (int spins = 0; c->waiters.load(std::memory_order_acquire) > 0 && spins < 1000000; ++spins) sched_yield();
    std::lock_guard l(c->mu); // the last waiter lets go of mu after its decrement
}

bool run_inline(ibex_comm *c, Op &op, ibex_status_t *out) {
    if (op_path(c, op) != OpPath::boxes) return false;
    c->waiters.fetch_add(1, std::memory_order_acq_rel); // the progress thread hands the stream over
    std::unique_lock dl(c->drive_mu);
    DriveState &d = c->drive;
    bool idle;
    {
        std::lock_guard l(c->mu);
        idle = c->queue.empty() && !c->running_op && !d.have && c->error == IBEX_OK && !c->stopping;
        if (idle) c->running_op = true;
    }
    bool ran_out = false; // finished by the first tight polls, outside drive_pass
    bool stopped = false;
    if (idle) {
        d.begin(std::move(op), false);
        d.op.req = nullptr;
        d.fast = true;
        ibex_status_t st = boxes_start(c, d.op);
        bool done = false, moved = false;
        // The peers' words are usually a cache-line transfer away: poll tightly, for as
        // long as a waiting caller spins (then the stream's loop naps). With a core of its
        // own this thread never yields: a yield hands the core to whatever else runs on
        // the host for a whole time slice. Sharing cores with other ranks, it gives the
        // core away between looks, as an oversubscribed MPI does.
        // Oversubscribed, the peer this rank waits for is often just off the CPU for a few
        // of its turns: yielding to it for up to 2 ms beats a nap, since no completion
        // would wake this rank when the word lands.
        // With a core of its own the clock is first read after 256 looks: most small
        // collectives are done by then, and a clock read per collective is a tenth of its
        // time. Yielding, it is read every 16 looks: a yield on a crowded host can hand the
        // core away for milliseconds, and 256 of them once took 1.5 s, past the op's
        // timeout, which then only began to count.
        const int spin_us = c->opt.own_core ? c->opt.wait_spin_us : std::max(c->opt.wait_spin_us, 2000);
        const unsigned clock_every = c->opt.own_core ? 255 : 15;
        Clock::time_point first_look{}, spin_until{};
        for (unsigned i = 0; st == IBEX_OK && !done; ++i) {
            st = boxes_poll(c, d.op, &done, &moved);
            if (done || st != IBEX_OK) break;
            if (c->opt.own_core || i < 16)
                __builtin_ia32_pause();
            else
                sched_yield();
            if ((i & clock_every) == clock_every) {
                const auto now = Clock::now();
                if (i == clock_every) {
                    first_look = now;
                    spin_until = now + std::chrono::microseconds(spin_us);
                } else if (now > spin_until) {
                    break;
                }
            }
        }
        if (st != IBEX_OK) {
            enter_error(c, st, std::string(op_kind_name(d.op.kind)) + ": " + ibex_last_error(), true, &d.op);
            d.have = false;
        } else if (done) {
            d.have = false;
            ran_out = true;
        } else {
            // The timeout counts from the first look at the clock, not from the spin's end.
            d.last_move = Clock::now();
            d.last_activity = first_look;
            while (d.have) {
                const Pass p = drive_pass(c);
                if (p == Pass::stop) {
                    stopped = true; // aborted under us: the progress thread cleans up
                    break;
                }
                if (p == Pass::idle) drive_idle(c, dl, c->opt.wait_spin_us, c->opt.own_core);
            }
        }
    }
    dl.unlock();
    ibex_status_t st = IBEX_OK;
    std::string detail;
    {
        std::lock_guard l(c->mu);
        if (ran_out) {
            c->running_op = false;
            c->idle_cv.notify_all();
        }
        if (idle && c->error != IBEX_OK) {
            st = c->error;
            detail = c->error_detail;
        } else if (stopped) {
            st = IBEX_ERR_INVALID_STATE;
            detail = "communicator aborted";
        }
        c->caller_turns.fetch_add(1, std::memory_order_release);
        c->waiters.fetch_sub(1, std::memory_order_acq_rel);
        if (caller_left_work(c)) c->driver_cv.notify_all(); // under mu, as in request_wait
    }
    if (!idle) return false;
    *out = st == IBEX_OK ? IBEX_OK : fail(st, "%s", detail.c_str());
    return true;
}

namespace {

// Under mu: IBEX_OK when the communicator takes ops, else why not (with its detail set).
ibex_status_t refusal_locked(ibex_comm *c) {
    if (c->error != IBEX_OK) return fail(c->error, "communicator is in an error state: %s", c->error_detail.c_str());
    if (c->stopping) return fail(IBEX_ERR_INVALID_STATE, "communicator is being destroyed");
    return IBEX_OK;
}

// A request nobody else holds yet (its op was refused).
void drop_unshared(ibex_request *r) {
    r->refs.store(1, std::memory_order_relaxed);
    r->release();
}

} // namespace

ibex_status_t submit_small(ibex_comm *c, Op &&op, ibex_request **req) {
    // Keeps the progress thread away while the caller issues one collective after another.
    c->caller_turns.fetch_add(1, std::memory_order_release);
    std::unique_lock dl(c->drive_mu, std::try_to_lock);
    if (!dl.owns_lock()) return comm_submit(c, std::move(op), req);
    DriveState &d = c->drive;
    // The op before may be waiting only for words already in: finish it (and start what
    // was queued behind it) first.
    for (int i = 0; i < 2 && d.have && drive_pass(c, 1) == Pass::moved; ++i) {
    }
    ibex_request *r = request_new();
    if (!r) return fail(IBEX_ERR_NO_MEMORY, "request");
    r->comm = c;
    op.req = r;
    bool here;
    {
        std::lock_guard l(c->mu);
        if (const ibex_status_t st = refusal_locked(c); st != IBEX_OK) {
            drop_unshared(r);
            return st;
        }
        here = !d.have && !c->running_op && c->queue.empty();
        if (here) c->running_op = true;
        else c->queue.push_back(std::move(op));
        if (!here && caller_left_work(c)) c->driver_cv.notify_all();
    }
    *req = r;
    if (!here) {
        // A driver asleep in poll() (the drive lock is free meanwhile) must see the queue.
        if (c->driver_asleep.load(std::memory_order_seq_cst)) wake(c);
        // Words may have come in meanwhile: the running op finished, the next one started.
        for (int i = 0; i < 4 && drive_pass(c, 1) == Pass::moved; ++i) {
        }
        return IBEX_OK;
    }
    d.begin(std::move(op), false);
    if (const ibex_status_t st = boxes_start(c, d.op); st != IBEX_OK) {
        enter_error(c, st, std::string(op_kind_name(d.op.kind)) + ": " + ibex_last_error(), true, &d.op);
        d.have = false; // r carries the error to the caller's wait
        return IBEX_OK;
    }
    d.fast = true;
    d.mark_active();
    drive_pass(c, 1); // finished already when the peers were first
    return IBEX_OK;
}

ibex_status_t comm_submit(ibex_comm *c, Op &&op, ibex_request **req, bool caller_waits) {
    ibex_request *r = request_new();
    if (!r) return fail(IBEX_ERR_NO_MEMORY, "request");
    op.req = r;
    r->comm = c;
    {
        std::lock_guard l(c->mu);
        if (const ibex_status_t st = refusal_locked(c); st != IBEX_OK) {
            drop_unshared(r);
            return st;
        }
        c->queue.push_back(std::move(op));
        if (!caller_waits && caller_left_work(c)) c->driver_cv.notify_all();
    }
    if (c->driver_asleep.load(std::memory_order_seq_cst)) wake(c);
    *req = r;
    return IBEX_OK;
}

ibex_status_t request_wait(ibex_request *r) {
    ibex_comm *c = r->comm;
    bool driving = false;
    if (c && !request_done(r)) {
        // Registered under the request's lock, announced as a sleeper so that complete()
        // takes that lock: the progress thread cannot complete r, exit, and let the
        // communicator be freed before it sees this caller among the waiters.
        r->sleepers.fetch_add(1, std::memory_order_seq_cst);
        {
            std::lock_guard l(r->mu);
            if (!r->done.load(std::memory_order_seq_cst)) {
                c->waiters.fetch_add(1, std::memory_order_acq_rel);
                driving = true;
            }
        }
        r->sleepers.fetch_sub(1, std::memory_order_relaxed);
    }
    if (driving) {
        bool stopped = false;
        int misses = 0;
        while (!stopped && !request_done(r)) {
            std::unique_lock dl(c->drive_mu, std::try_to_lock);
            if (!dl.owns_lock()) {
                // The progress thread hands over within one pass, and a small collective
                // may finish under it meanwhile: look again soon before sleeping.
                if (c->opt.own_core && ++misses < 64) {
                    for (int i = 0; i < 32; ++i) __builtin_ia32_pause();
                    continue;
                }
                misses = 0;
                // Another caller drives: wait on our own request a little, then try again.
                request_sleep(r, std::chrono::microseconds(200));
                continue;
            }
            while (!request_done(r)) {
                const Pass p = drive_pass(c);
                if (p == Pass::stop) {
                    stopped = true; // the progress thread finishes what is left
                    break;
                }
                if (p == Pass::idle) drive_idle(c, dl, c->opt.wait_spin_us, c->opt.own_core);
            }
            // The op queued next was taken as r's finished: start it before leaving, so the
            // peers have its first words while this caller returns and comes back to wait.
            if (!stopped && c->drive.taken) drive_pass(c, 1);
        }
        {
            // A wake-up only for work left behind (see ibex_comm).
            std::lock_guard l(c->mu);
            c->caller_turns.fetch_add(1, std::memory_order_release);
            c->waiters.fetch_sub(1, std::memory_order_acq_rel);
            // Notified under mu: once it is let go, the communicator may be destroyed.
            if (caller_left_work(c)) c->driver_cv.notify_all();
        }
        // Last touch of c: whatever is still queued goes back to the progress thread.
    }
    if (!request_done(r)) request_sleep(r, std::chrono::microseconds(-1));
    const ibex_status_t st = r->status;
    if (st == IBEX_OK) {
        r->release();
        return IBEX_OK;
    }
    const std::string detail = r->detail ? *r->detail : std::string("(no detail: out of memory)");
    r->release();
    return fail(st, "%s", detail.c_str());
}

void request_poke(ibex_request *r) {
    ibex_comm *c = r->comm;
    if (!c || request_done(r)) return;
    std::unique_lock dl(c->drive_mu, std::try_to_lock);
    if (dl.owns_lock()) drive_pass(c);
}

ibex_status_t comm_drain(ibex_comm *c) {
    std::unique_lock l(c->mu);
    c->idle_cv.wait(l, [&] { return (c->queue.empty() && !c->running_op) || c->aborting; });
    if (c->error != IBEX_OK) return fail(c->error, "communicator is in an error state: %s", c->error_detail.c_str());
    return IBEX_OK;
}

} // namespace ibex::coll

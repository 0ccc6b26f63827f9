#include "allreduce/stream_pass.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include "allreduce/comm.h"
#include "allreduce/op_start.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {


int64_t ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

void wake(ibex_comm *c) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(c->wake_fd, &one, sizeof one);
}

// Puts the communicator in its error state (first error wins), tells the other ranks when
// the error is this rank's own, and fails the running and queued ops.
void enter_error(ibex_comm *c, ibex_status_t st, const std::string &detail, bool local, Op *running) {
    std::vector<Op> failed;
    std::string msg;
    {
        std::lock_guard l(c->mu);
        if (c->error == IBEX_OK) {
            c->error = st;
            c->error_detail = detail;
            IBEX_LOG(info, "communicator rank %d: %s", c->rank, detail.c_str());
        }
        st = c->error;
        msg = c->error_detail;
        c->queue.drain_into(&failed);
    }
    if (local && c->boot) c->boot->send_abort(st, detail.c_str());
    c->exec.shut_down();
    // Staged GPU ops retired before the failure succeeded: they complete first, in order,
    // once their results are on the GPU (a prefetched op is among the failed).
    std::vector<ibex_request *> retired;
    c->gpu.settle(&retired);
    for (ibex_request *r : retired) complete(r, IBEX_OK, "");
    if (running == &c->drive.op) {
        c->sumsrv.abandon();
        c->mail.abandon();
        c->gpu.abandon();
        c->direct.abandon();
        c->gpu_direct.abandon();
        c->drive.gpu_draining = false;
    }
    if (running) {
        complete(running->req, st, msg);
        running->req = nullptr;
    }
    for (Op &op : failed) complete(op.req, st, msg);
    std::lock_guard l(c->mu);
    c->running_op = false;
    c->idle_cv.notify_all();
}

namespace {

// Takes the next queued op as the running one (caller holds mu and nothing runs): the
// next pass starts it.
void take_next(ibex_comm *c) {
    c->drive.begin(std::move(c->queue.front()), true);
    c->queue.pop_front();
    c->running_op = true;
}

// The running op has finished: its request completes and the stream takes the next, in
// the same hold of mu (a caller issuing many small collectives pays one lock per op here).
void finish_running(ibex_comm *c) {
    DriveState &d = c->drive;
    complete(d.op.req, IBEX_OK, "");
    d.op.req = nullptr;
    d.have = false;
    // A caller issuing one collective after another submits the next within
    // microseconds: keep polling for it rather than sleep and be woken.
    d.mark_moved();
    std::lock_guard l(c->mu);
    if (!c->queue.empty() && !c->aborting) return take_next(c);
    c->running_op = false;
    c->idle_cv.notify_all();
}

// The running staged GPU op's last chunk ran and its results are on their way to the GPU:
// it is retired (its request completes when they are there) and the next op is taken, so
// that its collective runs while they copy.
void retire_running(ibex_comm *c) {
    DriveState &d = c->drive;
    c->gpu.retire(d.op.req);
    d.op.req = nullptr;
    d.have = false;
    d.mark_moved();
    std::lock_guard l(c->mu);
    if (!c->queue.empty() && !c->aborting) take_next(c); // running_op stays: the retired op is not done
}

// Completes the retired GPU ops whose results reached the GPU, oldest first; with nothing
// else running or queued, the stream is then idle.
void complete_retired(ibex_comm *c) {
    bool any = false;
    while (ibex_request *r = c->gpu.next_completed()) {
        complete(r, IBEX_OK, "");
        any = true;
    }
    if (!any) return;
    c->drive.mark_moved();
    if (c->gpu.retired_pending() || c->drive.have) return;
    std::lock_guard l(c->mu);
    if (!c->queue.empty()) return; // the next pass takes it
    c->running_op = false;
    c->idle_cv.notify_all();
}

// Whether op, taken off the queue, runs staged through GpuStaging as a collective (the
// only kind that may start while earlier staged ops are retired; see gpu_staging.h).
bool staged_collective(ibex_comm *c, const Op &op) {
    return op.on_gpu && op.kind != OpKind::p2p && !c->gpu_direct.takes(op);
}

// While a staged GPU op runs: the op queued behind it, when it is one too, gets its input
// copies queued now (GpuStaging::prefetch decides). The queue changes meanwhile only at its
// back: its front leaves only under drive_mu, which this pass holds.
void prefetch_next(ibex_comm *c) {
    Op next;
    {
        std::lock_guard l(c->mu);
        if (c->queue.empty() || c->error != IBEX_OK || c->aborting || c->stopping) return;
        const Op &f = c->queue.front();
        next.kind = f.kind;
        next.args = f.args;
        next.req = f.req;
        next.on_gpu = f.on_gpu;
        next.gpu_direct_refused = f.gpu_direct_refused;
        next.algo = f.algo;
    }
    if (!staged_collective(c, next)) next.on_gpu = false; // not staged: nothing to prefetch
    c->gpu.prefetch(c, next);
}

// The running op's collective finished. A GPU op goes on with its next chunk, or is
// retired while its copies back to the GPU run (a batch waits for them); any other op is
// done.
void collective_finished(ibex_comm *c) {
    DriveState &d = c->drive;
    if (c->gpu_direct.active()) {
        // A fast-box round of a GPU collective mapped across processes
        // (allreduce/gpu_direct.h): its next step.
        bool done = false, fallback = false;
        ibex_status_t st = c->gpu_direct.advance(d.op, &done, &fallback);
        if (st == IBEX_OK && !done && !fallback && !c->gpu_direct.waiting()) st = c->fast.start(c, c->gpu_direct.sub());
        if (st != IBEX_OK) {
            enter_error(c, st, std::string(op_kind_name(d.op.kind)) + ": " + ibex_last_error(), true, &d.op);
            d.have = false;
            return;
        }
        d.mark_moved();
        if (fallback) {
            // Staged instead, on every rank: the next pass takes the op as new.
            d.op.gpu_direct_refused = true;
            d.taken = true;
            d.fast = false;
            return;
        }
        if (!done) {
            d.fast = !c->gpu_direct.waiting(); // else the next passes wait for the GPU
            return;
        }
        d.fast = false;
        return finish_running(c);
    }
    if (c->direct.active()) {
        // A fast-box round of a direct allreduce (allreduce/shm_direct.h): its next phase.
        bool done = false, fallback = false;
        ibex_status_t st = c->direct.advance(d.op, &done, &fallback);
        if (st == IBEX_OK && !done && !fallback) st = c->fast.start(c, c->direct.sub());
        if (st != IBEX_OK) {
            enter_error(c, st, std::string(op_kind_name(d.op.kind)) + ": " + ibex_last_error(), true, &d.op);
            d.have = false;
            return;
        }
        d.mark_moved();
        if (!done) {
            d.fast = !fallback;
            d.scheduled = fallback; // the next pass starts it the scheduled way
            return;
        }
    }
    d.fast = false;
    d.scheduled = false;
    if (!c->gpu.active()) return finish_running(c);
    bool more = false;
    if (ibex_status_t st = c->gpu.chunk_done(d.op, &more); st != IBEX_OK) {
        enter_error(c, st, std::string(op_kind_name(d.op.kind)) + ": " + ibex_last_error(), true, &d.op);
        d.have = false;
        return;
    }
    if (!more && c->gpu.retirable(d.op)) return retire_running(c);
    d.gpu_draining = !more;
    d.mark_moved();
}

// The running op failed on this rank: the communicator enters its error state with it.
Pass fail_running(ibex_comm *c, ibex_status_t st) {
    DriveState &d = c->drive;
    std::string detail = std::string(op_kind_name(d.op.kind)) + ": " + ibex_last_error();
    // The direct paths' rounds differ between GPU and host buffers: the likeliest cause of
    // a mismatch there is a rank whose buffers are on the other side.
    if (st == IBEX_ERR_INVALID_ARGUMENT && d.fast && (c->gpu_direct.active() || c->direct.active()))
        detail += " (or some ranks passed GPU buffers where others passed host memory: every rank must pass the same "
                  "kind to a collective this large)";
    enter_error(c, st, detail, true, &d.op);
    d.have = false;
    return Pass::moved;
}

// Starts a fast-box round of the running op's mapped GPU collective.
Pass start_gpu_direct_round(ibex_comm *c) {
    if (ibex_status_t st = c->fast.start(c, c->gpu_direct.sub()); st != IBEX_OK) return fail_running(c, st);
    c->drive.fast = true;
    c->drive.mark_active();
    return Pass::moved;
}

} // namespace

// One step of the stream: takes the next op, starts it, polls the executor, finishes or
// fails it. Caller holds drive_mu. stop: aborting, or stopping with nothing left to run.
// fast_polls: how many times to look at the fast boxes before calling the pass idle (the
// peers' words are usually a cache-line transfer away).
Pass drive_pass(ibex_comm *c, int fast_polls) {
    DriveState &d = c->drive;
    d.idle_pass_timed = false;
    if (c->aborting.load(std::memory_order_acquire)) return Pass::stop;
    if (c->gpu.retired_pending()) complete_retired(c);
    // With an op running (most passes) there is nothing to take: no lock.
    if (!d.have && (c->queue.size_unlocked() > 0 || c->stopping.load(std::memory_order_acquire))) {
        std::lock_guard l(c->mu);
        if (c->aborting) return Pass::stop;
        if (!c->queue.empty()) take_next(c);
        if (!d.have && c->stopping) return Pass::stop;
    }
    // Requests complete in order: behind retired GPU ops (their results still copying),
    // only another staged collective may start.
    if (d.taken && c->gpu.retired_pending() && !staged_collective(c, d.op)) return Pass::idle;
    const bool taken = d.taken;
    d.taken = false;
    if (taken && d.op.on_gpu) {
        bool in_error;
        {
            std::lock_guard l(c->mu);
            in_error = c->error != IBEX_OK;
        }
        // (a communicator in error fails the op below, before it would be staged)
        if (!in_error && c->gpu_direct.takes(d.op)) {
            if (ibex_status_t st = c->gpu_direct.begin(d.op); st != IBEX_OK) return fail_running(c, st);
            return start_gpu_direct_round(c);
        }
        if (!in_error) {
            if (!c->gpu.can_begin(c, d.op)) {
                d.taken = true; // both slots' results still copying: the next passes retry
                return Pass::idle;
            }
            if (ibex_status_t st = c->gpu.begin(c, d.op); st != IBEX_OK) return fail_running(c, st);
            d.gpu_draining = false;
        }
    }
    if (d.have && c->gpu_direct.waiting()) {
        // The local phase of a mapped GPU collective runs on the GPU; its barrier waits.
        if (!c->gpu_direct.ready()) {
            d.stamp(Clock::now());
            if (ms_since(d.last_activity) <= c->opt.timeout_ms) return Pass::idle;
            char buf[160];
            std::snprintf(buf, sizeof buf, "%s: the GPU did not finish its part in %d ms", op_kind_name(d.op.kind),
                          c->opt.timeout_ms);
            enter_error(c, IBEX_ERR_TIMEOUT, buf, true, &d.op);
            d.have = false;
            return Pass::moved;
        }
        return start_gpu_direct_round(c);
    }
    if (d.have && c->gpu.active()) {
        if (c->gpu.may_prefetch() && c->queue.size_unlocked() > 0) prefetch_next(c);
        // Between the chunks of a GPU op: its input still copying in, or its results out.
        if (d.gpu_draining) {
            if (!c->gpu.drained()) return Pass::idle;
            d.gpu_draining = false;
            finish_running(c);
            return Pass::moved;
        }
        if (!d.fast && !c->exec.active() && !c->gpu.ready()) return Pass::idle;
    }
    if (d.have && !d.fast && !c->exec.active() && !c->sumsrv.active() && !c->mail.active()) {
        ibex_status_t err;
        std::string err_detail;
        {
            std::lock_guard l(c->mu);
            err = c->error;
            err_detail = c->error_detail;
        }
        bool empty = false;
        ibex_status_t st = err;
        const OpPath path = st == IBEX_OK && !d.scheduled ? op_path(c, d.op) : OpPath::scheduled;
        if (st == IBEX_OK && path == OpPath::boxes) {
            st = boxes_start(c, d.op);
            d.fast = st == IBEX_OK;
        } else if (st == IBEX_OK && path == OpPath::direct) {
            c->direct.begin(d.op);
            st = c->fast.start(c, c->direct.sub());
            d.fast = st == IBEX_OK;
        } else if (st == IBEX_OK) {
            st = start_op(c, d.op, &empty);
        }
        if (err != IBEX_OK) {
            enter_error(c, err, err_detail, false, &d.op);
            d.have = false;
            return Pass::moved;
        }
        if (st != IBEX_OK) return fail_running(c, st);
        if (empty) {
            complete(d.op.req, IBEX_OK, "");
            d.have = false;
            std::lock_guard l(c->mu);
            c->running_op = false;
            c->idle_cv.notify_all();
            return Pass::moved;
        }
        d.mark_active(); // a new op: its first replies are a latency away
    }
    if (d.have && d.fast) {
        bool done = false, moved = false;
        ibex_status_t st = IBEX_OK;
        // Sharing cores, spinning here only delays the peer that has to write the word.
        if (!c->opt.own_core) fast_polls = 1;
        const Op &boxed = c->gpu_direct.active() ? c->gpu_direct.sub() : c->direct.active() ? c->direct.sub() : d.op;
        for (int i = 0; i < fast_polls && st == IBEX_OK && !done; ++i) {
            st = boxes_poll(c, boxed, &done, &moved);
            if (!done && i + 1 < fast_polls) __builtin_ia32_pause(); // none after the last look
        }
        if (st != IBEX_OK) return fail_running(c, st);
        if (done) {
            collective_finished(c);
            return Pass::moved;
        }
        if (moved)
            d.mark_active();
        else if ((++d.quiet_passes & 15) != 0)
            return Pass::idle; // the clock, the CQ and the timeout only every 16th quiet look
    }
    // Also while a fast-box op runs: stray completions are drained, and a WRITE that had to
    // queue (not in place) is served.
    bool did = false;
    if (ibex_status_t st = c->exec.progress(&did); st != IBEX_OK) {
        enter_error(c, st, ibex_last_error(), true, d.have ? &d.op : nullptr);
        d.have = false;
        return Pass::moved;
    }
    if (d.have && c->sumsrv.active()) {
        // A sumsrv allreduce: the servers' part beside the workers' schedule (if any).
        bool moved = false;
        if (ibex_status_t st = c->sumsrv.progress(&moved); st != IBEX_OK) return fail_running(c, st);
        did = did || moved;
        if (c->sumsrv.done() && (!c->exec.active() || c->exec.finished())) {
            if (c->exec.active()) {
                if (d.op.times) *d.op.times = c->exec.done_times();
                c->exec.finish();
            }
            c->sumsrv.finish();
            collective_finished(c);
            return Pass::moved;
        }
    } else if (d.have && !d.fast && c->mail.active()) {
        // Sends and receives with ranks of this host: their mailbox part (the small messages
        // whole, the others' notices) beside the schedule that moves the rest (if any).
        bool moved = false, done = false;
        if (ibex_status_t st = c->mail.poll(&done, &moved); st != IBEX_OK) return fail_running(c, st);
        did = did || moved;
        if (done && (!c->exec.active() || c->exec.finished())) {
            if (c->exec.active()) c->exec.finish();
            collective_finished(c);
            return Pass::moved;
        }
    } else if (d.have && c->exec.finished()) {
        if (d.op.times) *d.op.times = c->exec.done_times();
        c->exec.finish();
        collective_finished(c);
        return Pass::moved;
    }
    if (did) {
        d.mark_active();
        return Pass::moved;
    }
    const auto now = Clock::now();
    d.stamp(now);
    d.idle_pass_now = now;
    d.idle_pass_timed = true;
    if (d.have && std::chrono::duration_cast<std::chrono::milliseconds>(now - d.last_activity).count() >
                      c->opt.timeout_ms) {
        // The mailboxes' part of a batch, where its schedule (if any) is through.
        const bool on_mail = !d.fast && c->mail.active() && (!c->exec.active() || c->exec.finished());
        const int peer = d.fast ? boxes_waiting_on(c, d.op) : on_mail ? c->mail.waiting_on() : c->exec.waiting_on();
        char buf[320];
        const bool on_servers = c->sumsrv.active() && !c->sumsrv.done() && (!c->exec.active() || c->exec.finished());
        if (on_servers)
            std::snprintf(buf, sizeof buf, "%s made no progress for %d ms (waiting on the %s)", op_kind_name(d.op.kind),
                          c->opt.timeout_ms, c->sumsrv.stall_detail().c_str());
        else
            std::snprintf(buf, sizeof buf, "%s made no progress for %d ms (waiting on rank %d)", op_kind_name(d.op.kind),
                          c->opt.timeout_ms, peer);
        IBEX_LOG(info, "communicator rank %d: %s: %s", c->rank, buf,
                 (d.fast ? boxes_stall_detail(c, d.op) : on_mail ? c->mail.stall_detail() : c->exec.stall_detail()).c_str());
        enter_error(c, IBEX_ERR_TIMEOUT, buf, true, &d.op);
        d.have = false;
        return Pass::moved;
    }
    return Pass::idle;
}

// Nothing moved: busy-poll for spin_us after the last movement (the next slice is usually
// one message latency away, the next op one call away); then sleep until a completion, a
// new op, a bootstrap message or the next deadline. dl holds drive_mu and is released while
// asleep or yielding, so a caller can take the stream over.
// own_core: this thread has a core to itself (a caller on a host whose ranks fit its
// cores): it spins on the CPU's pause instruction and yields only now and then, as MPI's
// busy-polling does; otherwise every idle pass yields the core.
void drive_idle(ibex_comm *c, std::unique_lock<std::mutex> &dl, int spin_us, bool own_core) {
    DriveState &d = c->drive;
    // A GPU op between chunks waits for copies (a few hundred microseconds), and a mapped
    // one for its kernel and copies, which wake no descriptor: yield rather than nap.
    if (d.have && (c->gpu.active() || c->gpu_direct.waiting()) && !d.fast && !c->exec.active()) {
        dl.unlock();
        sched_yield();
        dl.lock();
        return;
    }
    // A fast-box op, or a batch's mailbox part, is not woken by a completion: sharing cores,
    // keep yielding to the peer a while longer before napping (see run_inline).
    const bool polled = d.have && (d.fast || c->mail.active());
    if (polled && !own_core) spin_us = std::max(spin_us, 2000);
    if (own_core && d.have && d.fast && (d.quiet_passes & 15) != 0) {
        for (int i = 0; i < 16; ++i) __builtin_ia32_pause(); // the clock only every 16th pass
        return;
    }
    const auto now = d.idle_pass_timed ? d.idle_pass_now : Clock::now();
    d.idle_pass_timed = false;
    d.stamp(now);
    if (now < d.last_move + std::chrono::microseconds(spin_us)) {
        // A fast-box op is polled, not woken: yielding gains it nothing.
        if (own_core && ((++d.idle_passes & 63) != 0 || polled)) {
            for (int i = 0; i < 16; ++i) __builtin_ia32_pause();
            return;
        }
        dl.unlock();
        sched_yield();
        dl.lock();
        return;
    }
    if (c->gpu.retired_pending()) {
        // Their copies wake no descriptor either, and a caller may be waiting on one.
        dl.unlock();
        sched_yield();
        dl.lock();
        return;
    }
    if (!c->exec.arm()) return;
    if (d.have && c->sumsrv.active() && !c->sumsrv.arm()) return;
    // Announce the nap before the last look at the queue: a submission either lands in that
    // look or sees the flag and writes wake_fd. Ops queued behind a running one are no reason
    // to stay awake: they wait for it either way, and a driver that never naps never checks
    // the bootstrap connections below (a dead rank would then surface only at the timeout).
    c->driver_asleep.store(true, std::memory_order_seq_cst);
    {
        std::lock_guard l(c->mu);
        if ((!d.have && !c->queue.empty()) || c->aborting || c->stopping) {
            c->driver_asleep.store(false, std::memory_order_relaxed);
            return;
        }
    }
    pollfd pfd[16];
    nfds_t n = 0;
    pfd[n++] = {c->wake_fd, POLLIN, 0};
    for (int fd : c->exec.cq_fds()) pfd[n++] = {fd, POLLIN, 0}; // at most Executor::kMaxLinks
    const nfds_t drained = n;
    if (d.have && c->sumsrv.active()) {
        // the servers' CQ and control connections (read by the next pass, not here)
        std::vector<int> more;
        c->sumsrv.fds(&more);
        for (int fd : more)
            if (n < std::size(pfd)) pfd[n++] = {fd, POLLIN, 0};
    }
    for (int fd : c->boot->fds())
        if (n < std::size(pfd)) pfd[n++] = {fd, POLLIN, 0};
    int wait_ms = 100;
    if (d.have)
        wait_ms = static_cast<int>(std::clamp<int64_t>(c->opt.timeout_ms - ms_since(d.last_activity) + 1, 1, 100));
    // A peer's fast-box or mailbox word raises no completion to wake this poll: nap briefly.
    if (polled) wait_ms = 1;
    dl.unlock();
    const int r = ::poll(pfd, n, wait_ms);
    c->driver_asleep.store(false, std::memory_order_relaxed);
    dl.lock();
    bool boot_ready = ms_since(d.last_boot_check) >= 100;
    if (r > 0) {
        uint64_t v;
        for (nfds_t i = 0; i < drained; ++i)
            if (pfd[i].revents & POLLIN) [[maybe_unused]] ssize_t x = ::read(pfd[i].fd, &v, sizeof v);
        for (nfds_t i = drained; i < n; ++i)
            if (pfd[i].revents) boot_ready = true;
    }
    if (!boot_ready) return;
    d.last_boot_check = Clock::now();
    ibex_status_t st;
    std::string detail;
    if (!c->boot->healthy(&st, &detail)) {
        bool already;
        {
            std::lock_guard l(c->mu);
            already = c->error != IBEX_OK;
        }
        if (!already || d.have) {
            enter_error(c, st, detail, false, d.have ? &d.op : nullptr);
            d.have = false;
        }
    }
}

} // namespace ibex::coll

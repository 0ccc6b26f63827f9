#include "allreduce/comm.h"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <sched.h>
#include <set>
#include <sys/eventfd.h>
#include <unistd.h>

#include "runtime/bootstrap/unique_id.h"
#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kProbePings = 8;
constexpr size_t kProbeBulk = 1 << 20;
constexpr size_t kGammaBytes = 256 << 10;

int64_t ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

void complete(ibex_request *r, ibex_status_t st, const std::string &detail) {
    if (!r) return;
    {
        std::lock_guard l(r->mu);
        r->status = st;
        r->detail = detail;
        r->done = true;
        r->cv.notify_all();
    }
    r->release();
}

void wake(ibex_comm *c) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(c->wake_fd, &one, sizeof one);
}

std::vector<int> needed_peers(int rank, int n) {
    std::set<int> s;
    for (int p : ring_peers(rank, n)) s.insert(p);
    for (int p : rhd_peers(rank, n)) s.insert(p);
    for (int p : tree_peers(rank, n)) s.insert(p);
    s.erase(rank);
    return {s.begin(), s.end()};
}

ibex_status_t ensure_scratch(ibex_comm *c, size_t bytes) {
    if (bytes <= c->scratch_bytes) return IBEX_OK;
    if (c->scratch) {
        c->cache->remove(c->scratch);
        std::free(c->scratch);
        c->scratch = nullptr;
        c->scratch_bytes = 0;
    }
    const size_t want = std::max<size_t>((bytes + 4095) & ~size_t(4095), 64 << 10);
    c->scratch = std::aligned_alloc(4096, want);
    if (!c->scratch) return fail(IBEX_ERR_NO_MEMORY, "communicator scratch of %zu bytes", want);
    c->scratch_bytes = want;
    return c->cache->add(c->scratch, want);
}

// How many ranks share this rank's host (by bootstrap address).
ibex_status_t count_local_ranks(ibex_comm *c, int *out) {
    char mine[64] = {};
    const std::string ip = c->boot->local_ip();
    std::snprintf(mine, sizeof mine, "%s", ip.c_str());
    std::vector<char> all(sizeof mine * static_cast<size_t>(c->nranks));
    IBEX_TRY(c->boot->allgather(mine, sizeof mine, all.data(), c->opt.timeout_ms));
    *out = 0;
    for (int r = 0; r < c->nranks; ++r)
        if (std::strncmp(all.data() + sizeof mine * static_cast<size_t>(r), mine, sizeof mine) == 0) ++*out;
    return IBEX_OK;
}

// Builds the op's schedule and hands it to the executor. *empty: nothing to do.
ibex_status_t start_op(ibex_comm *c, Op &op, bool *empty) {
    CollArgs a = op.args;
    a.rank = c->rank;
    a.nranks = c->nranks;
    const size_t n = static_cast<size_t>(c->nranks);
    const size_t elem = op.kind == OpKind::probe ? 1 : ibex_datatype_size(a.type);
    size_t send_bytes = a.count * elem, recv_bytes = a.count * elem, scratch = 0;
    switch (op.kind) {
    case OpKind::reduce_scatter:
        send_bytes = n * a.count * elem;
        scratch = send_bytes;
        break;
    case OpKind::allgather: recv_bytes = n * a.count * elem; break;
    case OpKind::broadcast:
        if (a.rank != a.root) send_bytes = 0;
        break;
    case OpKind::reduce:
        scratch = a.count * elem;
        if (a.rank != a.root) recv_bytes = 0;
        break;
    case OpKind::barrier:
        a.sendbuf = c->small;
        a.recvbuf = c->small + 8;
        a.count = 1;
        a.type = IBEX_U8;
        a.op = IBEX_MAX;
        send_bytes = recv_bytes = 1;
        break;
    case OpKind::probe: scratch = probe_buffer_bytes(op.pings, op.bulk); break;
    case OpKind::allreduce: break;
    }
    const Algo algo = comm_algo(c, a.count * elem);
    *empty = false;
    if (a.count == 0) {
        *empty = true;
        return IBEX_OK;
    }
    c->cache->next_epoch();
    ibex_mr_t *mr = nullptr;
    if (send_bytes && a.sendbuf)
        IBEX_TRY(c->cache->get(a.sendbuf, send_bytes, &mr));
    if (recv_bytes && a.recvbuf)
        IBEX_TRY(c->cache->get(a.recvbuf, recv_bytes, &mr));
    if (scratch)
        IBEX_TRY(ensure_scratch(c, scratch));
    if (op.kind == OpKind::barrier)
        IBEX_TRY(c->cache->get(c->small, sizeof c->small, &mr));
    a.scratch = c->scratch;
    Schedule s;
    ScheduleBuilder b(&s, elem, c->opt.exec.slice_bytes);
    switch (op.kind) {
    case OpKind::allreduce:
        switch (algo) {
        case Algo::ring: build_ring_allreduce(a, b); break;
        case Algo::rhd: build_rhd_allreduce(a, b); break;
        case Algo::tree: build_tree_allreduce(a, b); break;
        }
        break;
    case OpKind::barrier: build_tree_allreduce(a, b); break;
    case OpKind::reduce_scatter: build_ring_reduce_scatter(a, b); break;
    case OpKind::allgather: build_ring_allgather(a, b); break;
    case OpKind::broadcast: build_chain_broadcast(a, b); break;
    case OpKind::reduce: build_chain_reduce(a, b); break;
    case OpKind::probe: build_probe(c->rank, c->nranks, op.pings, op.bulk, c->scratch, b); break;
    }
    if (s.steps.empty()) {
        *empty = true;
        return IBEX_OK;
    }
    return c->exec.start(std::move(s), op.kind == OpKind::probe ? IBEX_U8 : a.type, a.op, *c->cache);
}

// Puts the communicator in its error state (first error wins), tells the other ranks when
// the error is this rank's own, and fails the running and queued ops.
void enter_error(ibex_comm *c, ibex_status_t st, const std::string &detail, bool local, Op *running) {
    std::deque<Op> failed;
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
        failed.swap(c->queue);
    }
    if (local && c->boot) c->boot->send_abort(st, detail.c_str());
    c->exec.shut_down();
    if (running) {
        complete(running->req, st, msg);
        running->req = nullptr;
    }
    for (Op &op : failed) complete(op.req, st, msg);
    std::lock_guard l(c->mu);
    c->running_op = false;
    c->idle_cv.notify_all();
}

enum class Pass { moved, idle, stop };

// One step of the stream: takes the next op, starts it, polls the executor, finishes or
// fails it. Caller holds drive_mu. stop: aborting, or stopping with nothing left to run.
Pass drive_pass(ibex_comm *c) {
    DriveState &d = c->drive;
    {
        std::lock_guard l(c->mu);
        if (c->aborting) return Pass::stop;
        if (!d.have && !c->queue.empty()) {
            d.op = std::move(c->queue.front());
            c->queue.pop_front();
            d.have = true;
            c->running_op = true;
        }
        if (!d.have && c->stopping) return Pass::stop;
    }
    if (d.have && !c->exec.active()) {
        ibex_status_t err;
        std::string err_detail;
        {
            std::lock_guard l(c->mu);
            err = c->error;
            err_detail = c->error_detail;
        }
        bool empty = false;
        ibex_status_t st = err;
        if (st == IBEX_OK) st = start_op(c, d.op, &empty);
        if (err != IBEX_OK) {
            enter_error(c, err, err_detail, false, &d.op);
            d.have = false;
            return Pass::moved;
        }
        if (st != IBEX_OK) {
            enter_error(c, st, std::string(op_kind_name(d.op.kind)) + ": " + ibex_last_error(), true, &d.op);
            d.have = false;
            return Pass::moved;
        }
        if (empty) {
            complete(d.op.req, IBEX_OK, "");
            d.have = false;
            std::lock_guard l(c->mu);
            c->running_op = false;
            c->idle_cv.notify_all();
            return Pass::moved;
        }
        d.last_activity = d.last_move = Clock::now(); // a new op: its first replies are a latency away
    }
    bool did = false;
    if (ibex_status_t st = c->exec.progress(&did); st != IBEX_OK) {
        enter_error(c, st, ibex_last_error(), true, d.have ? &d.op : nullptr);
        d.have = false;
        return Pass::moved;
    }
    if (d.have && c->exec.finished()) {
        if (d.op.times) *d.op.times = c->exec.done_times();
        c->exec.finish();
        complete(d.op.req, IBEX_OK, "");
        d.op.req = nullptr;
        d.have = false;
        // A caller issuing one collective after another submits the next within
        // microseconds: keep polling for it rather than sleep and be woken.
        d.last_move = Clock::now();
        std::lock_guard l(c->mu);
        c->running_op = false;
        c->idle_cv.notify_all();
        return Pass::moved;
    }
    const auto now = Clock::now();
    if (did) {
        d.last_activity = now;
        d.last_move = now;
        return Pass::moved;
    }
    if (d.have && ms_since(d.last_activity) > c->opt.timeout_ms) {
        const int peer = c->exec.waiting_on();
        char buf[192];
        std::snprintf(buf, sizeof buf, "%s made no progress for %d ms (waiting on rank %d)", op_kind_name(d.op.kind),
                      c->opt.timeout_ms, peer);
        IBEX_LOG(info, "communicator rank %d: %s: %s", c->rank, buf, c->exec.stall_detail().c_str());
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
    if (Clock::now() < d.last_move + std::chrono::microseconds(spin_us)) {
        if (own_core && (++d.idle_passes & 63) != 0) {
            for (int i = 0; i < 16; ++i) __builtin_ia32_pause();
            return;
        }
        dl.unlock();
        sched_yield();
        dl.lock();
        return;
    }
    if (!c->exec.arm()) return;
    // Announce the nap before the last look at the queue: a submission either lands in that
    // look or sees the flag and writes wake_fd.
    c->driver_asleep.store(true, std::memory_order_seq_cst);
    {
        std::lock_guard l(c->mu);
        if (!c->queue.empty() || c->aborting || c->stopping) {
            c->driver_asleep.store(false, std::memory_order_relaxed);
            return;
        }
    }
    pollfd pfd[8];
    nfds_t n = 0;
    pfd[n++] = {c->exec.cq_fd(), POLLIN, 0};
    pfd[n++] = {c->wake_fd, POLLIN, 0};
    for (int fd : c->boot->fds())
        if (n < std::size(pfd)) pfd[n++] = {fd, POLLIN, 0};
    int wait_ms = 100;
    if (d.have)
        wait_ms = static_cast<int>(std::clamp<int64_t>(c->opt.timeout_ms - ms_since(d.last_activity) + 1, 1, 100));
    dl.unlock();
    const int r = ::poll(pfd, n, wait_ms);
    c->driver_asleep.store(false, std::memory_order_relaxed);
    dl.lock();
    bool boot_ready = ms_since(d.last_boot_check) >= 100;
    if (r > 0) {
        uint64_t v;
        if (pfd[0].revents & POLLIN) [[maybe_unused]] ssize_t x = ::read(pfd[0].fd, &v, sizeof v);
        if (pfd[1].revents & POLLIN) [[maybe_unused]] ssize_t x = ::read(pfd[1].fd, &v, sizeof v);
        for (nfds_t i = 2; i < n; ++i)
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

void progress_main(ibex_comm *c) {
    std::unique_lock dl(c->drive_mu);
    DriveState &d = c->drive;
    d.last_activity = d.last_move = d.last_boot_check = Clock::now();
    for (;;) {
        if (c->waiters.load(std::memory_order_acquire) > 0) {
            // A caller drives the stream: stay out of its way until it is done, and a little
            // longer, since a caller waiting on one request after another comes straight back.
            dl.unlock();
            {
                std::unique_lock l(c->mu);
                c->driver_cv.wait_for(l, std::chrono::milliseconds(1), [&] { return c->aborting || c->stopping; });
            }
            dl.lock();
            if (!c->aborting) continue;
        } else if (const int64_t since = Clock::now().time_since_epoch().count() -
                                         c->last_waiter_ns.load(std::memory_order_acquire);
                   since < int64_t(c->opt.handover_us) * 1000) {
            dl.unlock();
            {
                std::unique_lock l(c->mu);
                c->driver_cv.wait_for(l, std::chrono::nanoseconds(int64_t(c->opt.handover_us) * 1000 - since),
                                      [&] { return c->aborting || c->stopping; });
            }
            dl.lock();
            if (!c->aborting) continue;
        }
        const Pass p = drive_pass(c);
        if (p == Pass::stop) break;
        if (p == Pass::idle) drive_idle(c, dl, c->opt.spin_us, false);
    }
    // Aborting or stopping: nothing runs any more.
    if (d.have) {
        c->exec.finish();
        complete(d.op.req, IBEX_ERR_INVALID_STATE, "communicator aborted");
        d.have = false;
    }
    std::deque<Op> rest;
    {
        std::lock_guard l(c->mu);
        rest.swap(c->queue);
        c->running_op = false;
        c->idle_cv.notify_all();
    }
    for (Op &o : rest) complete(o.req, IBEX_ERR_INVALID_STATE, "communicator aborted");
}

// Collective: measures alpha and beta with a probe op, gamma locally, and agrees on the
// medians through the bootstrap.
ibex_status_t calibrate(ibex_comm *c) {
    CostModel model;
    if (c->opt.probe && c->nranks > 1) {
        std::vector<uint64_t> times;
        Op op;
        op.kind = OpKind::probe;
        op.args.count = 1;
        op.pings = kProbePings;
        op.bulk = kProbeBulk;
        op.times = &times;
        ibex_request *req = nullptr;
        IBEX_TRY(comm_submit(c, std::move(op), &req));
        IBEX_TRY(request_wait(req));
        double mine[3] = {0, 0, 0};
        probe_result(c->rank, c->nranks, kProbePings, kProbeBulk, times, &mine[0], &mine[1]);
        IBEX_TRY(ensure_scratch(c, 3 * kGammaBytes));
        mine[2] = measure_gamma(c->scratch, kGammaBytes);
        std::vector<double> all(3 * static_cast<size_t>(c->nranks));
        if (ibex_status_t st = c->boot->allgather(mine, sizeof mine, all.data(), c->opt.timeout_ms); st != IBEX_OK)
            return st;
        model = combine(all);
    }
    c->selector.configure(c->nranks, c->opt.exec.slice_bytes, model);
    IBEX_LOG(info, "communicator rank %d/%d: alpha %.2f us, beta %.3f ns/B, gamma %.3f ns/B (%s)", c->rank,
             c->nranks, model.alpha * 1e6, model.beta * 1e9, model.gamma * 1e9,
             model.measured ? "measured" : "defaults");
    return IBEX_OK;
}

// Frees everything; the progress thread must not be running.
void teardown(ibex_comm *c) {
    if (log_enabled(LogLevel::info) && c->exec.context()) {
        ibex_counters_t k{};
        k.size = sizeof k;
        if (ibex_query_counters(c->exec.context(), &k) == IBEX_OK)
            IBEX_LOG(info,
                     "communicator rank %d/%d: %llu packets out, %llu in, %llu retransmitted, %llu timeouts, "
                     "%llu RNR NAKs received",
                     c->rank, c->nranks, static_cast<unsigned long long>(k.tx_packets),
                     static_cast<unsigned long long>(k.rx_packets), static_cast<unsigned long long>(k.retransmitted_packets),
                     static_cast<unsigned long long>(k.local_ack_timeout_err),
                     static_cast<unsigned long long>(k.rnr_nak_received));
    }
    if (c->wake_fd >= 0) ::close(c->wake_fd);
    c->cache.reset();
    std::free(c->scratch);
    c->boot.reset();
    delete c;
}

void stop_thread(ibex_comm *c, bool abort) {
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

} // namespace

const char *op_kind_name(OpKind k) {
    switch (k) {
    case OpKind::allreduce: return "allreduce";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::allgather: return "allgather";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce: return "reduce";
    case OpKind::barrier: return "barrier";
    case OpKind::probe: return "probe";
    }
    return "?";
}

ibex_status_t comm_options(const ibex_comm_config_t *config, CommOptions *out) {
    ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
    if (config) {
        if (config->size < offsetof(ibex_comm_config_t, version) || config->magic != IBEX_MAGIC_COMM_CONFIG)
            return fail(IBEX_ERR_INVALID_ARGUMENT,
                        "ibex_comm_config_t: bad size/magic (initialise it with IBEX_COMM_CONFIG_INIT)");
        if (config->size > sizeof cfg)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "ibex_comm_config_t: size %u is newer than this library",
                        config->size);
        std::memcpy(&cfg, config, config->size);
    }
    const char *dev = cfg.device ? cfg.device : config::get_string("IBEX_DEVICE", nullptr);
    if (!dev) {
        ibex_device_list_t *list = nullptr;
        int count = 0;
        if (ibex_get_device_list(&list, &count) == IBEX_OK && count > 0) out->device = ibex_device_name(list, 0);
        if (list) ibex_free_device_list(list);
        if (out->device.empty()) return fail(IBEX_ERR_NO_DEVICE, "no device to open (set IBEX_DEVICE)");
    } else {
        out->device = dev;
    }
    out->timeout_ms = cfg.timeout_ms > 0 ? cfg.timeout_ms
                                         : static_cast<int>(config::get_int("IBEX_TIMEOUT_MS", 30000, 1, 86400000));
    const char *algo = cfg.algo ? cfg.algo : config::get_string("IBEX_ALGO", nullptr);
    out->forced = false;
    if (algo && std::strcmp(algo, "auto") != 0) {
        if (!parse_algo(algo, &out->algo))
            return fail(IBEX_ERR_INVALID_ARGUMENT, "algorithm \"%s\" is not one of ring, rhd, tree", algo);
        out->forced = true;
    }
    out->exec.slice_bytes =
        static_cast<size_t>(config::get_int("IBEX_COMM_SLICE", 128 << 10, 4096, 64 << 20)) & ~size_t(7);
    out->exec.slots = static_cast<int>(config::get_int("IBEX_COMM_SLOTS", 8, 1, 256));
    out->exec.window = static_cast<int>(config::get_int("IBEX_COMM_WINDOW", 16, 1, 1024));
    out->exec.eager_bytes = static_cast<size_t>(config::get_int("IBEX_COMM_EAGER", 8 << 10, 0, 1 << 20));
    out->exec.eager_slots = static_cast<int>(config::get_int("IBEX_COMM_EAGER_SLOTS", 32, 2, 1024));
    out->spin_us = static_cast<int>(config::get_int("IBEX_COMM_SPIN_US", 50, 0, 1000000));
    out->wait_spin_us = static_cast<int>(config::get_int("IBEX_COMM_WAIT_SPIN_US", -1, -1, 1000000));
    out->handover_us = static_cast<int>(config::get_int("IBEX_COMM_HANDOVER_US", 200, 0, 1000000));
    out->probe = config::get_bool("IBEX_COMM_PROBE", true);
    return IBEX_OK;
}

Algo comm_algo(const ibex_comm *c, size_t bytes) {
    return c->opt.forced ? c->opt.algo : c->selector.choose(bytes);
}

ibex_status_t comm_create(int nranks, const char *id_text, int rank, const CommOptions &opt, ibex_comm **out) {
    auto *c = new (std::nothrow) ibex_comm;
    if (!c) return fail(IBEX_ERR_NO_MEMORY, "communicator");
    c->rank = rank;
    c->nranks = nranks;
    c->opt = opt;
    auto bail = [&](ibex_status_t st) {
        // Keep the detail: the clean-up below makes ibex calls of its own.
        std::string detail = ibex_last_error();
        if (c->boot) c->boot->send_abort(st, detail.c_str());
        stop_thread(c, true);
        teardown(c);
        return fail(st, "%s", detail.c_str());
    };
    if (ibex_status_t st = bootstrap::Bootstrap::join(id_text, rank, nranks, opt.timeout_ms, &c->boot); st != IBEX_OK)
        return bail(st);
    if (c->opt.wait_spin_us < 0) {
        // A waiting caller busy-polls long (as MPI does) only when every rank of this host
        // can have a core; oversubscribed, it yields the core soon.
        int local = 0;
        if (ibex_status_t st = count_local_ranks(c, &local); st != IBEX_OK) return bail(st);
        cpu_set_t cpus;
        const int ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
        c->opt.own_core = local <= ncpu;
        c->opt.wait_spin_us = c->opt.own_core ? 1000 : c->opt.spin_us;
    }
    c->peers = needed_peers(rank, nranks);
    if (ibex_status_t st = c->exec.open(opt.device.c_str(), rank, nranks, c->peers, opt.exec); st != IBEX_OK) {
        // The device's own errors mostly name it already.
        const std::string detail = ibex_last_error();
        const std::string d = detail.rfind(opt.device, 0) == 0 ? detail : "opening " + opt.device + ": " + detail;
        fail(st, "%s", d.c_str());
        return bail(st);
    }
    c->cache = std::make_unique<RegCache>(c->exec.pd(),
                                          static_cast<size_t>(config::get_int("IBEX_COMM_REG_CACHE", 64, 4, 1 << 20)));
    // Every rank's QP address for every other rank, all at once.
    const std::vector<ibex_ep_addr_t> mine = c->exec.local_addrs();
    std::vector<uint8_t> packed(static_cast<size_t>(nranks) * IBEX_EP_ADDR_WIRE_LEN);
    for (int p = 0; p < nranks; ++p)
        ibex_ep_addr_pack(&mine[static_cast<size_t>(p)], packed.data() + static_cast<size_t>(p) * IBEX_EP_ADDR_WIRE_LEN,
                          IBEX_EP_ADDR_WIRE_LEN);
    std::vector<uint8_t> table(packed.size() * static_cast<size_t>(nranks));
    if (ibex_status_t st = c->boot->allgather(packed.data(), packed.size(), table.data(), opt.timeout_ms);
        st != IBEX_OK)
        return bail(st);
    std::vector<ibex_ep_addr_t> remote(static_cast<size_t>(nranks));
    for (int p : c->peers) {
        const uint8_t *row = table.data() + static_cast<size_t>(p) * packed.size();
        if (ibex_status_t st = ibex_ep_addr_unpack(row + static_cast<size_t>(rank) * IBEX_EP_ADDR_WIRE_LEN,
                                                   IBEX_EP_ADDR_WIRE_LEN, &remote[static_cast<size_t>(p)]);
            st != IBEX_OK)
            return bail(st);
    }
    if (ibex_status_t st = c->exec.connect(remote); st != IBEX_OK) return bail(st);
    // Nobody sends before every rank has its receives posted.
    if (ibex_status_t st = c->boot->barrier(opt.timeout_ms); st != IBEX_OK) return bail(st);
    if (ibex_status_t st = c->exec.announce(); st != IBEX_OK) return bail(st);
    c->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->wake_fd < 0) return bail(fail_errno(IBEX_ERR_SYSTEM, errno, "eventfd"));
    c->thread = std::thread(progress_main, c);
    if (ibex_status_t st = calibrate(c); st != IBEX_OK) return bail(st);
    *out = c;
    return IBEX_OK;
}

ibex_status_t comm_submit(ibex_comm *c, Op &&op, ibex_request **req) {
    auto *r = new (std::nothrow) ibex_request;
    if (!r) return fail(IBEX_ERR_NO_MEMORY, "request");
    op.req = r;
    r->comm = c;
    {
        std::lock_guard l(c->mu);
        if (c->error != IBEX_OK) {
            const ibex_status_t st = c->error;
            const std::string d = c->error_detail;
            delete r;
            return fail(st, "communicator is in an error state: %s", d.c_str());
        }
        if (c->stopping) {
            delete r;
            return fail(IBEX_ERR_INVALID_STATE, "communicator is being destroyed");
        }
        c->queue.push_back(std::move(op));
    }
    if (c->driver_asleep.load(std::memory_order_seq_cst)) wake(c);
    *req = r;
    return IBEX_OK;
}

namespace {
bool request_done(ibex_request *r) {
    std::lock_guard l(r->mu);
    return r->done;
}
} // namespace

ibex_status_t request_wait(ibex_request *r) {
    ibex_comm *c = r->comm;
    bool driving = false;
    if (c) {
        // Registered under the request's lock: the progress thread cannot complete r, exit,
        // and let the communicator be freed before it sees this caller among the waiters.
        std::lock_guard l(r->mu);
        if (!r->done) {
            c->waiters.fetch_add(1, std::memory_order_acq_rel);
            driving = true;
        }
    }
    if (driving) {
        bool stopped = false;
        while (!stopped && !request_done(r)) {
            std::unique_lock dl(c->drive_mu, std::try_to_lock);
            if (!dl.owns_lock()) {
                // Another caller drives (the thread hands over within one pass): wait on
                // our own request a little, then try again.
                std::unique_lock l(r->mu);
                r->cv.wait_for(l, std::chrono::microseconds(200), [&] { return r->done; });
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
        }
        {
            // No wake-up: the thread looks again within a millisecond (see ibex_comm).
            std::lock_guard l(c->mu);
            c->last_waiter_ns.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
            c->waiters.fetch_sub(1, std::memory_order_acq_rel);
        }
        // Last touch of c: whatever is still queued goes back to the progress thread.
    }
    ibex_status_t st;
    std::string detail;
    {
        std::unique_lock l(r->mu);
        r->cv.wait(l, [&] { return r->done; });
        st = r->status;
        detail = r->detail;
    }
    r->release();
    return st == IBEX_OK ? IBEX_OK : fail(st, "%s", detail.c_str());
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

ibex_status_t comm_split(ibex_comm *c, int color, int key, ibex_comm **out) {
    *out = nullptr;
    IBEX_TRY(comm_drain(c));
    const int n = c->nranks;
    int32_t mine[2] = {color, key};
    std::vector<int32_t> all(2 * static_cast<size_t>(n));
    if (ibex_status_t st = c->boot->allgather(mine, sizeof mine, all.data(), c->opt.timeout_ms); st != IBEX_OK)
        return st;
    // Members of this rank's colour, ordered by key, then old rank.
    std::vector<int> members;
    for (int r = 0; r < n; ++r)
        if (color >= 0 && all[2 * static_cast<size_t>(r)] == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int x, int y) {
        return all[2 * static_cast<size_t>(x) + 1] < all[2 * static_cast<size_t>(y) + 1];
    });
    // Each new group's rank 0 opens a rendezvous on the address its peers already reach.
    ibex_unique_id_t id{};
    const bool leads = !members.empty() && members[0] == c->rank;
    if (leads) {
        const std::string host = c->boot->local_ip();
        IBEX_TRY(bootstrap::create_unique_id(host.c_str(), 0, &id));
    }
    std::vector<ibex_unique_id_t> ids(static_cast<size_t>(n));
    if (ibex_status_t st = c->boot->allgather(&id, sizeof id, ids.data(), c->opt.timeout_ms); st != IBEX_OK) {
        if (leads) bootstrap::release_unique_id(&id);
        return st;
    }
    if (members.empty()) return IBEX_OK;
    const int new_rank =
        static_cast<int>(std::find(members.begin(), members.end(), c->rank) - members.begin());
    ids[static_cast<size_t>(members[0])].text[IBEX_UNIQUE_ID_BYTES - 1] = '\0';
    return comm_create(static_cast<int>(members.size()), ids[static_cast<size_t>(members[0])].text, new_rank, c->opt,
                       out);
}

ibex_status_t comm_destroy(ibex_comm *c, bool abort) {
    ibex_status_t result = IBEX_OK;
    if (abort) {
        bool healthy;
        {
            std::lock_guard l(c->mu);
            healthy = c->error == IBEX_OK;
        }
        if (healthy && c->boot) c->boot->send_abort(IBEX_ERR_REMOTE, "communicator aborted");
        stop_thread(c, true);
    } else {
        std::unique_lock l(c->mu);
        c->idle_cv.wait(l, [&] { return c->queue.empty() && !c->running_op; });
        const bool healthy = c->error == IBEX_OK;
        l.unlock();
        stop_thread(c, false);
        // Nobody tears down QPs a slower peer still needs.
        if (healthy && c->boot) c->boot->goodbye(c->opt.timeout_ms);
    }
    teardown(c);
    return result;
}

} // namespace ibex::coll

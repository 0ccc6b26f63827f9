#include "allreduce/comm.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sched.h>
#include <set>
#include <sys/eventfd.h>
#include <unistd.h>

#include "allreduce/calibration.h"
#include "allreduce/comm_rail.h"
#include "allreduce/stream_pass.h"
#include "runtime/bootstrap/unique_id.h"
#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

std::vector<int> needed_peers(int rank, int n, const HostLayout &layout, const std::vector<int> &bigraph, bool gdraa) {
    std::set<int> s;
    if (gdraa)
        for (int p : gdraa_peers(rank, n)) s.insert(p);
    for (int p : ring_peers(rank, n)) s.insert(p);
    for (int p : bigraph.empty() ? rhd_peers(rank, n) : bigraph_peers(rank, bigraph)) s.insert(p);
    for (int p : tree_peers(rank, n)) s.insert(p);
    for (int p : hierarchical_peers(rank, layout)) s.insert(p);
    for (bool between : {false, true}) s.insert(probe_partner(layout, rank, between));
    s.erase(rank);
    s.erase(-1);
    return {s.begin(), s.end()};
}

// Whether every rank of this host can have a core: the ranks sharing this rank's host (by
// bootstrap address) against the CPUs their affinity masks cover together. Ranks pinned
// one to a core each (as mpirun binds them) have a core each, though each mask holds one.
ibex_status_t ranks_fit_cores(ibex_comm *c, bool *out) {
    struct Announce {
        char ip[64];
        cpu_set_t cpus;
    };
    Announce mine{};
    const std::string ip = c->boot->local_ip();
    std::snprintf(mine.ip, sizeof mine.ip, "%s", ip.c_str());
    if (sched_getaffinity(0, sizeof mine.cpus, &mine.cpus) != 0) CPU_SET(0, &mine.cpus);
    std::vector<Announce> all(static_cast<size_t>(c->nranks));
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, all.data(), c->opt.timeout_ms));
    int local = 0;
    cpu_set_t cover;
    CPU_ZERO(&cover);
    for (const Announce &a : all) {
        if (std::strncmp(a.ip, mine.ip, sizeof mine.ip) != 0) continue;
        ++local;
        CPU_OR(&cover, &cover, &a.cpus);
    }
    *out = local <= CPU_COUNT(&cover);
    return IBEX_OK;
}

// The longest efficient message (ibex_device_attr_t) of the devices this rank's peers are
// reached through; 0 where none says (a provider without the query).
uint64_t peers_efficient_message(const ibex_comm *c) {
    bool used[Executor::kMaxLinks] = {};
    for (int p : c->peers)
        if (const int link = c->exec.link_of(p); link >= 0) used[link] = true;
    uint64_t out = 0;
    for (int link = 0; link < c->exec.links(); ++link) {
        ibex_device_attr_t a{};
        a.size = sizeof a;
        if (used[link] && ibex_query_device(c->exec.context(link), &a) == IBEX_OK)
            out = std::max(out, a.efficient_msg_bytes);
    }
    return out;
}

// The slice every rank uses: its own (IBEX_COMM_SLICE, else what the devices that carry its
// peers' traffic want), then the largest of all ranks', since the ranks' schedules must cut
// transfers alike. A rank told another slice says so. Then the staging slots that slice
// needs, unless IBEX_COMM_SLOTS says. Runs once the links are open, before any staging.
ibex_status_t agree_on_slice(ibex_comm *c) {
    size_t &slice = c->opt.exec.slice_bytes;
    if (!c->opt.slice_given) slice = comm_slice_bytes(peers_efficient_message(c));
    const uint64_t mine = slice;
    std::vector<uint64_t> all(static_cast<size_t>(c->nranks));
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, all.data(), c->opt.timeout_ms));
    slice = static_cast<size_t>(*std::max_element(all.begin(), all.end()));
    if (slice != mine && c->opt.slice_given)
        IBEX_LOG(warn, "rank %d: IBEX_COMM_SLICE=%llu, another rank's is %zu: using %zu on every rank", c->rank,
                 static_cast<unsigned long long>(mine), slice, slice);
    // Slots are this rank's own affair (a sender only follows the credits it is given).
    if (!c->opt.slots_given) c->opt.exec.slots = comm_staging_slots(slice);
    return c->exec.set_slicing(slice, c->opt.exec.slots);
}

uint64_t fnv1a(const std::string &s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
    return h;
}

// Every rank's QP choice (ibex_comm_config_t.qp_attr) must be rank 0's: the two ends of a
// QP with different path MTUs drop each other's packets, and timeouts or classes that differ
// by rank are a fault nothing would name. Compared value by value (the attributes not
// chosen count as zero); where a rank differs, every rank fails with the same detail.
ibex_status_t agree_on_qp_choice(ibex_comm *c) {
    struct Packed {
        uint32_t mask, access;
        uint8_t mtu, timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic, traffic_class, sl;
        bool operator==(const Packed &) const = default;
    };
    const auto pack = [](const QpChoice &q) {
        const auto v = [&](unsigned bit, unsigned value) { return (q.mask & bit) ? value : 0u; };
        const ibex_qp_attr_t &a = q.attr;
        return Packed{q.mask,
                      v(IBEX_QP_ACCESS_FLAGS, a.qp_access_flags),
                      static_cast<uint8_t>(v(IBEX_QP_PATH_MTU, a.path_mtu)),
                      static_cast<uint8_t>(v(IBEX_QP_TIMEOUT, a.timeout)),
                      static_cast<uint8_t>(v(IBEX_QP_RETRY_CNT, a.retry_cnt)),
                      static_cast<uint8_t>(v(IBEX_QP_RNR_RETRY, a.rnr_retry)),
                      static_cast<uint8_t>(v(IBEX_QP_MIN_RNR_TIMER, a.min_rnr_timer)),
                      static_cast<uint8_t>(v(IBEX_QP_MAX_RD_ATOMIC, a.max_rd_atomic)),
                      static_cast<uint8_t>(v(IBEX_QP_TRAFFIC_CLASS, a.traffic_class)),
                      static_cast<uint8_t>(v(IBEX_QP_SL, a.sl))};
    };
    const auto unpack = [](const Packed &p) {
        QpChoice q;
        q.mask = p.mask;
        q.attr.qp_access_flags = p.access;
        q.attr.path_mtu = static_cast<ibex_mtu_t>(p.mtu);
        q.attr.timeout = p.timeout;
        q.attr.retry_cnt = p.retry_cnt;
        q.attr.rnr_retry = p.rnr_retry;
        q.attr.min_rnr_timer = p.min_rnr_timer;
        q.attr.max_rd_atomic = p.max_rd_atomic;
        q.attr.traffic_class = p.traffic_class;
        q.attr.sl = p.sl;
        return q;
    };
    const Packed mine = pack(c->opt.qp);
    std::vector<Packed> all(static_cast<size_t>(c->nranks));
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, all.data(), c->opt.timeout_ms));
    char root_text[160], other_text[160];
    for (int r = 1; r < c->nranks; ++r) {
        if (all[static_cast<size_t>(r)] == all[0]) continue;
        return fail(IBEX_ERR_INVALID_ARGUMENT,
                    "ibex_comm_config_t.qp_attr differs between ranks: rank 0 connects its QPs with %s, rank %d "
                    "with %s (every rank must give the same)",
                    qp_choice_text(unpack(all[0]), root_text, sizeof root_text), r,
                    qp_choice_text(unpack(all[static_cast<size_t>(r)]), other_text, sizeof other_text));
    }
    if (c->rank == 0 && c->opt.qp.mask)
        IBEX_LOG(info, "communicator of %d ranks: QPs connected with %s", c->nranks,
                 qp_choice_text(c->opt.qp, root_text, sizeof root_text));
    return IBEX_OK;
}

// The summation servers: rank 0's IBEX_SUMSRV (and slot geometry) for every rank, found
// through the bootstrap, so the other ranks need not be given it (a rank given another
// list fails); then each rank connects them. The job key is rank 0's random number, so two
// communicators never share a job; the device is IBEX_SUMSRV_DEVICE, else the
// communicator's, else (shm reaches no other process) the first device listed that is not shm.
ibex_status_t open_sumsrv(ibex_comm *c) {
    SumsrvSettings s = c->opt.sumsrv;
    std::string list;
    for (const std::string &a : s.servers) list += (list.empty() ? "" : ",") + a;
    struct Announce {
        uint64_t nonce, list_hash;
        uint32_t list_bytes, chunk_bytes, slots, reserved;
    };
    Announce mine{0, fnv1a(list), static_cast<uint32_t>(list.size()), s.chunk_bytes, s.slots, 0};
    if (c->rank == 0) mine.nonce = (uint64_t(std::random_device{}()) << 32 | std::random_device{}()) ^ uint64_t(::getpid());
    std::vector<Announce> all(static_cast<size_t>(c->nranks));
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, all.data(), c->opt.timeout_ms));
    const Announce &root = all[0];
    if (root.list_bytes == 0) {
        if (!list.empty())
            IBEX_LOG(warn, "communicator rank %d: IBEX_SUMSRV is set here but not on rank 0; no summation servers", c->rank);
        return IBEX_OK;
    }
    const bool agreed = std::all_of(all.begin(), all.end(), [&](const Announce &a) { return a.list_hash == root.list_hash; });
    if (!agreed) {
        // Rank 0's list for everyone; a rank given another one says so.
        std::vector<char> text(static_cast<size_t>(root.list_bytes) * static_cast<size_t>(c->nranks));
        std::string pad = c->rank == 0 ? list : std::string(root.list_bytes, '\0');
        IBEX_TRY(c->boot->allgather(pad.data(), root.list_bytes, text.data(), c->opt.timeout_ms));
        const std::string root_list(text.data(), root.list_bytes);
        if (!list.empty() && list != root_list)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "IBEX_SUMSRV differs between ranks: \"%s\" here, \"%s\" on rank 0",
                        list.c_str(), root_list.c_str());
        IBEX_TRY(parse_sumsrv_list(root_list.c_str(), &s.servers));
    }
    s.chunk_bytes = root.chunk_bytes;
    s.slots = root.slots;
    char job[40];
    std::snprintf(job, sizeof job, "%016llx-%d", static_cast<unsigned long long>(root.nonce), c->nranks);
    if (s.device.empty()) s.device = c->opt.device;
    if (s.device == kShmDevice) {
        s.device = first_listed_device([](const std::string &d) { return d != kShmDevice; });
        if (s.device.empty())
            return fail(IBEX_ERR_NO_DEVICE, "IBEX_SUMSRV: no device besides shm reaches the servers (set IBEX_SUMSRV_DEVICE)");
    }
    IBEX_TRY(c->sumsrv.open(s, job, c->rank, c->nranks));
    // Servers on a worker's machine share its cores and link: every rank must know, so the
    // cost model makes the same choice everywhere.
    const int32_t here = c->sumsrv.servers_on_this_machine();
    std::vector<int32_t> everyone(static_cast<size_t>(c->nranks));
    IBEX_TRY(c->boot->allgather(&here, sizeof here, everyone.data(), c->opt.timeout_ms));
    c->sumsrv.set_some_on_a_workers_machine(std::any_of(everyone.begin(), everyone.end(), [](int32_t h) { return h > 0; }));
    if (c->rank == 0)
        IBEX_LOG(info, "communicator of %d ranks: %zu summation servers over %s, %u slots of %u bytes", c->nranks,
                 s.servers.size(), s.device.c_str(), s.slots, s.chunk_bytes);
    return IBEX_OK;
}

// Frees everything; the progress thread must not be running.
void teardown(ibex_comm *c) {
    for (int link = 0; log_enabled(LogLevel::info) && link < c->exec.links(); ++link) {
        ibex_counters_t k{};
        k.size = sizeof k;
        if (ibex_query_counters(c->exec.context(link), &k) == IBEX_OK)
            IBEX_LOG(info,
                     "communicator rank %d/%d, %s: %llu packets out, %llu in, %llu retransmitted, %llu timeouts, "
                     "%llu sequence NAKs sent, %llu out of sequence, %llu ICRC errors, %llu malformed, "
                     "%llu RNR NAKs received",
                     c->rank, c->nranks, ibex_context_device_name(c->exec.context(link)),
                     static_cast<unsigned long long>(k.tx_packets),
                     static_cast<unsigned long long>(k.rx_packets), static_cast<unsigned long long>(k.retransmitted_packets),
                     static_cast<unsigned long long>(k.local_ack_timeout_err),
                     static_cast<unsigned long long>(k.seq_naks_sent), static_cast<unsigned long long>(k.out_of_sequence),
                     static_cast<unsigned long long>(k.rx_icrc_errors),
                     static_cast<unsigned long long>(k.rx_dropped_malformed),
                     static_cast<unsigned long long>(k.rnr_nak_received));
    }
    if (c->wake_fd >= 0) ::close(c->wake_fd);
    c->sumsrv.close();
    c->gpu.release(c);
    c->gpu_direct.close();
    c->caches.clear();
    c->memory.clear(); // what the user did not free
    std::free(c->scratch);
    c->boot.reset();
    delete c;
}

} // namespace

void comm_release_scratch(ibex_comm *c) {
    if (!c->scratch) return;
    c->caches.remove(c->scratch);
    std::free(c->scratch);
    c->scratch = nullptr;
    c->scratch_bytes = 0;
}

ibex_status_t comm_ensure_scratch(ibex_comm *c, size_t bytes) {
    if (bytes <= c->scratch_bytes) return IBEX_OK;
    comm_release_scratch(c);
    const size_t want = std::max<size_t>((bytes + 4095) & ~size_t(4095), 64 << 10);
    c->scratch = std::aligned_alloc(4096, want);
    if (!c->scratch) return fail(IBEX_ERR_NO_MEMORY, "communicator scratch of %zu bytes", want);
    c->scratch_bytes = want;
    return c->caches.add(c->scratch, want);
}

Algo comm_algo(const ibex_comm *c, size_t bytes) {
    // Forced without servers, sumsrv is plain allreduce (BytePS's split with k = 0).
    if (c->opt.forced && c->opt.algo == Algo::sumsrv && c->sumsrv.servers() == 0) return c->selector.choose(bytes);
    if (c->opt.forced && c->opt.algo == Algo::gdraa && !c->selector.gdraa_fits_bytes(bytes)) return Algo::ring;
    if (c->opt.forced && (c->opt.algo != Algo::hierarchical || c->topo.irregular.empty())) return c->opt.algo;
    return c->selector.choose(bytes);
}

bool comm_hierarchical(const ibex_comm *c, OpKind kind, size_t bytes) {
    if (!c->topo.irregular.empty()) return false;
    if (c->opt.forced) return c->opt.algo == Algo::hierarchical;
    const Selector &s = c->selector;
    return kind == OpKind::reduce_scatter ? s.cost_reduce_scatter(true, bytes) < s.cost_reduce_scatter(false, bytes)
                                          : s.cost_allgather(true, bytes) < s.cost_allgather(false, bytes);
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
        stop_progress_thread(c, true);
        teardown(c);
        return fail(st, "%s", detail.c_str());
    };
    if (ibex_status_t st = bootstrap::Bootstrap::join(id_text, rank, nranks, opt.timeout_ms, &c->boot); st != IBEX_OK)
        return bail(st);
    const bool wait_spin_auto = c->opt.wait_spin_us < 0;
    if (wait_spin_auto)
        if (ibex_status_t st = ranks_fit_cores(c, &c->opt.own_core); st != IBEX_OK) return bail(st);
    if (ibex_status_t st = learn_topology(c, &c->topo); st != IBEX_OK) return bail(st);
    if (wait_spin_auto) {
        // A waiting caller busy-polls long (as MPI does) only when every rank of this host
        // can have a core. Long means beyond a scheduler tick or two (4 ms at HZ 250): a
        // peer preempted for a tick must not turn the round into a sleep and a wake-up.
        // Oversubscribed, it yields the core between looks, and soon sleeps on one host.
        // Across hosts it keeps yielding for 2 ms as an oversubscribed MPI does: there a
        // completion wakes it only through the transport's progress thread, its own wake-up
        // and the lock they share, each waiting for a core (2 hosts x 2 ranks on 2 cores:
        // 5 ms per 8-byte allreduce sleeping after 50 us, 0.2 ms yielding for 2 ms).
        const bool spans_hosts = c->topo.layout.hosts() > 1;
        c->opt.wait_spin_us = c->opt.own_core ? 10000 : spans_hosts ? std::max(c->opt.spin_us, 2000) : c->opt.spin_us;
    }
    if (ibex_status_t st = choose_device_for_hosts(c); st != IBEX_OK) return bail(st);
    if (is_rail_device(c->opt.device)) {
        const HostLayout &l = c->topo.layout;
        const int local_size = static_cast<int>(l.members[static_cast<size_t>(l.host_of[static_cast<size_t>(rank)])].size());
        const std::string spec = c->opt.device;
        if (ibex_status_t st = rail_device(spec, l.local_rank(rank), local_size, &c->opt.device); st != IBEX_OK)
            return bail(st);
    }
    if (c->opt.bigraph_per_switch || c->opt.bigraph_required) {
        std::string why = "IBEX_BIGRAPH_HOSTS_PER_SWITCH is not set";
        const BiGraphLayout l = bigraph_alternating(nranks, c->opt.bigraph_per_switch);
        if (c->opt.bigraph_per_switch && l.layer.empty())
            why = std::to_string(nranks) + " ranks do not fill whole switches of " + std::to_string(c->opt.bigraph_per_switch);
        if (!l.layer.empty() && bigraph_applies(l, &why)) c->bigraph_order = bigraph_order(l);
        if (c->bigraph_order.empty()) {
            if (c->opt.bigraph_required) return bail(fail(IBEX_ERR_INVALID_ARGUMENT, "IBEX_ALGO=bigraph: %s", why.c_str()));
            if (rank == 0) IBEX_LOG(warn, "IBEX_BIGRAPH_HOSTS_PER_SWITCH=%d: %s; rhd keeps the ranks' order",
                                    c->opt.bigraph_per_switch, why.c_str());
        }
    }
    c->peers = needed_peers(rank, nranks, c->topo.layout, c->bigraph_order, c->opt.exec.zone_bytes > 0);
    if (Fastbox::wanted(c)) { // the fast boxes talk to every rank
        c->peers.clear();
        for (int p = 0; p < nranks; ++p)
            if (p != rank) c->peers.push_back(p);
    }
    if (ibex_status_t st = c->exec.open(c->opt.device.c_str(), c->topo.shm ? "shm" : nullptr, rank, nranks, c->peers,
                                        c->topo.local, c->opt.exec);
        st != IBEX_OK) {
        // The device's own errors mostly name it already.
        const std::string detail = ibex_last_error();
        const std::string &dev = c->opt.device;
        const std::string d = detail.rfind(dev, 0) == 0 ? detail : "opening " + dev + ": " + detail;
        fail(st, "%s", d.c_str());
        return bail(st);
    }
    if (ibex_status_t st = agree_on_slice(c); st != IBEX_OK) return bail(st);
    if (ibex_status_t st = agree_on_qp_choice(c); st != IBEX_OK) return bail(st);
    for (int link = 0; link < c->exec.links(); ++link)
        c->caches.add_domain(c->exec.pd(link),
                             static_cast<size_t>(config::get_int("IBEX_COMM_REG_CACHE", 64, 4, 1 << 20)));
    std::vector<ibex_ep_addr_t> remote;
    if (ibex_status_t st = comm_exchange_addresses(c, c->peers, &remote); st != IBEX_OK) return bail(st);
    if (ibex_status_t st = c->exec.connect(remote, c->opt.qp); st != IBEX_OK) return bail(st);
    if (ibex_status_t st = c->fast.open(c); st != IBEX_OK) return bail(st);
    if (ibex_status_t st = c->mail.open(c); st != IBEX_OK) return bail(st);
    if (ibex_status_t st = c->direct.open(c); st != IBEX_OK) return bail(st);
    if (ibex_status_t st = c->gpu_direct.open(c); st != IBEX_OK) return bail(st);
    // Nobody sends before every rank has its receives posted.
    if (ibex_status_t st = c->boot->barrier(opt.timeout_ms); st != IBEX_OK) return bail(st);
    if (ibex_status_t st = c->exec.announce(); st != IBEX_OK) return bail(st);
    if (ibex_status_t st = open_sumsrv(c); st != IBEX_OK) return bail(st);
    c->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->wake_fd < 0) return bail(fail_errno(IBEX_ERR_SYSTEM, errno, "eventfd"));
    c->thread = std::thread(progress_main, c);
    if (ibex_status_t st = calibrate(c); st != IBEX_OK) return bail(st);
    c->selector.set_sumsrv_servers(c->sumsrv.servers(), c->sumsrv.some_on_a_workers_machine());
    c->last_schedule.forget(); // built while the cost model was still being measured
    *out = c;
    return IBEX_OK;
}

ibex_status_t comm_split(ibex_comm *c, int color, int key, ibex_comm **out) {
    *out = nullptr;
    IBEX_TRY(comm_drain(c));
    const int n = c->nranks;
    int32_t mine[2] = {color, key};
    std::vector<int32_t> all(2 * static_cast<size_t>(n));
    IBEX_TRY(c->boot->allgather(mine, sizeof mine, all.data(), c->opt.timeout_ms));
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
        stop_progress_thread(c, true);
    } else {
        std::unique_lock l(c->mu);
        c->idle_cv.wait(l, [&] { return c->queue.empty() && !c->running_op; });
        const bool healthy = c->error == IBEX_OK;
        l.unlock();
        stop_progress_thread(c, false);
        // Nobody tears down QPs a slower peer still needs.
        if (healthy && c->boot) c->boot->goodbye(c->opt.timeout_ms);
    }
    teardown(c);
    return result;
}

} // namespace ibex::coll

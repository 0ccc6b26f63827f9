// The collectives C API (ibex/coll.h): argument checks, then the communicator's stream.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "allreduce/comm.h"
#include "allreduce/op_start.h"
#include "runtime/bootstrap/launcher_env.h"
#include "runtime/bootstrap/unique_id.h"
#include "runtime/base/c_enum.h"
#include "runtime/base/status.h"

using ibex::fail;
using namespace ibex::coll;

namespace {

#define IBEX_COLL_CHECK(cond, ...)                                                                        \
    do {                                                                                                  \
        if (!(cond)) return fail(IBEX_ERR_INVALID_ARGUMENT, __VA_ARGS__);                                 \
    } while (0)

// The checks every collective shares (op == nullptr: the collective has none).
ibex_status_t check_call(const char *fn, const ibex_comm_t *comm, ibex_datatype_t type, const ibex_redop_t *op,
                         bool buffers_ok) {
    IBEX_COLL_CHECK(comm, "%s: comm is NULL", fn);
    IBEX_COLL_CHECK(ibex::c_enum_below(type, IBEX_DATATYPE_COUNT),
                    "%s: unknown datatype %d", fn, ibex::c_enum_value(type));
    IBEX_COLL_CHECK(!op || ibex::c_enum_below(*op, IBEX_REDOP_COUNT),
                    "%s: unknown reduction op %d", fn, op ? ibex::c_enum_value(*op) : 0);
    IBEX_COLL_CHECK(buffers_ok, "%s: NULL buffer", fn);
    return IBEX_OK;
}

Op make_op(OpKind kind, const void *sendbuf, void *recvbuf, size_t count, ibex_datatype_t type, ibex_redop_t op,
           int root) {
    Op o;
    o.kind = kind;
    o.args.sendbuf = sendbuf;
    o.args.recvbuf = recvbuf;
    o.args.count = count;
    o.args.type = type;
    o.args.op = op;
    o.args.root = root;
    return o;
}

// Byte ranges [first, second) of the blocks a call reads and writes.
using Range = std::pair<uintptr_t, uintptr_t>;
enum class Overlap { none, two_receives, receive_and_send };
// Whether a receive range overlaps another, or a send range (sends may overlap each other:
// they are only read). Sorts both.
Overlap overlap(std::vector<Range> &sends, std::vector<Range> &recvs) {
    std::sort(recvs.begin(), recvs.end());
    std::sort(sends.begin(), sends.end());
    for (size_t i = 1; i < recvs.size(); ++i)
        if (recvs[i].first < recvs[i - 1].second) return Overlap::two_receives;
    for (size_t i = 0, j = 0; i < sends.size() && j < recvs.size();) {
        if (sends[i].second > recvs[j].first && recvs[j].second > sends[i].first) return Overlap::receive_and_send;
        (sends[i].second <= recvs[j].second ? i : j)++;
    }
    return Overlap::none;
}

// Queues the op; with req == NULL waits for it.
ibex_status_t run(ibex_comm *comm, Op &&op, ibex_request **req) {
    if (req) *req = nullptr;
    op.on_gpu = GpuStaging::needs(op, comm->rank, comm->nranks);
    if (ibex_status_t st; !req && run_inline(comm, op, &st)) return st;
    if (req && op_path(comm, op) == OpPath::boxes) return submit_small(comm, std::move(op), req);
    ibex_request *r = nullptr;
    IBEX_TRY(comm_submit(comm, std::move(op), &r, !req));
    if (req) {
        *req = r;
        return IBEX_OK;
    }
    return request_wait(r);
}

// One send or receive of a call checked alone; the detail (formatted only on a refusal)
// names the call, and in a batch the op's index.
ibex_status_t check_p2p_op(const ibex_p2p_op_t &o, int nranks, const char *fn, bool batch, size_t i) {
    const auto refuse = [&](ibex_status_t st, const char *why) {
        return batch ? fail(st, "%s: op %zu: %s", fn, i, why) : fail(st, "%s: %s", fn, why);
    };
    char why[160];
    if (!ibex::c_enum_in(o.kind, IBEX_P2P_SEND, IBEX_P2P_RECV)) {
        std::snprintf(why, sizeof why, "unknown kind %d", ibex::c_enum_value(o.kind));
        return refuse(IBEX_ERR_INVALID_ARGUMENT, why);
    }
    if (!ibex::c_enum_below(o.type, IBEX_DATATYPE_COUNT)) {
        std::snprintf(why, sizeof why, "unknown datatype %d", ibex::c_enum_value(o.type));
        return refuse(IBEX_ERR_INVALID_ARGUMENT, why);
    }
    if (o.peer < 0 || o.peer >= nranks) {
        std::snprintf(why, sizeof why, "peer %d not in 0..%d", o.peer, nranks - 1);
        return refuse(IBEX_ERR_INVALID_ARGUMENT, why);
    }
    if (o.count == 0) return IBEX_OK;
    if (!o.buf) {
        std::snprintf(why, sizeof why, "NULL buffer for %zu elements", o.count);
        return refuse(IBEX_ERR_INVALID_ARGUMENT, why);
    }
    constexpr size_t kMaxBytes = size_t(1) << 56;
    if (o.count >= kMaxBytes / ibex_datatype_size(o.type)) {
        std::snprintf(why, sizeof why, "%zu elements of %s are out of range", o.count, ibex_datatype_name(o.type));
        return refuse(IBEX_ERR_INVALID_ARGUMENT, why);
    }
    return IBEX_OK;
}

// Sends and receives (fn: the caller's name; batch: ops are numbered in its errors). The
// pairs no collective connected are connected first, in ascending order of the peer (a
// pair's two ranks then never wait on each other in opposite orders).
ibex_status_t run_p2p(ibex_comm *comm, std::span<const ibex_p2p_op_t> ops, ibex_request **req, const char *fn,
                      bool batch) {
    if (req) *req = nullptr;
    Op op = make_op(OpKind::p2p, nullptr, nullptr, 0, IBEX_U8, IBEX_SUM, 0);
    // The checks' scratch, kept by the thread: a pipeline's sends and receives come one
    // small call after another, and five allocations were a tenth of an 8-byte exchange.
    thread_local std::vector<Range> sends, recvs;
    thread_local std::vector<size_t> to_self, from_self; // bytes, in the batch's order
    thread_local std::vector<int> peers;
    sends.clear();
    recvs.clear();
    to_self.clear();
    from_self.clear();
    peers.clear();
    op.pieces.reserve(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
        const ibex_p2p_op_t &o = ops[i];
        IBEX_TRY(check_p2p_op(o, comm->nranks, fn, batch, i));
        if (o.count == 0) continue;
        const size_t elem = ibex_datatype_size(o.type);
        const bool send = o.kind == IBEX_P2P_SEND;
        const size_t bytes = o.count * elem;
        const auto at = reinterpret_cast<uintptr_t>(o.buf);
        (send ? sends : recvs).push_back({at, at + bytes});
        if (o.peer == comm->rank) (send ? to_self : from_self).push_back(bytes);
        op.pieces.push_back({send, o.peer, o.buf, bytes});
        op.args.count += bytes;
        if (o.peer != comm->rank) peers.push_back(o.peer);
    }
    IBEX_COLL_CHECK(to_self == from_self,
                    "%s: this rank's %zu sends to itself do not pair, length for length and in order, with its %zu "
                    "receives from itself%s",
                    fn, to_self.size(), from_self.size(),
                    batch ? "" : " (a send to itself needs its receive in the same ibex_p2p_batch)");
    const Overlap o = overlap(sends, recvs);
    IBEX_COLL_CHECK(o != Overlap::two_receives, "%s: two receive buffers overlap", fn);
    IBEX_COLL_CHECK(o != Overlap::receive_and_send, "%s: a receive buffer overlaps a send buffer", fn);
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
    for (int p : peers) IBEX_TRY(comm_connect_pair(comm, p));
    return run(comm, std::move(op), req);
}

} // namespace

extern "C" {

ibex_status_t ibex_comm_init_rank(ibex_comm_t **comm, int nranks, const ibex_unique_id_t *id, int rank,
                                  const ibex_comm_config_t *config) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm, "ibex_comm_init_rank: comm is NULL");
    *comm = nullptr;
    IBEX_COLL_CHECK(id, "ibex_comm_init_rank: id is NULL");
    IBEX_COLL_CHECK(nranks >= 1, "ibex_comm_init_rank: nranks %d < 1", nranks);
    IBEX_COLL_CHECK(rank >= 0 && rank < nranks, "ibex_comm_init_rank: rank %d not in 0..%d", rank, nranks - 1);
    IBEX_COLL_CHECK(memchr(id->text, '\0', sizeof id->text), "ibex_comm_init_rank: id is not NUL-terminated");
    CommOptions opt;
    IBEX_TRY(comm_options(config, &opt));
    return comm_create(nranks, id->text, rank, opt, comm);
}

ibex_status_t ibex_comm_init_from_env(ibex_comm_t **comm, const ibex_comm_config_t *config) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm, "ibex_comm_init_from_env: comm is NULL");
    *comm = nullptr;
    ibex::bootstrap::LaunchInfo info;
    IBEX_TRY(ibex::bootstrap::launch_info_from_env(&info));
    ibex_unique_id_t id{};
    IBEX_TRY(ibex::bootstrap::id_from_root_addr(info.root_addr.c_str(), &id));
    CommOptions opt;
    IBEX_TRY(comm_options(config, &opt));
    return comm_create(info.nranks, id.text, info.rank, opt, comm);
}

ibex_status_t ibex_comm_split(ibex_comm_t *comm, int color, int key, ibex_comm_t **newcomm) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm && newcomm, "ibex_comm_split: comm or newcomm is NULL");
    return comm_split(comm, color, key, newcomm);
}

ibex_status_t ibex_comm_destroy(ibex_comm_t *comm) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm, "ibex_comm_destroy: comm is NULL");
    return comm_destroy(comm, false);
}

ibex_status_t ibex_comm_abort(ibex_comm_t *comm) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm, "ibex_comm_abort: comm is NULL");
    return comm_destroy(comm, true);
}

ibex_status_t ibex_comm_rank(const ibex_comm_t *comm, int *rank) {
    IBEX_COLL_CHECK(comm && rank, "ibex_comm_rank: NULL argument");
    *rank = comm->rank;
    return IBEX_OK;
}

ibex_status_t ibex_comm_size(const ibex_comm_t *comm, int *nranks) {
    IBEX_COLL_CHECK(comm && nranks, "ibex_comm_size: NULL argument");
    *nranks = comm->nranks;
    return IBEX_OK;
}

ibex_status_t ibex_comm_get_async_error(ibex_comm_t *comm, ibex_status_t *error) {
    IBEX_COLL_CHECK(comm && error, "ibex_comm_get_async_error: NULL argument");
    std::lock_guard l(comm->mu);
    *error = comm->error;
    if (comm->error != IBEX_OK) fail(comm->error, "%s", comm->error_detail.c_str());
    return IBEX_OK;
}

const char *ibex_comm_allreduce_algo(const ibex_comm_t *comm, size_t bytes) {
    if (!comm) return "";
    if (bytes && bytes <= comm->fast.max_bytes()) return "fastbox";
    if (comm->direct.takes_allreduce(bytes)) return "direct";
    const Algo a = comm_algo(comm, bytes);
    return a == Algo::rhd && !comm->bigraph_order.empty() ? "bigraph" : algo_name(a);
}

double ibex_comm_allreduce_predict_us(const ibex_comm_t *comm, size_t bytes) {
    if (!comm) return -1;
    return comm->selector.cost(comm_algo(comm, bytes), bytes) * 1e6;
}

namespace {

ibex_status_t describe_topology(const ibex_comm_t *comm, ibex_comm_topology_t *t) {
    const HostLayout &l = comm->topo.layout;
    t->hosts = l.hosts();
    t->ranks_per_host = l.ranks_per_host();
    t->local_ranks = static_cast<int32_t>(l.members[static_cast<size_t>(l.host_of[static_cast<size_t>(comm->rank)])].size());
    for (int p : comm->peers) {
        const char *dev = ibex_comm_peer_device(comm, p);
        ++(dev && std::strcmp(dev, "shm") == 0 ? t->shm_peers : t->net_peers);
    }
    for (int link = 0; link < comm->exec.links(); ++link) {
        ibex_counters_t k{};
        k.size = sizeof k;
        IBEX_TRY(ibex_query_counters(comm->exec.context(link), &k));
        const bool shm = std::strcmp(ibex_context_device_name(comm->exec.context(link)), "shm") == 0;
        (shm ? t->shm_tx_bytes : t->net_tx_bytes) += k.tx_bytes;
    }
    const CostModel &m = comm->selector.model();
    t->alpha_us = m.alpha * 1e6;
    t->beta_ns_per_byte = m.beta * 1e9;
    t->local_alpha_us = m.a_local() * 1e6;
    t->local_beta_ns_per_byte = m.b_local() * 1e9;
    t->gamma_ns_per_byte = m.gamma * 1e9;
    t->small_bytes = m.small_bytes;
    t->big_bytes = m.big_bytes;
    t->big_beta_ns_per_byte = m.beta_big * 1e9;
    t->big_local_beta_ns_per_byte = m.beta_local_big * 1e9;
    t->big_gamma_ns_per_byte = m.gamma_big * 1e9;
    t->hier_join_us = m.hier_join * 1e6;
    t->rhd_join_us = m.rhd_join * 1e6;
    t->hier_scale = m.hier_scale;
    t->rhd_scale = m.rhd_scale;
    t->slice_bytes = comm->exec.params().slice_bytes;
    t->staging_slots = comm->exec.params().slots;
    return IBEX_OK;
}

} // namespace

ibex_status_t ibex_comm_query_topology(const ibex_comm_t *comm, ibex_comm_topology_t *t) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm && t, "ibex_comm_query_topology: NULL argument");
    // A caller built against an older release passes the struct as it was then: up to gamma
    // (0.4-0.5.0), up to the big collectives' costs (0.5.1-0.6.0), up to the hierarchical
    // join (0.6.1), up to the timed scales (0.6.2).
    constexpr size_t kFirstSize = offsetof(ibex_comm_topology_t, gamma_ns_per_byte) + sizeof(double);
    constexpr size_t kBigSize = offsetof(ibex_comm_topology_t, hier_join_us);
    constexpr size_t kHierJoinSize = offsetof(ibex_comm_topology_t, rhd_join_us);
    constexpr size_t kScalesSize = offsetof(ibex_comm_topology_t, slice_bytes);
    IBEX_COLL_CHECK(t->size == sizeof *t || t->size == kFirstSize || t->size == kBigSize || t->size == kHierJoinSize ||
                        t->size == kScalesSize,
                    "ibex_comm_query_topology: size %u, expected %zu (or %zu for 0.6.2, %zu for 0.6.1, %zu before "
                    "0.6.1, %zu before 0.5.1)",
                    t->size, sizeof *t, kScalesSize, kHierJoinSize, kBigSize, kFirstSize);
    const size_t given = t->size;
    ibex_comm_topology_t all{};
    IBEX_TRY(describe_topology(comm, &all));
    all.size = static_cast<uint32_t>(given);
    std::memcpy(t, &all, given);
    return IBEX_OK;
}

const char *ibex_comm_peer_device(const ibex_comm_t *comm, int peer) {
    if (!comm) return nullptr;
    const int link = comm->exec.link_of(peer);
    return link < 0 ? nullptr : ibex_context_device_name(comm->exec.context(link));
}

ibex_status_t ibex_comm_register(ibex_comm_t *comm, void *buf, size_t bytes) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm && buf && bytes, "ibex_comm_register: NULL or empty buffer");
    return comm->caches.add(buf, bytes);
}

ibex_status_t ibex_comm_deregister(ibex_comm_t *comm, void *buf) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm && buf, "ibex_comm_deregister: NULL argument");
    return comm->caches.remove(buf);
}

ibex_status_t ibex_comm_mem_alloc(ibex_comm_t *comm, size_t bytes, void **ptr) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm && ptr && bytes, "ibex_comm_mem_alloc: NULL argument or 0 bytes");
    *ptr = nullptr;
    return comm->memory.alloc(comm->direct.shared_pd(), bytes, ptr);
}

ibex_status_t ibex_comm_mem_free(ibex_comm_t *comm, void *ptr) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm && ptr, "ibex_comm_mem_free: NULL argument");
    const size_t bytes = comm->memory.size_of(ptr);
    IBEX_COLL_CHECK(bytes, "ibex_comm_mem_free: %p is not from ibex_comm_mem_alloc on this communicator", ptr);
    comm->caches.forget(ptr, bytes); // no registration may outlive the memory
    comm->memory.free(ptr);
    return IBEX_OK;
}

ibex_status_t ibex_allreduce(const void *sendbuf, void *recvbuf, size_t count, ibex_datatype_t type,
                             ibex_redop_t op, ibex_comm_t *comm, ibex_request_t **req) {
    ibex::clear_error();
    IBEX_TRY(check_call(__func__, comm, type, &op, count == 0 || (sendbuf && recvbuf)));
    return run(comm, make_op(OpKind::allreduce, sendbuf, recvbuf, count, type, op, 0), req);
}

ibex_status_t ibex_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, ibex_datatype_t type,
                                  ibex_redop_t op, ibex_comm_t *comm, ibex_request_t **req) {
    ibex::clear_error();
    IBEX_TRY(check_call(__func__, comm, type, &op, recvcount == 0 || (sendbuf && recvbuf)));
    return run(comm, make_op(OpKind::reduce_scatter, sendbuf, recvbuf, recvcount, type, op, 0), req);
}

ibex_status_t ibex_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, ibex_datatype_t type,
                             ibex_comm_t *comm, ibex_request_t **req) {
    ibex::clear_error();
    IBEX_TRY(check_call(__func__, comm, type, nullptr, sendcount == 0 || (sendbuf && recvbuf)));
    return run(comm, make_op(OpKind::allgather, sendbuf, recvbuf, sendcount, type, IBEX_SUM, 0), req);
}

ibex_status_t ibex_alltoall(const void *sendbuf, void *recvbuf, size_t count, ibex_datatype_t type,
                            ibex_comm_t *comm, ibex_request_t **req) {
    ibex::clear_error();
    IBEX_TRY(check_call(__func__, comm, type, nullptr, count == 0 || (sendbuf && recvbuf)));
    const size_t bytes = count * ibex_datatype_size(type) * static_cast<size_t>(comm->nranks);
    const auto s = reinterpret_cast<uintptr_t>(sendbuf), r = reinterpret_cast<uintptr_t>(recvbuf);
    IBEX_COLL_CHECK(count == 0 || s + bytes <= r || r + bytes <= s,
                    "ibex_alltoall: sendbuf and recvbuf overlap (%zu bytes each); alltoall is not in place", bytes);
    // The first alltoall connects the pairs of ranks the other collectives left apart
    // (every rank reaches this call at the same place in its sequence of collectives).
    IBEX_TRY(comm_connect_all(comm));
    return run(comm, make_op(OpKind::alltoall, sendbuf, recvbuf, count, type, IBEX_SUM, 0), req);
}

ibex_status_t ibex_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                             const size_t *recvcounts, const size_t *rdispls, ibex_datatype_t type, ibex_comm_t *comm,
                             ibex_request_t **req) {
    ibex::clear_error();
    IBEX_TRY(check_call(__func__, comm, type, nullptr, true));
    IBEX_COLL_CHECK(sendcounts && sdispls && recvcounts && rdispls, "ibex_alltoallv: NULL count or displacement array");
    const size_t n = static_cast<size_t>(comm->nranks), me = static_cast<size_t>(comm->rank);
    const size_t elem = ibex_datatype_size(type);
    IBEX_COLL_CHECK(sendcounts[me] == recvcounts[me],
                    "ibex_alltoallv: this rank sends itself %zu elements but receives %zu from itself", sendcounts[me],
                    recvcounts[me]);
    // Blocks as byte ranges (empty ones left out), checked for overflow on the way.
    std::vector<Range> sends, recvs;
    size_t total = 0;
    constexpr size_t kMaxElems = size_t(1) << 56;
    for (size_t p = 0; p < n; ++p) {
        for (const auto &[base, count, displ, out] :
             {std::tuple{reinterpret_cast<uintptr_t>(sendbuf), sendcounts[p], sdispls[p], &sends},
              std::tuple{reinterpret_cast<uintptr_t>(recvbuf), recvcounts[p], rdispls[p], &recvs}}) {
            if (!count) continue;
            IBEX_COLL_CHECK(count < kMaxElems && displ < kMaxElems, "ibex_alltoallv: block for rank %zu is out of range",
                            p);
            IBEX_COLL_CHECK(base, "ibex_alltoallv: NULL buffer with a block of %zu elements for rank %zu", count, p);
            out->push_back({base + displ * elem, base + (displ + count) * elem});
            total += count;
        }
    }
    const Overlap o = overlap(sends, recvs);
    IBEX_COLL_CHECK(o != Overlap::two_receives, "ibex_alltoallv: two receive blocks overlap");
    IBEX_COLL_CHECK(o != Overlap::receive_and_send,
                    "ibex_alltoallv: a receive block overlaps a send block; alltoallv is not in place");
    IBEX_TRY(comm_connect_all(comm));
    Op op = make_op(OpKind::alltoallv, sendbuf, recvbuf, total, type, IBEX_SUM, 0);
    op.blocks.reserve(4 * n);
    for (const size_t *a : {sendcounts, sdispls, recvcounts, rdispls}) op.blocks.insert(op.blocks.end(), a, a + n);
    return run(comm, std::move(op), req);
}

ibex_status_t ibex_broadcast(const void *sendbuf, void *recvbuf, size_t count, ibex_datatype_t type, int root,
                             ibex_comm_t *comm, ibex_request_t **req) {
    ibex::clear_error();
    IBEX_TRY(check_call(__func__, comm, type, nullptr, true));
    IBEX_COLL_CHECK(root >= 0 && root < comm->nranks, "ibex_broadcast: root %d not in 0..%d", root, comm->nranks - 1);
    IBEX_COLL_CHECK(count == 0 || (recvbuf && (comm->rank != root || sendbuf)), "ibex_broadcast: NULL buffer");
    return run(comm, make_op(OpKind::broadcast, sendbuf, recvbuf, count, type, IBEX_SUM, root), req);
}

ibex_status_t ibex_reduce(const void *sendbuf, void *recvbuf, size_t count, ibex_datatype_t type, ibex_redop_t op,
                          int root, ibex_comm_t *comm, ibex_request_t **req) {
    ibex::clear_error();
    IBEX_TRY(check_call(__func__, comm, type, &op, true));
    IBEX_COLL_CHECK(root >= 0 && root < comm->nranks, "ibex_reduce: root %d not in 0..%d", root, comm->nranks - 1);
    IBEX_COLL_CHECK(count == 0 || (sendbuf && (comm->rank != root || recvbuf)), "ibex_reduce: NULL buffer");
    return run(comm, make_op(OpKind::reduce, sendbuf, recvbuf, count, type, op, root), req);
}

ibex_status_t ibex_barrier(ibex_comm_t *comm, ibex_request_t **req) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm, "ibex_barrier: comm is NULL");
    return run(comm, make_op(OpKind::barrier, nullptr, nullptr, 1, IBEX_U8, IBEX_MAX, 0), req);
}

ibex_status_t ibex_send(const void *buf, size_t count, ibex_datatype_t type, int peer, ibex_comm_t *comm,
                        ibex_request_t **req) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm, "ibex_send: comm is NULL");
    const ibex_p2p_op_t o{IBEX_P2P_SEND, peer, const_cast<void *>(buf), count, type};
    return run_p2p(comm, {&o, 1}, req, __func__, false);
}

ibex_status_t ibex_recv(void *buf, size_t count, ibex_datatype_t type, int peer, ibex_comm_t *comm,
                        ibex_request_t **req) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm, "ibex_recv: comm is NULL");
    const ibex_p2p_op_t o{IBEX_P2P_RECV, peer, buf, count, type};
    return run_p2p(comm, {&o, 1}, req, __func__, false);
}

ibex_status_t ibex_p2p_batch(const ibex_p2p_op_t *ops, size_t nops, ibex_comm_t *comm, ibex_request_t **req) {
    ibex::clear_error();
    IBEX_COLL_CHECK(comm, "ibex_p2p_batch: comm is NULL");
    IBEX_COLL_CHECK(ops || nops == 0, "ibex_p2p_batch: ops is NULL for %zu ops", nops);
    return run_p2p(comm, {ops, nops}, req, __func__, true);
}

ibex_status_t ibex_test(ibex_request_t *req, int *done) {
    ibex::clear_error();
    IBEX_COLL_CHECK(req && done, "ibex_test: NULL argument");
    request_poke(req);
    if (!request_done(req)) {
        *done = 0;
        return IBEX_OK;
    }
    *done = 1;
    return request_wait(req);
}

ibex_status_t ibex_wait(ibex_request_t *req) {
    ibex::clear_error();
    IBEX_COLL_CHECK(req, "ibex_wait: req is NULL");
    return request_wait(req);
}

} // extern "C"

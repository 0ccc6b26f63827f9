#include "allreduce/op_start.h"

#include "allreduce/comm.h"
#include "runtime/base/status.h"

namespace ibex::coll {

OpPath op_path(const ibex_comm *c, const Op &op) {
    if (op.algo) return OpPath::scheduled;
    if (c->mail.carries_all(op)) return OpPath::boxes;
    if (c->fast.takes(c, op)) return OpPath::boxes;
    if (c->direct.takes(op)) return OpPath::direct;
    return OpPath::scheduled;
}

ibex_status_t boxes_start(ibex_comm *c, const Op &op) {
    return op.kind == OpKind::p2p ? c->mail.start(op, true) : c->fast.start(c, op);
}

ibex_status_t boxes_poll(ibex_comm *c, const Op &op, bool *done, bool *moved) {
    return op.kind == OpKind::p2p ? c->mail.poll(done, moved) : c->fast.poll(op, done, moved);
}

int boxes_waiting_on(const ibex_comm *c, const Op &op) {
    return op.kind == OpKind::p2p ? c->mail.waiting_on() : c->fast.waiting_on();
}

std::string boxes_stall_detail(const ibex_comm *c, const Op &op) {
    return op.kind == OpKind::p2p ? c->mail.stall_detail() : c->fast.stall_detail();
}

namespace {

void build_allreduce(const ibex_comm *c, Algo algo, const CollArgs &a, size_t elem, ScheduleBuilder &b) {
    switch (algo) {
    case Algo::ring: build_ring_allreduce(a, b); break;
    case Algo::rhd: build_bigraph_allreduce(a, c->bigraph_order, b); break; // plain rhd without a BiGraph
    case Algo::tree: build_tree_allreduce(a, b); break;
    case Algo::hierarchical: build_hierarchical_allreduce(a, c->topo.layout, b); break;
    case Algo::gdraa:
        // What does not fit the landing zones goes around the ring (comm_algo says so too).
        if (gdraa_fits(a.count, elem, c->nranks, c->opt.exec.zone_bytes))
            build_gdraa_allreduce(a, b);
        else
            build_ring_allreduce(a, b);
        break;
    case Algo::sumsrv: build_ring_allreduce(a, b); break; // not reached: start_sumsrv splits first
    }
}

// BytePS's split: the servers' partitions start on the summation client, the workers' part
// is scheduled on the executor (ring when forced, else the cost model's choice for its size).
ibex_status_t start_sumsrv(ibex_comm *c, const CollArgs &a, size_t elem, ScheduleBuilder &b) {
    const int servers = c->sumsrv.servers();
    const SumsrvSplit split = sumsrv_split(a.count, c->nranks, servers);
    CollArgs workers = a;
    workers.count = split.workers;
    if (workers.count > 0) {
        const Algo algo = c->opt.forced ? Algo::ring : c->selector.choose(workers.count * elem, false);
        build_allreduce(c, algo, workers, elem, b);
    }
    std::vector<SumsrvClient::Part> parts(static_cast<size_t>(servers));
    for (int s = 0; s < servers; ++s)
        parts[static_cast<size_t>(s)] = {(split.workers + static_cast<size_t>(s) * split.per_server) * elem,
                                         split.per_server * elem};
    return c->sumsrv.start(a.sendbuf, a.recvbuf, a.type, a.op, parts);
}

// A batch of sends and receives: the schedule of its messages that are not carried whole
// or read by the mailboxes, and the mailboxes' part beside it.
ibex_status_t build_p2p_op(ibex_comm *c, const Op &op, const std::vector<P2pPiece> &scheduled, bool mailed,
                           ScheduleBuilder &b, Schedule &s) {
    // Up to kP2pEagerSlices eager slices, and kP2pEagerBytes, a message goes eager: past
    // the eager limit a slice waits a credit round trip (on shm about 10 us, where the
    // eager ring is a memcpy away). Past 64 KiB one credited WRITE beat the slices over
    // udp (128 KiB in four 32 KiB slices: 80 us, one WRITE: 64).
    constexpr size_t kP2pEagerSlices = 4;
    constexpr size_t kP2pEagerBytes = 64 << 10;
    const size_t eager = c->exec.params().eager_bytes;
    ScheduleBuilder small(&s, 1, eager ? eager : 1);
    build_p2p(scheduled, c->rank, b, small, std::min(eager * kP2pEagerSlices, kP2pEagerBytes));
    return mailed ? c->mail.start(op, false) : IBEX_OK;
}

// alltoallv's blocks as a batch's pieces (empty blocks left out on both sides), in rank
// order: each pair has one send and one receive, so the ends number them alike.
void alltoallv_pieces(Op &op, int nranks) {
    const AlltoallvBlocks v = alltoallv_blocks(op, nranks);
    const size_t elem = ibex_datatype_size(op.args.type);
    auto *send = static_cast<uint8_t *>(const_cast<void *>(op.args.sendbuf));
    auto *recv = static_cast<uint8_t *>(op.args.recvbuf);
    op.pieces.clear();
    for (int q = 0; q < nranks; ++q) {
        const auto p = static_cast<size_t>(q);
        if (v.sendcounts[p]) op.pieces.push_back({true, q, send + v.sdispls[p] * elem, v.sendcounts[p] * elem});
        if (v.recvcounts[p]) op.pieces.push_back({false, q, recv + v.rdispls[p] * elem, v.recvcounts[p] * elem});
    }
}

} // namespace

ibex_status_t start_op(ibex_comm *c, Op &op, bool *empty) {
    CollArgs a = op.args;
    a.rank = c->rank;
    a.nranks = c->nranks;
    const size_t elem = op.kind == OpKind::probe ? 1 : ibex_datatype_size(a.type);
    const OpBytes bytes = op_bytes(op, c->rank, c->nranks);
    size_t send_bytes = bytes.send, recv_bytes = bytes.recv, scratch = 0;
    switch (op.kind) {
    case OpKind::reduce_scatter: scratch = send_bytes; break;
    case OpKind::reduce: scratch = a.count * elem; break;
    case OpKind::barrier:
        a.sendbuf = c->small;
        a.recvbuf = c->small + 8;
        a.count = 1;
        a.type = IBEX_U8;
        a.op = IBEX_MAX;
        send_bytes = recv_bytes = 1;
        break;
    case OpKind::probe: scratch = probe_buffer_bytes(op.pings, op.bulk); break;
    case OpKind::allreduce:
    case OpKind::allgather:
    case OpKind::alltoall: break;
    case OpKind::alltoallv:
        if (c->mail.on_some_host()) {
            // Sends and receives, so that ranks of one host use the mailboxes (the blocks
            // point into the buffers the op has now: staged copies of GPU ones included).
            alltoallv_pieces(op, c->nranks);
            send_bytes = recv_bytes = 0; // registered piece by piece below
        }
        break;
    case OpKind::p2p:
    case OpKind::broadcast: break;
    }
    *empty = false;
    if (a.count == 0) {
        *empty = true;
        return IBEX_OK;
    }
    c->caches.next_epoch();
    if (send_bytes && a.sendbuf)
        IBEX_TRY(c->caches.get_all(a.sendbuf, send_bytes));
    if (recv_bytes && a.recvbuf)
        IBEX_TRY(c->caches.get_all(a.recvbuf, recv_bytes));
    if (scratch)
        IBEX_TRY(comm_ensure_scratch(c, scratch));
    if (op.kind == OpKind::barrier)
        IBEX_TRY(c->caches.get_all(c->small, sizeof c->small));
    // A batch's messages to ranks of this host go through the mailboxes: whole or read out
    // of the sender's buffer (nothing to register or schedule), or as a notice of their
    // length beside the schedule that moves them.
    std::vector<P2pPiece> scheduled_pieces;
    const bool mailed = c->mail.carries_some(op);
    if (mailed) {
        for (const P2pPiece &p : op.pieces)
            if (c->mail.scheduled(p)) scheduled_pieces.push_back(p);
    }
    const std::vector<P2pPiece> &pieces = mailed ? scheduled_pieces : op.pieces;
    for (const P2pPiece &p : pieces) IBEX_TRY(c->caches.get_all(p.buf, p.bytes));
    a.scratch = c->scratch;
    // Built in the memo's own schedule (its storage reused op after op), which the
    // executor copies; kept for the next identical call where that may be.
    ScheduleMemo &memo = c->last_schedule;
    // alltoallv's counts and a batch's sends and receives are not in the args: their
    // schedules are not kept.
    const bool memoizable = op.kind != OpKind::probe && op.kind != OpKind::alltoallv && op.kind != OpKind::p2p;
    if (memoizable && memo.matches(op.kind, op.algo, a))
        return c->exec.start(memo.schedule, a.type, a.op, c->caches, op.times != nullptr);
    memo.forget();
    const Algo algo = op.algo ? *op.algo : comm_algo(c, a.count * elem);
    Schedule &s = memo.schedule;
    s.reset();
    ScheduleBuilder b(&s, elem, c->opt.exec.slice_bytes);
    switch (op.kind) {
    case OpKind::allreduce:
        if (algo == Algo::sumsrv && c->sumsrv.servers() > 0)
            IBEX_TRY(start_sumsrv(c, a, elem, b));
        else
            build_allreduce(c, algo, a, elem, b);
        break;
    case OpKind::barrier: build_tree_allreduce(a, b); break;
    case OpKind::reduce_scatter:
        if (comm_hierarchical(c, OpKind::reduce_scatter, a.count * elem))
            build_hierarchical_reduce_scatter(a, c->topo.layout, b);
        else
            build_ring_reduce_scatter(a, b);
        break;
    case OpKind::allgather:
        if (comm_hierarchical(c, OpKind::allgather, a.count * elem))
            build_hierarchical_allgather(a, c->topo.layout, b);
        else
            build_ring_allgather(a, b);
        break;
    case OpKind::broadcast: build_chain_broadcast(a, b); break;
    case OpKind::alltoall: build_pairwise_alltoall(a, b); break;
    case OpKind::alltoallv: {
        if (!op.pieces.empty()) {
            ScheduleBuilder in_bytes(&s, 1, c->opt.exec.slice_bytes); // the pieces count bytes
            IBEX_TRY(build_p2p_op(c, op, pieces, mailed, in_bytes, s));
            break;
        }
        const AlltoallvBlocks v = alltoallv_blocks(op, c->nranks);
        build_pairwise_alltoallv(a, v.sendcounts, v.sdispls, v.recvcounts, v.rdispls, b);
        break;
    }
    case OpKind::p2p: IBEX_TRY(build_p2p_op(c, op, pieces, mailed, b, s)); break;
    case OpKind::reduce: build_chain_reduce(a, b); break;
    case OpKind::probe: build_probe(c->rank, op.partner, op.pings, op.bulk, c->scratch, b); break;
    }
    if (s.steps.empty()) {
        // A sumsrv allreduce whose servers carry it all (k = n) runs on the client alone.
        *empty = !c->sumsrv.active() && !c->mail.active();
        return IBEX_OK;
    }
    if (memoizable && !c->sumsrv.active()) memo.keep(op.kind, op.algo, a);
    return c->exec.start(s, op.kind == OpKind::probe ? IBEX_U8 : a.type, a.op, c->caches, op.times != nullptr);
}

} // namespace ibex::coll

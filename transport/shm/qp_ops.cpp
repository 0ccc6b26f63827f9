// Queue pairs: creation, the state machine, addresses. A QP's address names its process,
// context, number and incarnation (see README.md, "Addresses"); every entry into RESET
// starts a new incarnation with fresh rings, so nothing of an old connection survives.
#include <cstring>
#include <random>
#include <unistd.h>

#include "runtime/base/status.h"
#include "transport/qp_state.h"
#include "transport/shm/engine.h"
#include "transport/shm/shm_ops.h"
#include "transport/soft/codec/roce.h"

namespace ibex::shm {

namespace {

constexpr uint8_t kGidMarker[4] = {'i', 'b', 'x', 's'};

// A fresh segment for the QP's next incarnation; the old one is marked closed (its peer
// stops sending and times out) and unlinked.
ibex_status_t new_incarnation(ShmQp &qp) {
    if (qp.self) qp.self->closed.store(1);
    qp.self = nullptr;
    ++qp.generation;
    IBEX_TRY(qp.seg.create(qp_segment_name(qp.ctx->shared->pid, qp.ctx->id, qp.qp_num, qp.generation), sizeof(QpShared)));
    qp.self = new (qp.seg.addr()) QpShared{};
    qp.self->qpn = qp.qp_num;
    qp.self->magic = kQpMagic;
    return IBEX_OK;
}

// Back to RESET: both queues emptied without completions, the peer forgotten.
ibex_status_t reset(ShmQp &qp) {
    qp.state = IBEX_QPS_RESET;
    flush_gpu_pending(qp, false);
    forget_gpu_peer(qp);
    while (!qp.sq.empty()) qp.sq.pop();
    while (!qp.rq.empty()) qp.rq.pop();
    qp.tx_wqe = qp.sq.tail();
    qp.tx_off = 0;
    qp.next_seq = qp.una_seq = qp.epsn = 0;
    qp.ack_deadline = qp.rnr_until = qp.liveness_at = qp.gpu_liveness_at = 0;
    qp.in_send = false;
    qp.peer = nullptr;
    qp.peer_ctx = nullptr;
    qp.peer_seg.release();
    qp.peer_ctx_seg.release();
    qp.dest = {};
    return new_incarnation(qp);
}

// Maps the peer QP that `dest` names and decides how this QP serves its requests.
ibex_status_t attach_peer(ShmQp &qp, const ibex_ep_addr_t &dest) {
    if (std::memcmp(dest.gid, kGidMarker, sizeof kGidMarker) != 0)
        return fail(IBEX_ERR_NOT_SUPPORTED, "the shm device reaches shm peers only (address is not an shm address)");
    const uint32_t pid = roce::get32(dest.gid + 4), ctx_id = roce::get32(dest.gid + 8), gen = roce::get32(dest.gid + 12);
    qp.peer_seg.release();
    qp.peer_ctx_seg.release();
    IBEX_TRY(qp.peer_ctx_seg.open(ctx_segment_name(pid, ctx_id), sizeof(CtxShared)));
    IBEX_TRY(qp.peer_seg.open(qp_segment_name(pid, ctx_id, dest.qpn, gen), sizeof(QpShared)));
    auto *pc = static_cast<CtxShared *>(qp.peer_ctx_seg.addr());
    auto *pq = static_cast<QpShared *>(qp.peer_seg.addr());
    if (pc->magic != kCtxMagic || pc->pid != pid || pq->magic != kQpMagic || pq->qpn != dest.qpn)
        return fail(IBEX_ERR_REMOTE, "peer segments of pid %u QP 0x%x are not an shm QP's", pid, dest.qpn);
    if (pq->closed.load()) return fail(IBEX_ERR_REMOTE, "peer QP 0x%x of pid %u was reset or destroyed", dest.qpn, pid);
    qp.peer_ctx = pc;
    qp.peer = pq;
    qp.peer_pid = pid;
    qp.peer_ctx_id = ctx_id;
    qp.shared_allocs.clear();
    qp.dest = dest;
    const uint32_t forced = qp.forced = forced_copy();
    if (forced == static_cast<uint32_t>(Copy::kRing)) {
        qp.serve_mode = Copy::kRing;
        note_copy_choice(Copy::kRing, "IBEX_SHM_COPY=ring");
    } else if (cma_works(pid, pc)) {
        qp.serve_mode = Copy::kCma;
        note_copy_choice(Copy::kCma, forced == static_cast<uint32_t>(Copy::kCma) ? "IBEX_SHM_COPY=cma"
                                     : "process_vm_readv reaches the peer; for memory not from ibex_mem_alloc");
    } else {
        qp.serve_mode = Copy::kRing;
        note_copy_choice(Copy::kRing, "process_vm_readv refused (ptrace scope, user or PID namespace)");
    }
    qp.self->mode.store(static_cast<uint32_t>(qp.serve_mode));
    qp.self->ready.store(1, std::memory_order_release);
    offer_allocs(qp);
    return IBEX_OK;
}

} // namespace

void complete(ShmQp &qp, ShmCq *cq, uint64_t wr_id, ibex_wc_status_t st, ibex_wc_opcode_t op, uint32_t len) {
    cq->emplace([&](ibex_wc_t &wc) {
        wc.wr_id = wr_id;
        wc.status = st;
        wc.opcode = op;
        wc.byte_len = len;
        wc.qp_num = qp.qp_num;
        wc.src_qp = qp.dest.qpn;
    });
}

void qp_to_error(ShmQp &qp) {
    qp.lane.close();
    if (qp.state == IBEX_QPS_ERR) return;
    qp.state = IBEX_QPS_ERR;
    if (qp.self) qp.self->state.store(IBEX_QPS_ERR, std::memory_order_release);
    flush_gpu_pending(qp, true);
    for (; !qp.sq.empty(); qp.sq.pop()) complete(qp, qp.scq, qp.sq.front().wr_id, IBEX_WC_WR_FLUSH_ERR, IBEX_WC_SEND, 0);
    for (; !qp.rq.empty(); qp.rq.pop()) complete(qp, qp.rcq, qp.rq.front().wr_id, IBEX_WC_WR_FLUSH_ERR, IBEX_WC_RECV, 0);
    qp.tx_wqe = qp.sq.tail();
    qp.tx_off = 0;
    qp.in_send = false;
    qp.ack_deadline = qp.rnr_until = 0;
}

ibex_status_t create_qp(ibex_pd *pd, const ibex_qp_init_attr_t *a, ibex_qp **out) {
    ShmContext *ctx = ctx_of(pd);
    ShmQp *qp = nullptr;
    IBEX_TRY(allocate_qp(pd, ctx, *a, kMaxSge, &qp));
    qp->take_path(ctx->path);
    Lock l(ctx->mu);
    qp->qp_num = ctx->next_qpn++ & roce::kQpnMask;
    if (ibex_status_t st = reset(*qp); st != IBEX_OK) {
        delete qp;
        return st;
    }
    std::mt19937 rng(qp->qp_num ^ static_cast<uint32_t>(now_ns()));
    qp->sq_psn = rng() & roce::kPsnMask;
    ctx->qps.push_back(qp);
    ctx->unquiet();
    ++qp->scq->users;
    ++qp->rcq->users;
    ++static_cast<ShmPd *>(pd)->users;
    *out = qp;
    return IBEX_OK;
}

ibex_status_t destroy_qp(ibex_qp *q) {
    ShmQp *qp = qp_of(q);
    {
        Lock l(qp->ctx->mu);
        qp->ctx->unquiet();
        auto &v = qp->ctx->qps;
        for (size_t i = 0; i < v.size(); ++i)
            if (v[i] == qp) {
                v[i] = v.back();
                v.pop_back();
                break;
            }
        if (qp->self) qp->self->closed.store(1);
        flush_gpu_pending(*qp, false);
        forget_gpu_peer(*qp); // after it left ctx->qps: it counts no more as reaching its peer
        CopyStats &c = qp->ctx->copies; // copy_stats counts the live QPs' lanes
        qp->lane.add_to(&c.map_ops, &c.map_bytes, &c.lane_ops);
        --qp->scq->users;
        --qp->rcq->users;
        --static_cast<ShmPd *>(qp->pd)->users;
    }
    delete qp; // unmaps, and unlinks its segment
    return IBEX_OK;
}

ibex_status_t modify_qp(ibex_qp *q, const ibex_qp_attr_t *a, unsigned mask) {
    ShmQp *qp = qp_of(q);
    Lock l(qp->ctx->mu);
    qp->ctx->unquiet();
    qp->lane.close(); // whatever changes, the next in-place WRITE checks it all again
    IBEX_TRY(check_modify_common(qp->qp_num, qp->state, *a, mask));
    const ibex_qp_state_t to = (mask & IBEX_QP_STATE) ? a->qp_state : qp->state;
    if (to == IBEX_QPS_RESET) return reset(*qp);
    if (mask & IBEX_QP_DEST) IBEX_TRY(attach_peer(*qp, a->dest));
    if (mask & IBEX_QP_ACCESS_FLAGS) qp->self->access.store(qp->access = a->qp_access_flags);
    if (mask & IBEX_QP_PATH_MTU) qp->mtu_enum = static_cast<uint8_t>(a->path_mtu);
    if (mask & IBEX_QP_RQ_PSN) qp->rq_psn = a->rq_psn;
    if (mask & IBEX_QP_SQ_PSN) qp->sq_psn = a->sq_psn;
    qp->apply_limits(*a, mask);
    // The live budgets start full with the limits RTR -> RTS sets.
    if (mask & IBEX_QP_RETRY_CNT) qp->retry_left = qp->retry_cnt;
    if (mask & IBEX_QP_RNR_RETRY) qp->rnr_left = qp->rnr_retry;
    if (to == IBEX_QPS_ERR) {
        qp_to_error(*qp);
        return IBEX_OK;
    }
    qp->state = to;
    qp->self->state.store(to, std::memory_order_release);
    return IBEX_OK;
}

ibex_status_t query_qp(ibex_qp *q, ibex_qp_attr_t *a) {
    ShmQp *qp = qp_of(q);
    Lock l(qp->ctx->mu);
    qp->report(a);
    a->dest = qp->dest;
    a->rq_psn = qp->rq_psn;
    a->sq_psn = qp->sq_psn;
    a->qp_num = qp->qp_num;
    return IBEX_OK;
}

ibex_status_t qp_local_addr(ibex_qp *q, ibex_ep_addr_t *out) {
    ShmQp *qp = qp_of(q);
    Lock l(qp->ctx->mu);
    std::memset(out, 0, sizeof *out);
    std::memcpy(out->gid, kGidMarker, sizeof kGidMarker);
    roce::put32(out->gid + 4, qp->ctx->shared->pid);
    roce::put32(out->gid + 8, qp->ctx->id);
    roce::put32(out->gid + 12, qp->generation);
    out->mtu = IBEX_MTU_4096;
    out->qpn = qp->qp_num;
    out->psn = qp->sq_psn;
    return IBEX_OK;
}

} // namespace ibex::shm

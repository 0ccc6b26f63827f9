// Posting work requests: each send or receive WR becomes a WQE on the QP's queue, its
// scatter/gather list resolved against the context's memory regions.
#include <cstring>

#include "runtime/base/status.h"
#include "transport/recv_posting.h"
#include "transport/send_posting.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/engine/staging.h"
#include "transport/soft/soft_ops.h"

namespace ibex::soft::ops {

namespace {

void flush_wr(SoftQp &qp, uint64_t wr_id, SoftCq *cq) {
    ibex_wc_t wc{};
    wc.wr_id = wr_id;
    wc.status = IBEX_WC_WR_FLUSH_ERR;
    wc.qp_num = qp.qp_num;
    cq->push(wc);
}

ibex_status_t post_one_send(SoftContext &ctx, SoftQp &qp, const ibex_send_wr_t &wr) {
    SendAdmit admit;
    IBEX_TRY(admit_send(qp, wr, kMaxSge, &admit));
    if (admit == SendAdmit::flush) {
        flush_wr(qp, wr.wr_id, qp.scq);
        return IBEX_OK;
    }
    if ((wr.send_flags & IBEX_SEND_INLINE) && wr.opcode != IBEX_WR_RDMA_READ && !is_atomic_wr(wr.opcode) &&
        staging::active())
        IBEX_TRY(staging::check_inline(wr));
    SendWqe &w = qp.sq.at(qp.sq.tail());
    IBEX_TRY(fill_send_wqe(wr, w, [&](const ibex_sge_t *sg, int n, unsigned need, SgeList *out) {
        return resolve_sges(ctx.mrs(), sg, n, need, out);
    }));
    w.npkts = is_atomic_wr(wr.opcode) ? 1 : std::max<uint32_t>(1, (w.local.total + qp.mtu - 1) / qp.mtu);
    if (staging::active())
        IBEX_TRY(staging::stage_send(ctx, qp, wr, qp.sq.tail()));
    w.first_psn = qp.sq_psn;
    qp.sq_psn = roce::psn_add(qp.sq_psn, w.npkts);
    qp.sq.push();
    return IBEX_OK;
}

} // namespace

ibex_status_t post_send(ibex_qp *q, ibex_send_wr_t *wr, ibex_send_wr_t **bad) {
    SoftQp *qp = qp_of(q);
    SoftContext *ctx = qp->ctx;
    Lock l(ctx->mutex());
    ibex_status_t st = IBEX_OK;
    for (; wr; wr = wr->next) {
        st = post_one_send(*ctx, *qp, *wr);
        if (st != IBEX_OK) break;
    }
    if (bad) *bad = wr;
    // GPU sources: the requester holds each WR until its staging copies are done
    // (staging::send_ready), so nothing waits here.
    ctx->transmit_now(*qp);
    return st;
}

ibex_status_t post_recv(ibex_qp *q, ibex_recv_wr_t *wr, ibex_recv_wr_t **bad) {
    SoftQp *qp = qp_of(q);
    SoftContext *ctx = qp->ctx;
    Lock l(ctx->mutex());
    return post_recv_list(
        *qp, wr, bad, kMaxSge, [&](const ibex_recv_wr_t &w) { flush_wr(*qp, w.wr_id, qp->rcq); },
        [&](const ibex_recv_wr_t &w, RecvWqe &r) {
            IBEX_TRY(resolve_sges(ctx->mrs(), w.sg_list, w.num_sge, IBEX_ACCESS_LOCAL_WRITE, &r.local));
            if (staging::active()) staging::stage_recv(*ctx, *qp, w, qp->rq.tail());
            return IBEX_OK;
        });
}

} // namespace ibex::soft::ops

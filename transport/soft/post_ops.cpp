// Posting work requests: each send or receive WR becomes a WQE on the QP's queue, its
// scatter/gather list resolved against the context's memory regions.
#include <cstring>

#include "runtime/base/status.h"
#include "transport/qp_state.h"
#include "transport/recv_posting.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/engine/staging.h"
#include "transport/soft/soft_ops.h"

namespace ibex::soft::ops {

namespace {

constexpr uint64_t kMaxMessage = 1ull << 31;

// Resolves a WR's SGEs against the context's regions. `need` is the local right needed.
ibex_status_t resolve_sges(SoftContext &ctx, const ibex_sge_t *sg, int n, unsigned need, SgeList *out) {
    out->count = 0;
    out->total = 0;
    uint64_t total = 0;
    for (int i = 0; i < n; ++i) {
        if (!sg[i].length) continue;
        uint8_t *p = ctx.mrs().resolve(sg[i].lkey, sg[i].addr, sg[i].length, need);
        if (!p) {
            if (!ctx.mrs().find(sg[i].lkey))
                return fail(IBEX_ERR_INVALID_ARGUMENT, "sge %d: lkey 0x%x is not a registered memory region", i, sg[i].lkey);
            if (need && !ctx.mrs().resolve(sg[i].lkey, sg[i].addr, sg[i].length, 0))
                return fail(IBEX_ERR_INVALID_ARGUMENT, "sge %d: [0x%llx, +%u) lies outside memory region 0x%x", i,
                            static_cast<unsigned long long>(sg[i].addr), sg[i].length, sg[i].lkey);
            return fail(IBEX_ERR_INVALID_ARGUMENT, "sge %d: memory region 0x%x lacks IBEX_ACCESS_LOCAL_WRITE", i,
                        sg[i].lkey);
        }
        out->sge[out->count++] = {p, sg[i].length};
        total += sg[i].length;
    }
    if (total > kMaxMessage) return fail(IBEX_ERR_INVALID_ARGUMENT, "message of %llu bytes exceeds 2 GiB",
                                         static_cast<unsigned long long>(total));
    out->total = static_cast<uint32_t>(total);
    return IBEX_OK;
}

void flush_wr(SoftQp &qp, uint64_t wr_id, SoftCq *cq) {
    ibex_wc_t wc{};
    wc.wr_id = wr_id;
    wc.status = IBEX_WC_WR_FLUSH_ERR;
    wc.qp_num = qp.qp_num;
    cq->push(wc);
}

ibex_status_t post_one_send(SoftContext &ctx, SoftQp &qp, const ibex_send_wr_t &wr) {
    if (wr.opcode < IBEX_WR_RDMA_WRITE || wr.opcode > IBEX_WR_ATOMIC_FETCH_AND_ADD)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "unknown work request opcode %d", wr.opcode);
    if (wr.num_sge < 0 || wr.num_sge > kMaxSge || (wr.num_sge && !wr.sg_list))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "num_sge %d out of range (0..%d) or sg_list missing", wr.num_sge, kMaxSge);
    if (qp.state == IBEX_QPS_ERR) {
        flush_wr(qp, wr.wr_id, qp.scq);
        return IBEX_OK;
    }
    if (qp.state != IBEX_QPS_RTS)
        return fail(IBEX_ERR_INVALID_STATE, "QP 0x%x is in %s; post_send needs RTS", qp.qp_num, qp_state_name(qp.state));
    if (qp.sq.full()) return fail(IBEX_ERR_QUEUE_FULL, "send queue of QP 0x%x is full (%zu)", qp.qp_num, qp.sq.capacity());
    SendWqe &w = qp.sq.at(qp.sq.tail());
    const bool atomic = wr.opcode == IBEX_WR_ATOMIC_CMP_AND_SWP || wr.opcode == IBEX_WR_ATOMIC_FETCH_AND_ADD;
    const bool read = wr.opcode == IBEX_WR_RDMA_READ;
    if ((wr.send_flags & IBEX_SEND_INLINE) && !read && !atomic) {
        if (staging::active())
            IBEX_TRY(staging::check_inline(wr));
        uint64_t total = 0;
        for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
        if (total > kMaxInline) return fail(IBEX_ERR_INVALID_ARGUMENT, "inline data of %llu bytes exceeds %u",
                                            static_cast<unsigned long long>(total), kMaxInline);
        uint32_t off = 0;
        for (int i = 0; i < wr.num_sge; ++i) {
            std::memcpy(w.inline_data + off, reinterpret_cast<const void *>(static_cast<uintptr_t>(wr.sg_list[i].addr)),
                        wr.sg_list[i].length);
            off += wr.sg_list[i].length;
        }
        w.local.count = off ? 1 : 0;
        w.local.sge[0] = {w.inline_data, off};
        w.local.total = off;
    } else {
        IBEX_TRY(resolve_sges(ctx, wr.sg_list, wr.num_sge, (read || atomic) ? IBEX_ACCESS_LOCAL_WRITE : 0, &w.local));
    }
    if (atomic) {
        if (w.local.total != 8)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "an atomic needs exactly 8 bytes of local buffer (got %u)", w.local.total);
        if (wr.wr.atomic.remote_addr & 7)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "atomic remote address 0x%llx is not 8-byte aligned",
                        static_cast<unsigned long long>(wr.wr.atomic.remote_addr));
        w.remote_addr = wr.wr.atomic.remote_addr;
        w.rkey = wr.wr.atomic.rkey;
        w.compare_add = wr.wr.atomic.compare_add;
        w.swap = wr.wr.atomic.swap;
        w.npkts = 1;
    } else {
        w.remote_addr = wr.wr.rdma.remote_addr;
        w.rkey = wr.wr.rdma.rkey;
        w.npkts = std::max<uint32_t>(1, (w.local.total + qp.mtu - 1) / qp.mtu);
    }
    w.wr_id = wr.wr_id;
    w.opcode = static_cast<uint8_t>(wr.opcode);
    w.signaled = (wr.send_flags & IBEX_SEND_SIGNALED) != 0;
    w.solicited = (wr.send_flags & IBEX_SEND_SOLICITED) != 0;
    w.fence = (wr.send_flags & IBEX_SEND_FENCE) != 0;
    w.imm = wr.imm_data;
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
            IBEX_TRY(resolve_sges(*ctx, w.sg_list, w.num_sge, IBEX_ACCESS_LOCAL_WRITE, &r.local));
            if (staging::active()) staging::stage_recv(*ctx, *qp, w, qp->rq.tail());
            return IBEX_OK;
        });
}

} // namespace ibex::soft::ops

// Posting work requests: each WR becomes a WQE with its local buffers resolved against
// the context's regions; the requester starts sending at once.
#include <cstring>

#include "runtime/base/status.h"
#include "transport/qp_state.h"
#include "transport/recv_posting.h"
#include "transport/shm/engine.h"
#include "transport/shm/shm_ops.h"

namespace ibex::shm {

namespace {

constexpr uint64_t kMaxMessage = 1ull << 31;

ibex_status_t resolve_local(ShmContext &ctx, const ibex_sge_t *sg, int n, unsigned need, SgeList *out) {
    out->count = 0;
    out->total = 0;
    uint64_t total = 0;
    for (int i = 0; i < n; ++i) {
        if (!sg[i].length) continue;
        uint8_t *p = ctx.mrs.resolve(sg[i].lkey, sg[i].addr, sg[i].length, need);
        if (!p) {
            const char *why = !ctx.mrs.find(sg[i].lkey) ? "is not a registered memory region's"
                              : ctx.mrs.resolve(sg[i].lkey, sg[i].addr, sg[i].length, 0) ? "lacks IBEX_ACCESS_LOCAL_WRITE"
                                                                                          : "does not cover the range";
            return fail(IBEX_ERR_INVALID_ARGUMENT, "sge %d: lkey 0x%x %s ([0x%llx, +%u))", i, sg[i].lkey, why,
                        static_cast<unsigned long long>(sg[i].addr), sg[i].length);
        }
        out->sge[out->count++] = {p, sg[i].length};
        total += sg[i].length;
    }
    if (total > kMaxMessage)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "message of %llu bytes exceeds 2 GiB", static_cast<unsigned long long>(total));
    out->total = static_cast<uint32_t>(total);
    return IBEX_OK;
}

ibex_status_t post_one(ShmQp &qp, const ibex_send_wr_t &wr) {
    if (wr.opcode < IBEX_WR_RDMA_WRITE || wr.opcode > IBEX_WR_ATOMIC_FETCH_AND_ADD)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "unknown work request opcode %d", wr.opcode);
    if (wr.num_sge < 0 || wr.num_sge > kMaxSge || (wr.num_sge && !wr.sg_list))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "num_sge %d out of range (0..%d) or sg_list missing", wr.num_sge, kMaxSge);
    if (qp.state == IBEX_QPS_ERR) {
        complete(qp, qp.scq, wr.wr_id, IBEX_WC_WR_FLUSH_ERR, IBEX_WC_SEND, 0);
        return IBEX_OK;
    }
    if (qp.state != IBEX_QPS_RTS)
        return fail(IBEX_ERR_INVALID_STATE, "QP 0x%x is in %s; post_send needs RTS", qp.qp_num, qp_state_name(qp.state));
    if (qp.sq.full()) return fail(IBEX_ERR_QUEUE_FULL, "send queue of QP 0x%x is full (%zu)", qp.qp_num, qp.sq.capacity());
    SendWqe &w = qp.sq.at(qp.sq.tail());
    const bool atomic = wr.opcode == IBEX_WR_ATOMIC_CMP_AND_SWP || wr.opcode == IBEX_WR_ATOMIC_FETCH_AND_ADD;
    const bool read = wr.opcode == IBEX_WR_RDMA_READ;
    if ((wr.send_flags & IBEX_SEND_INLINE) && !read && !atomic) {
        uint32_t off = 0;
        for (int i = 0; i < wr.num_sge; ++i) {
            if (wr.sg_list[i].length > soft::kMaxInline - off)
                return fail(IBEX_ERR_INVALID_ARGUMENT, "inline data exceeds %u bytes", soft::kMaxInline);
            std::memcpy(w.inline_data + off, reinterpret_cast<const void *>(static_cast<uintptr_t>(wr.sg_list[i].addr)),
                        wr.sg_list[i].length);
            off += wr.sg_list[i].length;
        }
        w.local.count = off ? 1 : 0;
        w.local.sge[0] = {w.inline_data, off};
        w.local.total = off;
    } else {
        IBEX_TRY(resolve_local(*qp.ctx, wr.sg_list, wr.num_sge, (read || atomic) ? IBEX_ACCESS_LOCAL_WRITE : 0, &w.local));
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
    } else {
        w.remote_addr = wr.wr.rdma.remote_addr;
        w.rkey = wr.wr.rdma.rkey;
    }
    w.wr_id = wr.wr_id;
    w.opcode = static_cast<uint8_t>(wr.opcode);
    w.signaled = (wr.send_flags & IBEX_SEND_SIGNALED) != 0;
    w.imm = wr.imm_data;
    qp.sq.push();
    return IBEX_OK;
}

} // namespace

ibex_status_t post_send(ibex_qp *q, ibex_send_wr_t *wr, ibex_send_wr_t **bad) {
    ShmQp *qp = qp_of(q);
    ShmContext &ctx = *qp->ctx;
    Lock l(ctx.mu);
    // Touches no ring of ours: a quiet context stays quiet (see below).
    if (wr && !wr->next && write_in_place(*qp, *wr)) {
        if (bad) *bad = nullptr;
        return IBEX_OK;
    }
    const uint64_t quiet_before = ctx.quiet_bell.load(std::memory_order_relaxed);
    ctx.unquiet();
    ibex_status_t st = IBEX_OK;
    for (; wr; wr = wr->next)
        if ((st = post_one(*qp, *wr)) != IBEX_OK) break;
    if (bad) *bad = wr;
    transmit(*qp);
    if (qp->sq.empty()) {
        // Everything was done in place (`map`: copied and completed here). This touched no
        // ring of ours, so a context that was quiet still is, and the application's next
        // poll skips the progress pass (and the lock) it would otherwise take.
        ctx.quiet_bell.store(quiet_before, std::memory_order_release);
    } else if (!qp->ack_deadline && qp->timeout) {
        // The ack timer starts for what is still outstanding.
        qp->ack_deadline = now_ns() + (uint64_t(4096) << qp->timeout);
    }
    return st;
}

ibex_status_t post_recv(ibex_qp *q, ibex_recv_wr_t *wr, ibex_recv_wr_t **bad) {
    ShmQp *qp = qp_of(q);
    Lock l(qp->ctx->mu);
    qp->ctx->unquiet();
    return post_recv_list(
        *qp, wr, bad, kMaxSge,
        [&](const ibex_recv_wr_t &w) { complete(*qp, qp->rcq, w.wr_id, IBEX_WC_WR_FLUSH_ERR, IBEX_WC_RECV, 0); },
        [&](const ibex_recv_wr_t &w, RecvWqe &r) {
            return resolve_local(*qp->ctx, w.sg_list, w.num_sge, IBEX_ACCESS_LOCAL_WRITE, &r.local);
        });
}

} // namespace ibex::shm

// Posting work requests: each WR becomes a WQE with its local buffers resolved against
// the context's regions; the requester starts sending at once.
#include <atomic>
#include <cstring>

#include "runtime/base/c_enum.h"
#include "runtime/base/status.h"
#include "transport/recv_posting.h"
#include "transport/send_posting.h"
#include "transport/shm/engine.h"
#include "transport/shm/shm_ops.h"

namespace ibex::shm {

namespace {

// Up to 16 bytes (a flag, a counter, a small message) without a call into libc: at the
// 8-byte ping-pong's scale the call and memcpy's size dispatch are part of the latency.
// Two possibly overlapping stores cover every length of a class.
inline void copy_small_inline(uint8_t *dst, const uint8_t *src, uint32_t len) {
    if (len >= 8 && len <= 16) {
        uint64_t head, tail;
        std::memcpy(&head, src, 8);
        std::memcpy(&tail, src + len - 8, 8);
        std::memcpy(dst, &head, 8);
        std::memcpy(dst + len - 8, &tail, 8);
    } else if (len >= 4 && len < 8) {
        uint32_t head, tail;
        std::memcpy(&head, src, 4);
        std::memcpy(&tail, src + len - 4, 4);
        std::memcpy(dst, &head, 4);
        std::memcpy(dst + len - 4, &tail, 4);
    } else {
        std::memcpy(dst, src, len);
    }
}

// The same WRITE through the QP's open lane, without the context lock (in_place_lane.h);
// false, with nothing done, when the lane is closed or does not cover it. Here, beside
// post_send, so that it is inlined into it.
bool write_in_lane(ShmQp &qp, const ibex_send_wr_t &wr) {
    // As an int: the opcode is not checked yet (c_enum.h).
    if (c_enum_value(wr.opcode) != IBEX_WR_RDMA_WRITE || wr.num_sge != 1 || !wr.sg_list ||
        (wr.send_flags & IBEX_SEND_INLINE))
        return false;
    const ibex_sge_t &sge = wr.sg_list[0];
    uint8_t *dst =
        sge.length ? qp.lane.target(sge.lkey, sge.addr, sge.length, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr) : nullptr;
    if (!dst) return false;
    copy_small_inline(dst, reinterpret_cast<const uint8_t *>(static_cast<uintptr_t>(sge.addr)), sge.length);
    qp.lane.count(sge.length);
    if ((wr.send_flags & IBEX_SEND_SIGNALED) || qp.sig_all) {
        // After the copy: the peer sees the bytes while this waits for the lock.
        Lock l(qp.ctx->mu);
        complete(qp, qp.scq, wr.wr_id, IBEX_WC_SUCCESS, IBEX_WC_RDMA_WRITE, sge.length);
    }
    return true;
}

// Takes WRs off the front of the chain while `take` does them, with a release fence after
// each (a peer that sees a later WRITE's bytes sees the earlier's); true when it took all.
template <class Take>
bool take_in_order(ibex_send_wr_t *&wr, Take take) {
    while (wr && take(*wr)) {
        wr = wr->next;
        std::atomic_thread_fence(std::memory_order_release);
    }
    return !wr;
}

ibex_status_t post_one(ShmQp &qp, const ibex_send_wr_t &wr) {
    SendAdmit admit = SendAdmit::post; // set by admit_send (GCC cannot see that once inlined)
    IBEX_TRY(admit_send(qp, wr, kMaxSge, &admit));
    if (admit == SendAdmit::flush) {
        complete(qp, qp.scq, wr.wr_id, IBEX_WC_WR_FLUSH_ERR, IBEX_WC_SEND, 0);
        return IBEX_OK;
    }
    SendWqe &w = qp.sq.at(qp.sq.tail());
    IBEX_TRY(fill_send_wqe(wr, w, [&](const ibex_sge_t *sg, int n, unsigned need, SgeList *out) {
        return resolve_sges(qp.ctx->mrs, sg, n, need, out);
    }));
    qp.sq.push();
    return IBEX_OK;
}

} // namespace

ibex_status_t post_send(ibex_qp *q, ibex_send_wr_t *wr, ibex_send_wr_t **bad) {
    ShmQp *qp = qp_of(q);
    ShmContext &ctx = *qp->ctx;
    // A posting application is a polling one: a post of `map` does its work in place, and
    // a progress thread that stopped napping would fight it for the lock on every post
    // (a 1 MiB WRITE holds it for the whole copy).
    ctx.note_app_poll();
    if (bad) *bad = nullptr;
    // WRITEs the QP's open lane covers go without the lock, in order, while they can.
    if (take_in_order(wr, [qp](const ibex_send_wr_t &w) { return write_in_lane(*qp, w); })) return IBEX_OK;
    Lock l(ctx.mu);
    ++ctx.copies.locked_posts;
    // Touches no ring of ours: a quiet context stays quiet (see below). A chain goes in
    // place while it can; the rest queues behind what was done, so one QP's WRITEs still
    // land in order.
    if (take_in_order(wr, [qp](const ibex_send_wr_t &w) { return write_in_place(*qp, w); })) return IBEX_OK;
    const uint64_t quiet_before = ctx.quiet_bell.load(std::memory_order_relaxed);
    ctx.unquiet();
    qp->lane.close(); // a WRITE must not pass what is queued now
    ibex_status_t st = IBEX_OK;
    for (; wr; wr = wr->next)
        if ((st = post_one(*qp, *wr)) != IBEX_OK) break;
    if (bad) *bad = wr;
    transmit(*qp);
    if (qp->sq.empty() && qp->gpu_pending.empty()) {
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
            return resolve_sges(qp->ctx->mrs, w.sg_list, w.num_sge, IBEX_ACCESS_LOCAL_WRITE, &r.local);
        });
}

} // namespace ibex::shm

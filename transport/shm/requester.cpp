// The requester: send WQEs leave as fragments on the peer QP's request ring and complete,
// in order, from the responses on this QP's response ring. Nothing is lost between two
// processes of one host, so there is no retransmission: the ack timer only decides when
// a silent peer (killed, or its QP gone) is given up, after retry_cnt + 1 timeouts, as
// an RNIC would. RNR NAKs rewind the send position to the refused fragment.
#include <cstring>
#include <sys/uio.h>

#include "runtime/base/log.h"
#include "transport/shm/engine.h"
#include "transport/soft/codec/roce.h"

namespace ibex::shm {

namespace {

bool is_atomic(uint8_t op) { return op == IBEX_WR_ATOMIC_CMP_AND_SWP || op == IBEX_WR_ATOMIC_FETCH_AND_ADD; }
bool carries_payload(uint8_t op) { return op <= IBEX_WR_SEND_WITH_IMM; } // WRITE(_IMM), SEND(_IMM)

// How often a progress thread looks at queued GPU copies.
constexpr uint64_t kGpuPollNs = 2000;

uint64_t timeout_ns(const ShmQp &qp) { return qp.timeout ? uint64_t(4096) << qp.timeout : 0; }

ibex_wc_opcode_t wc_opcode(uint8_t op) {
    switch (op) {
    case IBEX_WR_RDMA_WRITE:
    case IBEX_WR_RDMA_WRITE_WITH_IMM: return IBEX_WC_RDMA_WRITE;
    case IBEX_WR_RDMA_READ: return IBEX_WC_RDMA_READ;
    case IBEX_WR_ATOMIC_CMP_AND_SWP: return IBEX_WC_COMP_SWAP;
    case IBEX_WR_ATOMIC_FETCH_AND_ADD: return IBEX_WC_FETCH_ADD;
    default: return IBEX_WC_SEND;
    }
}

// Host bytes into the WQE's local buffers, which may be GPU memory.
void scatter_any(ShmQp &qp, const SendWqe &w, uint32_t offset, const uint8_t *src, uint32_t len) {
    iovec iov[kMaxSge];
    const int n = w.local.gather(offset, len, iov);
    bool gpu = false;
    for (int i = 0; !gpu && qp.ctx->device_mrs && i < n; ++i) gpu = is_gpu(*qp.ctx, iov[i].iov_base);
    if (!gpu) return w.local.scatter(offset, src, len);
    const iovec from{const_cast<uint8_t *>(src), len};
    if (copy_iovs_gpu(iov, static_cast<unsigned long>(n), &from, 1, len) != IBEX_OK)
        IBEX_LOG(warn, "shm: copy into GPU memory failed: %s", ibex_last_error());
}

// The oldest WQE fails with `st`; everything behind it is flushed.
void fail_head(ShmQp &qp, ibex_wc_status_t st) {
    if (!qp.sq.empty()) {
        const SendWqe &w = qp.sq.front();
        complete(qp, qp.scq, w.wr_id, st, wc_opcode(w.opcode), 0);
        qp.sq.pop();
    }
    qp_to_error(qp);
}

void on_response(ShmQp &qp, const Response &r, uint64_t now) {
    const Fragment &f = qp.frags[r.seq % kSlots];
    SendWqe &w = qp.sq.at(f.wqe);
    qp.retry_left = qp.retry_cnt;
    qp.ack_deadline = timeout_ns(qp) ? now + timeout_ns(qp) : 0;
    switch (r.kind) {
    case RespKind::kRnr:
        ++qp.ctx->counters.rnr_nak_received;
        if (qp.rnr_retry != 7 && qp.rnr_left-- <= 0) return fail_head(qp, IBEX_WC_RNR_RETRY_EXC_ERR);
        // The responder dropped everything after the refused fragment: send it all again.
        qp.tx_wqe = f.wqe;
        qp.tx_off = f.offset;
        qp.next_seq = qp.una_seq;
        qp.rnr_until = now + uint64_t(roce::rnr_timer_us(r.rnr_code)) * 1000;
        return;
    case RespKind::kNak: return fail_head(qp, static_cast<ibex_wc_status_t>(r.status));
    case RespKind::kAck: break;
    }
    qp.rnr_left = qp.rnr_retry;
    if (w.opcode == IBEX_WR_RDMA_READ && qp.send_mode == Copy::kRing && f.len) {
        scatter_any(qp, w, f.offset, qp.self->resp_data[r.seq % kSlots], f.len);
        ++qp.ctx->copies.ring_ops;
        qp.ctx->copies.ring_bytes += f.len;
    } else if (is_atomic(w.opcode)) {
        scatter_any(qp, w, 0, reinterpret_cast<const uint8_t *>(&r.atomic_orig), 8);
    }
    ++qp.una_seq;
    if (!f.last) return;
    if (w.signaled || qp.sig_all)
        complete(qp, qp.scq, w.wr_id, IBEX_WC_SUCCESS, wc_opcode(w.opcode), is_atomic(w.opcode) ? 8 : w.local.total);
    qp.sq.pop();
    if (qp.sq.empty()) qp.ack_deadline = 0;
}

// Every request in flight is a WRITE whose bytes are already at the peer (placed, or
// empty): nothing the peer has still to move could land after what is placed next.
bool only_placed_in_flight(ShmQp &qp) {
    for (uint64_t seq = qp.una_seq; seq != qp.next_seq; ++seq) {
        const Fragment &f = qp.frags[seq % kSlots];
        const uint8_t op = qp.sq.at(f.wqe).opcode;
        if (f.len || (op != IBEX_WR_RDMA_WRITE && op != IBEX_WR_RDMA_WRITE_WITH_IMM)) return false;
    }
    return true;
}

} // namespace

bool transmit(ShmQp &qp) {
    if (qp.state != IBEX_QPS_RTS || !qp.peer || qp.tx_wqe == qp.sq.tail()) return false;
    if (!qp.peer->ready.load(std::memory_order_acquire) || qp.peer->closed.load(std::memory_order_relaxed)) return false;
    if (qp.rnr_until) {
        if (now_ns() < qp.rnr_until) return false;
        qp.rnr_until = 0;
    }
    qp.send_mode = static_cast<Copy>(qp.peer->mode.load(std::memory_order_relaxed));
    const bool ring = qp.send_mode == Copy::kRing;
    bool sent = false, direct = false;
    while (qp.tx_wqe < qp.sq.tail() && qp.next_seq - qp.una_seq < kSlots && qp.peer->req.can_push()) {
        const SendWqe &w = qp.sq.at(qp.tx_wqe);
        // `map`, nothing before it in flight: the WRITE or READ is one memcpy here, done
        // (or one copy queued on the GPU, done when it is: gpu_pending).
        cuda::CopyFence fence;
        if (qp.tx_off == 0 && qp.next_seq == qp.una_seq && direct_copy(qp, w, false, &fence)) {
            const bool signaled = w.signaled || qp.sig_all;
            if (!fence.empty() || !qp.gpu_pending.empty())
                qp.gpu_pending.push_back({w.wr_id, w.local.total, w.opcode, signaled, fence}); // in order
            else if (signaled)
                complete(qp, qp.scq, w.wr_id, IBEX_WC_SUCCESS, wc_opcode(w.opcode), w.local.total);
            qp.sq.pop();
            ++qp.tx_wqe;
            if (qp.sq.empty()) qp.ack_deadline = 0;
            direct = true;
            continue;
        }
        // A request must not pass the GPU copies before it: its effect (a receive, an
        // immediate) would show before their bytes.
        if (!qp.gpu_pending.empty()) break;
        const bool atomic = is_atomic(w.opcode);
        const uint32_t total = atomic ? 8 : w.local.total;
        // `map`, a WRITE with immediate: the payload is copied into the peer's mapping here,
        // and the request that follows carries only the immediate (its receive and its
        // completion are the peer's). Only behind requests whose data is already in place,
        // so a later message's bytes never land before an earlier one's.
        const bool placed = qp.tx_off == 0 && w.opcode == IBEX_WR_RDMA_WRITE_WITH_IMM && only_placed_in_flight(qp) &&
                            direct_copy(qp, w, true);
        uint32_t len = placed ? 0 : total - qp.tx_off;
        if (ring && len > kSlotBytes) len = kSlotBytes;
        Request &r = qp.peer->req.next();
        r.seq = qp.next_seq;
        r.opcode = w.opcode;
        r.first = qp.tx_off == 0;
        r.last = placed || qp.tx_off + len == total;
        r.imm = w.imm;
        r.rkey = w.rkey;
        r.len = len;
        r.offset = qp.tx_off;
        r.msg_len = total;
        r.msg_addr = w.remote_addr;
        r.compare_add = w.compare_add;
        r.swap = w.swap;
        r.nsge = 0;
        r.mapped = 0;
        r.gpu = 0;
        if (!atomic && len) {
            iovec iov[kMaxSge];
            const int n = w.local.gather(qp.tx_off, len, iov);
            for (int i = 0; i < n; ++i) r.sge[i] = {reinterpret_cast<uintptr_t>(iov[i].iov_base), iov[i].iov_len};
            r.nsge = static_cast<uint8_t>(n);
            // `map`: the target copies straight from/to our allocation when it can map it.
            bool mapped = !ring && qp.forced != static_cast<uint32_t>(Copy::kCma);
            for (int i = 0; mapped && i < n; ++i)
                mapped = shared_alloc_of(qp, iov[i].iov_base, iov[i].iov_len, &r.sge[i].alloc, &r.sge[i].alloc_off);
            r.mapped = mapped;
            for (int i = 0; !r.gpu && qp.ctx->device_mrs && i < n; ++i) r.gpu = is_gpu(*qp.ctx, iov[i].iov_base);
            if (ring && carries_payload(w.opcode)) {
                uint8_t *dst = qp.peer->req_data[r.seq % kSlots];
                for (int i = 0; i < n; ++i) {
                    if (r.gpu)
                        copy_gpu(dst, iov[i].iov_base, iov[i].iov_len);
                    else
                        std::memcpy(dst, iov[i].iov_base, iov[i].iov_len);
                    dst += iov[i].iov_len;
                }
                ++qp.ctx->copies.ring_ops;
                qp.ctx->copies.ring_bytes += len;
            }
        }
        qp.frags[r.seq % kSlots] = {qp.tx_wqe, qp.tx_off, len, r.last != 0};
        qp.peer->req.publish();
        ++qp.next_seq;
        qp.tx_off += len;
        if (r.last) {
            ++qp.tx_wqe;
            qp.tx_off = 0;
        }
        ++qp.ctx->counters.tx_packets;
        qp.ctx->counters.tx_bytes += len;
        sent = true;
    }
    if (sent) ring_doorbell(qp.peer_ctx);
    return sent || direct;
}

bool requester_progress(ShmQp &qp, uint64_t &now) {
    bool did = false;
    if (qp.self && qp.state != IBEX_QPS_RESET) {
        while (const Response *p = qp.self->resp.peek()) {
            const Response r = *p;
            did = true;
            if (qp.state == IBEX_QPS_RTS && r.seq == qp.una_seq && qp.una_seq != qp.next_seq) {
                if (!now) now = now_ns();
                on_response(qp, r, now);
            }
            qp.self->resp.pop(); // after on_response: the READ payload slot stays ours until then
        }
    }
    // The GPU copies queued for WRITEs and READs complete their WRs in order.
    while (!qp.gpu_pending.empty() && cuda::copies_done(qp.gpu_pending.front().fence)) {
        const GpuPending &g = qp.gpu_pending.front();
        if (g.signaled) complete(qp, qp.scq, g.wr_id, IBEX_WC_SUCCESS, wc_opcode(g.opcode), g.len);
        qp.gpu_pending.pop_front();
        did = true;
    }
    if (qp.state != IBEX_QPS_RTS || qp.sq.empty()) return did;
    if (!now) now = now_ns();
    if (qp.ack_deadline && now >= qp.ack_deadline) {
        ++qp.ctx->counters.local_ack_timeout_err;
        if (qp.retry_left-- <= 0) {
            fail_head(qp, IBEX_WC_RETRY_EXC_ERR);
            return true;
        }
        qp.ack_deadline = now + timeout_ns(qp);
        did = true;
    }
    // timeout 0 waits forever for a live peer, but not for a dead one.
    if (!qp.timeout && qp.peer && now >= qp.liveness_at) {
        qp.liveness_at = now + 100'000'000;
        if (!process_alive(qp.peer_pid) || qp.peer->closed.load(std::memory_order_relaxed)) {
            fail_head(qp, IBEX_WC_RETRY_EXC_ERR);
            return true;
        }
    }
    return transmit(qp) || did;
}

uint64_t requester_deadline(const ShmQp &qp) {
    if (!qp.gpu_pending.empty()) return now_ns() + kGpuPollNs; // no doorbell rings for the GPU
    if (qp.state != IBEX_QPS_RTS || qp.sq.empty()) return 0;
    uint64_t d = qp.ack_deadline;
    if (qp.rnr_until && (!d || qp.rnr_until < d)) d = qp.rnr_until;
    if (!qp.timeout && (!d || qp.liveness_at < d)) d = qp.liveness_at;
    return d;
}

} // namespace ibex::shm

// The responder: serves the peer's requests from this QP's ring, in order, against this
// context's memory regions. The target does the copy (cross-memory attach from or into the
// initiator, or through the per-slot data areas under `ring`), so an rkey, bounds or
// access violation is found before any byte of target memory moves.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/uio.h>

#include "runtime/base/log.h"
#include "transport/shm/engine.h"

namespace ibex::shm {

namespace {

constexpr int kRnr = -1;

// Advances an iovec array past `done` bytes.
void advance(iovec *&v, unsigned long &n, size_t done) {
    while (n && done >= v->iov_len) {
        done -= v->iov_len;
        ++v;
        --n;
    }
    if (n && done) {
        v->iov_base = static_cast<uint8_t *>(v->iov_base) + done;
        v->iov_len -= done;
    }
}

} // namespace

bool cma_all(bool to_peer, uint32_t pid, iovec *local, unsigned long nl, iovec *remote, unsigned long nr, size_t len) {
    while (len) {
        const ssize_t got = to_peer ? process_vm_writev(static_cast<pid_t>(pid), local, nl, remote, nr, 0)
                                    : process_vm_readv(static_cast<pid_t>(pid), local, nl, remote, nr, 0);
        if (got <= 0) {
            IBEX_LOG(debug, "shm: process_vm_%sv from pid %u: %s", to_peer ? "write" : "read", pid,
                     got < 0 ? std::strerror(errno) : "no progress");
            return false;
        }
        len -= static_cast<size_t>(got);
        advance(local, nl, static_cast<size_t>(got));
        advance(remote, nr, static_cast<size_t>(got));
    }
    return true;
}

namespace {

void remote_iov(const Request &r, iovec *out) {
    for (int i = 0; i < r.nsge; ++i) out[i] = {reinterpret_cast<void *>(static_cast<uintptr_t>(r.sge[i].addr)), r.sge[i].len};
}

// Copies `len` bytes from one iovec list to another.
void copy_iovs(iovec *dst, unsigned long nd, iovec *src, unsigned long ns, size_t len) {
    while (len && nd && ns) {
        const size_t n = std::min({len, dst->iov_len, src->iov_len});
        std::memcpy(dst->iov_base, src->iov_base, n);
        advance(dst, nd, n);
        advance(src, ns, n);
        len -= n;
    }
}

// `map`: the initiator's buffers of the fragment as they lie in this process, when it
// sent us every allocation they are in.
bool mapped_iov(ShmQp &qp, const Request &r, iovec *out) {
    if (!r.mapped || qp.forced == static_cast<uint32_t>(Copy::kCma)) return false;
    for (int i = 0; i < r.nsge; ++i) {
        uint8_t *p = peer_mapping(qp, r.sge[i].alloc, r.sge[i].alloc_off, r.sge[i].len);
        if (!p) return false;
        out[i] = {p, r.sge[i].len};
    }
    note_copy_choice(Copy::kMap, "ibex_mem_alloc memory, mapped from the peer's memfd");
    return true;
}

// Some of the n buffers are GPU memory of this process.
bool any_gpu(const ShmContext &ctx, const iovec *v, int n) {
    for (int i = 0; ctx.device_mrs && i < n; ++i)
        if (is_gpu(ctx, v[i].iov_base)) return true;
    return false;
}

// A host staging area of at least `len` bytes for GPU memory that cross-memory attach
// cannot reach.
uint8_t *bounce(ShmContext &ctx, size_t len) {
    if (ctx.bounce.size() < len) ctx.bounce.resize(len);
    return ctx.bounce.data();
}

// Initiator GPU memory its target could not map: nothing here can reach it.
bool unreachable_gpu(const Request &r) {
    IBEX_LOG(warn, "shm: the initiator's buffer is GPU memory that this process cannot map (no CUDA IPC handle, or "
                   "IBEX_SHM_COPY=cma); request %llu refused",
             static_cast<unsigned long long>(r.seq));
    return false;
}

// The fragment's payload into local buffers `dst` (n iovecs, r.len bytes in all).
bool move_in(ShmQp &qp, const Request &r, iovec *dst, int n) {
    if (!r.len) return true;
    CopyStats &s = qp.ctx->copies;
    const bool gpu_dst = any_gpu(*qp.ctx, dst, n);
    if (iovec src[kMaxSge]; (r.gpu || qp.serve_mode != Copy::kRing) && mapped_iov(qp, r, src)) {
        if (r.gpu || gpu_dst) {
            if (copy_iovs_gpu(dst, static_cast<unsigned long>(n), src, r.nsge, r.len) != IBEX_OK) return false;
        } else {
            copy_iovs(dst, static_cast<unsigned long>(n), src, r.nsge, r.len);
        }
        ++s.map_ops;
        s.map_bytes += r.len;
        return true;
    }
    if (qp.serve_mode == Copy::kRing) {
        iovec src{qp.self->req_data[r.seq % kSlots], r.len};
        if (gpu_dst) {
            if (copy_iovs_gpu(dst, static_cast<unsigned long>(n), &src, 1, r.len) != IBEX_OK) return false;
        } else {
            copy_iovs(dst, static_cast<unsigned long>(n), &src, 1, r.len);
        }
        ++s.ring_ops;
        s.ring_bytes += r.len;
        return true;
    }
    if (r.gpu) return unreachable_gpu(r);
    iovec rem[kMaxSge];
    remote_iov(r, rem);
    if (gpu_dst) {
        // Into host memory first, then one copy up to the GPU.
        iovec tmp{bounce(*qp.ctx, r.len), r.len};
        iovec from = tmp;
        if (!cma_all(false, qp.peer_pid, &tmp, 1, rem, r.nsge, r.len) ||
            copy_iovs_gpu(dst, static_cast<unsigned long>(n), &from, 1, r.len) != IBEX_OK)
            return false;
    } else if (!cma_all(false, qp.peer_pid, dst, static_cast<unsigned long>(n), rem, r.nsge, r.len)) {
        return false;
    }
    ++s.cma_ops;
    s.cma_bytes += r.len;
    return true;
}

// r.len bytes at `src` out to the initiator's buffers (a READ).
bool move_out(ShmQp &qp, const Request &r, uint8_t *src) {
    if (!r.len) return true;
    CopyStats &s = qp.ctx->copies;
    iovec loc{src, r.len};
    const bool gpu_src = any_gpu(*qp.ctx, &loc, 1);
    if (qp.serve_mode == Copy::kRing) {
        if (gpu_src) {
            if (copy_gpu(qp.peer->resp_data[r.seq % kSlots], src, r.len) != IBEX_OK) return false;
        } else {
            std::memcpy(qp.peer->resp_data[r.seq % kSlots], src, r.len);
        }
        ++s.ring_ops;
        s.ring_bytes += r.len;
        return true;
    }
    if (iovec dst[kMaxSge]; mapped_iov(qp, r, dst)) {
        if (r.gpu || gpu_src) {
            if (copy_iovs_gpu(dst, r.nsge, &loc, 1, r.len) != IBEX_OK) return false;
        } else {
            copy_iovs(dst, r.nsge, &loc, 1, r.len);
        }
        ++s.map_ops;
        s.map_bytes += r.len;
        return true;
    }
    if (r.gpu) return unreachable_gpu(r);
    iovec rem[kMaxSge];
    remote_iov(r, rem);
    if (gpu_src) {
        // Down to host memory first, then out.
        uint8_t *tmp = bounce(*qp.ctx, r.len);
        if (copy_gpu(tmp, src, r.len) != IBEX_OK) return false;
        loc.iov_base = tmp;
    }
    if (!cma_all(true, qp.peer_pid, &loc, 1, rem, r.nsge, r.len)) return false;
    ++s.cma_ops;
    s.cma_bytes += r.len;
    return true;
}

// The target range of the message, checked in full on every fragment; nullptr when the
// rkey, the bounds or the access rights refuse it.
uint8_t *target(ShmQp &qp, const Request &r, unsigned right) {
    if (!(qp.access & right)) return nullptr;
    return qp.ctx->mrs.resolve(r.rkey, r.msg_addr, r.msg_len, right);
}

void recv_done(ShmQp &qp, const Request &r, ibex_wc_status_t st, ibex_wc_opcode_t op, bool imm) {
    ibex_wc_t wc{};
    wc.wr_id = qp.rq.front().wr_id;
    wc.status = st;
    wc.opcode = op;
    wc.byte_len = r.msg_len;
    wc.qp_num = qp.qp_num;
    wc.src_qp = qp.dest.qpn;
    if (imm && st == IBEX_WC_SUCCESS) {
        wc.imm_data = r.imm;
        wc.wc_flags = IBEX_WC_WITH_IMM;
    }
    qp.rq.pop();
    qp.rcq->push(wc);
}

// Serves one in-order request: IBEX_WC_SUCCESS, kRnr, or the status the requester gets.
int serve(ShmQp &qp, const Request &r, Response &resp) {
    switch (r.opcode) {
    case IBEX_WR_RDMA_WRITE:
    case IBEX_WR_RDMA_WRITE_WITH_IMM: {
        uint8_t *dst = nullptr;
        if (r.msg_len && !(dst = target(qp, r, IBEX_ACCESS_REMOTE_WRITE))) return IBEX_WC_REM_ACCESS_ERR;
        const bool imm = r.opcode == IBEX_WR_RDMA_WRITE_WITH_IMM && r.last;
        if (imm && qp.rq.empty()) return kRnr;
        iovec d{dst + r.offset, r.len};
        if (!move_in(qp, r, &d, 1)) return IBEX_WC_REM_OP_ERR;
        if (imm) recv_done(qp, r, IBEX_WC_SUCCESS, IBEX_WC_RECV_RDMA_WITH_IMM, true);
        return IBEX_WC_SUCCESS;
    }
    case IBEX_WR_SEND:
    case IBEX_WR_SEND_WITH_IMM: {
        if (r.first) {
            if (qp.rq.empty()) return kRnr;
            if (r.msg_len > qp.rq.front().local.total) {
                recv_done(qp, r, IBEX_WC_LOC_LEN_ERR, IBEX_WC_RECV, false);
                return IBEX_WC_REM_INV_REQ_ERR;
            }
            qp.in_send = true;
        }
        if (!qp.in_send || qp.rq.empty()) return IBEX_WC_REM_INV_REQ_ERR;
        iovec d[kMaxSge];
        const int n = qp.rq.front().local.gather(r.offset, r.len, d);
        if (!move_in(qp, r, d, n)) return IBEX_WC_REM_OP_ERR;
        if (r.last) {
            recv_done(qp, r, IBEX_WC_SUCCESS, IBEX_WC_RECV, r.opcode == IBEX_WR_SEND_WITH_IMM);
            qp.in_send = false;
        }
        return IBEX_WC_SUCCESS;
    }
    case IBEX_WR_RDMA_READ: {
        uint8_t *src = nullptr;
        if (r.msg_len && !(src = target(qp, r, IBEX_ACCESS_REMOTE_READ))) return IBEX_WC_REM_ACCESS_ERR;
        return move_out(qp, r, src + r.offset) ? IBEX_WC_SUCCESS : IBEX_WC_REM_OP_ERR;
    }
    case IBEX_WR_ATOMIC_CMP_AND_SWP:
    case IBEX_WR_ATOMIC_FETCH_AND_ADD: {
        uint8_t *p = (r.msg_addr & 7) ? nullptr : target(qp, r, IBEX_ACCESS_REMOTE_ATOMIC);
        if (!p) return IBEX_WC_REM_ACCESS_ERR;
        if (is_gpu(*qp.ctx, p)) {
            // GPU memory: read, modify, write back, under the context lock that orders every
            // atomic this target serves (not atomic against the GPU's own kernels, as
            // PCIe atomics would be on an RNIC).
            uint64_t word = 0;
            if (copy_gpu(&word, p, 8) != IBEX_OK) return IBEX_WC_REM_OP_ERR;
            resp.atomic_orig = word;
            word = r.opcode == IBEX_WR_ATOMIC_CMP_AND_SWP ? (word == r.compare_add ? r.swap : word) : word + r.compare_add;
            return copy_gpu(p, &word, 8) == IBEX_OK ? IBEX_WC_SUCCESS : IBEX_WC_REM_OP_ERR;
        }
        auto *word = reinterpret_cast<uint64_t *>(p);
        uint64_t orig = r.compare_add;
        if (r.opcode == IBEX_WR_ATOMIC_CMP_AND_SWP)
            __atomic_compare_exchange_n(word, &orig, r.swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        else
            orig = __atomic_fetch_add(word, r.compare_add, __ATOMIC_SEQ_CST);
        resp.atomic_orig = orig;
        return IBEX_WC_SUCCESS;
    }
    default: return IBEX_WC_REM_INV_REQ_ERR;
    }
}

} // namespace

// Payload bytes one pass serves before it lets go of the context's lock: the application's
// posts and polls wait for it meanwhile.
constexpr size_t kServeBurst = 256 << 10;

bool serve_requests(ShmQp &qp) {
    if (!qp.self || !qp.peer || qp.state < IBEX_QPS_RTR) return false;
    bool did = false;
    size_t served = 0;
    while (const Request *p = qp.self->req.peek()) {
        if (qp.state == IBEX_QPS_ERR || p->seq != qp.epsn) {
            // Dropped unanswered: an ERR QP serves nothing; a fragment behind a refused
            // one (RNR) comes again after it.
            if (qp.state != IBEX_QPS_ERR) ++qp.ctx->counters.out_of_sequence;
            qp.self->req.pop();
            did = true;
            continue;
        }
        if (!qp.peer->resp.can_push()) break; // the requester's window makes this rare
        Response &resp = qp.peer->resp.next();
        resp = Response{};
        resp.seq = p->seq;
        resp.len = p->len;
        const int st = serve(qp, *p, resp);
        ++qp.ctx->counters.rx_packets;
        qp.ctx->counters.rx_bytes += p->len;
        if (st == kRnr) {
            resp.kind = RespKind::kRnr;
            resp.rnr_code = qp.min_rnr_timer;
            ++qp.ctx->counters.rnr_nak_sent;
        } else {
            ++qp.epsn;
            if (st != IBEX_WC_SUCCESS) {
                resp.kind = RespKind::kNak;
                resp.status = static_cast<uint16_t>(st);
                if (st == IBEX_WC_REM_ACCESS_ERR) ++qp.ctx->counters.remote_access_errors;
            }
        }
        qp.peer->resp.publish();
        qp.self->req.pop();
        did = true;
        if (st != kRnr && st != IBEX_WC_SUCCESS) qp_to_error(qp);
        served += p->len;
        if (served >= kServeBurst) break;
    }
    if (did) ring_doorbell(qp.peer_ctx);
    return did;
}

} // namespace ibex::shm

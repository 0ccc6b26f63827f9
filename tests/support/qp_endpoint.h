// One RC endpoint over the public C API: a context, a PD, a CQ, a QP (more on request)
// and a registered buffer, with one-WR helpers. Shared by the tests (endpoint.h adds the
// gtest checks), the micro-benchmarks and the incast driver, so it uses no test
// framework: calls return the status and ibex_last_error() says why one failed.
#pragma once

#include <ibex/ibex.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/base/status.h"

namespace ibex::test {

// One signaled (or not) WR of one SGE on `qp`: an RDMA op or SEND from [local, +len)
// under lkey to remote_addr under rkey; the post's status.
inline ibex_status_t post_one_wr(ibex_qp_t *qp, ibex_wr_opcode_t op, uint64_t wr_id, uint64_t local, uint32_t len,
                                 uint32_t lkey, uint64_t remote_addr, uint32_t rkey, bool signaled = true,
                                 uint32_t imm = 0) {
    ibex_sge_t s{local, len, lkey};
    ibex_send_wr_t wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = len ? 1 : 0;
    wr.opcode = op;
    wr.send_flags = signaled ? IBEX_SEND_SIGNALED : 0;
    wr.imm_data = imm;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    return ibex_post_send(qp, &wr, nullptr);
}

// One signaled atomic on `qp`; its 8-byte result lands at `local` under lkey.
inline ibex_status_t post_atomic_wr(ibex_qp_t *qp, ibex_wr_opcode_t op, uint64_t wr_id, uint64_t local, uint32_t lkey,
                                    uint64_t remote_addr, uint32_t rkey, uint64_t compare_add, uint64_t swap = 0) {
    ibex_sge_t s{local, 8, lkey};
    ibex_send_wr_t wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBEX_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = remote_addr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = compare_add;
    wr.wr.atomic.swap = swap;
    return ibex_post_send(qp, &wr, nullptr);
}

inline constexpr unsigned kAllAccess =
    IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ | IBEX_ACCESS_REMOTE_ATOMIC;

struct QpEndpoint {
    ibex_context_t *ctx = nullptr;
    ibex_pd_t *pd = nullptr;
    ibex_cq_t *cq = nullptr;
    ibex_qp_t *qp = nullptr;
    ibex_mr_t *mr = nullptr;
    std::vector<uint8_t> buf;
    std::vector<ibex_qp_t *> more_qps; // add_qp()'s, on the same PD and CQ
    // Knobs read by open() and add_qp(); change them before calling it.
    uint32_t max_send_wr = 2048;
    uint32_t max_recv_wr = 2048;
    unsigned mr_access = kAllAccess;
    // What connect() sets beyond ibex_qp_connect's defaults (ibex_qp_connect_attr).
    ibex_qp_attr_t connect_attr = IBEX_QP_ATTR_INIT;
    unsigned connect_mask = 0;

    // Opens `device` (context attributes `attr`, NULL: defaults) and creates the PD, a CQ
    // of `cqe` entries, the QP (send and receive on that CQ) and a zeroed buffer of
    // `bytes`, registered. Stops at the first failure: ok() then says false, and close()
    // (or the destructor) releases what was made.
    ibex_status_t open(size_t bytes, const char *device, const ibex_context_attr_t *attr = nullptr,
                       int cqe = 4096) {
        IBEX_TRY(ibex_open_device(device, attr, &ctx));
        IBEX_TRY(ibex_alloc_pd(ctx, &pd));
        IBEX_TRY(ibex_create_cq(ctx, cqe, &cq));
        IBEX_TRY(create_qp(&qp));
        buf.assign(bytes, 0);
        return ibex_reg_mr(pd, buf.data(), buf.size(), mr_access, &mr);
    }
    // Another QP of this endpoint, like the first.
    ibex_status_t add_qp(ibex_qp_t **out) {
        IBEX_TRY(create_qp(out));
        more_qps.push_back(*out);
        return IBEX_OK;
    }
    // The i-th QP: the first, then add_qp()'s in order.
    ibex_qp_t *qp_at(size_t i) const { return i == 0 ? qp : more_qps[i - 1]; }
    bool ok() const { return ctx && pd && cq && qp && mr; }
    ibex_status_t local_addr(ibex_ep_addr_t *out) const { return ibex_qp_local_addr(qp, out); }
    uint64_t va(size_t off = 0) const { return reinterpret_cast<uintptr_t>(buf.data()) + off; }
    void close() {
        if (mr) ibex_dereg_mr(mr);
        if (qp) ibex_destroy_qp(qp);
        for (ibex_qp_t *q : more_qps) ibex_destroy_qp(q);
        if (cq) ibex_destroy_cq(cq);
        if (pd) ibex_dealloc_pd(pd);
        if (ctx) ibex_close_device(ctx);
        mr = nullptr;
        qp = nullptr;
        more_qps.clear();
        cq = nullptr;
        pd = nullptr;
        ctx = nullptr;
    }
    ~QpEndpoint() { close(); }

    ibex_status_t query_counters(ibex_counters_t *out) const {
        *out = {};
        out->size = sizeof *out;
        return ibex_query_counters(ctx, out);
    }
    // The requester's timers the next connect() sets (IB encodings; see ibex_qp_attr_t):
    // verbs takes them at RTR -> RTS only, so they are chosen before connecting.
    void choose_timers(uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry) {
        connect_attr.timeout = timeout;
        connect_attr.retry_cnt = retry_cnt;
        connect_attr.rnr_retry = rnr_retry;
        connect_mask |= IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY;
    }
    // Brings the first QP up towards `remote` with the chosen attributes.
    ibex_status_t connect(const ibex_ep_addr_t &remote) {
        return ibex_qp_connect_attr(qp, &remote, &connect_attr, connect_mask);
    }
    ibex_status_t set_min_rnr_timer(uint8_t code) {
        ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
        a.min_rnr_timer = code;
        return ibex_modify_qp(qp, &a, IBEX_QP_MIN_RNR_TIMER);
    }
    // One-WR helpers over this endpoint's buffer and first QP; they return the post status.
    ibex_status_t post_rdma(ibex_wr_opcode_t op, uint64_t wr_id, size_t off, uint32_t len, uint64_t remote_addr,
                            uint32_t rkey, bool signaled = true, uint32_t imm = 0) {
        return post_one_wr(qp, op, wr_id, va(off), len, ibex_mr_lkey(mr), remote_addr, rkey, signaled, imm);
    }
    ibex_status_t post_atomic(ibex_wr_opcode_t op, uint64_t wr_id, size_t off, uint64_t remote_addr, uint32_t rkey,
                              uint64_t compare_add, uint64_t swap = 0) {
        return post_atomic_wr(qp, op, wr_id, va(off), ibex_mr_lkey(mr), remote_addr, rkey, compare_add, swap);
    }
    ibex_status_t post_recv(uint64_t wr_id, size_t off, uint32_t len) {
        ibex_sge_t s{va(off), len, ibex_mr_lkey(mr)};
        ibex_recv_wr_t wr{};
        wr.wr_id = wr_id;
        wr.sg_list = &s;
        wr.num_sge = len ? 1 : 0;
        return ibex_post_recv(qp, &wr, nullptr);
    }

    // Polls until n completions arrive or the deadline passes; returns what arrived.
    std::vector<ibex_wc_t> wait(size_t n, int timeout_ms = 10000) {
        std::vector<ibex_wc_t> out;
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        ibex_wc_t wc[64];
        while (out.size() < n && std::chrono::steady_clock::now() < end) {
            int got = 0;
            if (ibex_poll_cq(cq, 64, wc, &got) != IBEX_OK) break;
            out.insert(out.end(), wc, wc + got);
        }
        return out;
    }

private:
    ibex_status_t create_qp(ibex_qp_t **out) {
        ibex_qp_init_attr_t a = IBEX_QP_INIT_ATTR_INIT;
        a.send_cq = cq;
        a.recv_cq = cq;
        a.max_send_wr = max_send_wr;
        a.max_recv_wr = max_recv_wr;
        return ibex_create_qp(pd, &a, out);
    }
};

// Connects the first QPs of a and b to each other.
inline ibex_status_t connect_endpoints(QpEndpoint &a, QpEndpoint &b) {
    ibex_ep_addr_t aa{}, ba{};
    IBEX_TRY(a.local_addr(&aa));
    IBEX_TRY(b.local_addr(&ba));
    IBEX_TRY(a.connect(ba));
    return b.connect(aa);
}

inline ibex_sge_t sge(const QpEndpoint &e, size_t off, uint32_t len) { return {e.va(off), len, ibex_mr_lkey(e.mr)}; }

} // namespace ibex::test

// Test helper: one RC endpoint (context, PD, CQ, QP and a registered buffer) over the
// soft provider, plus small wrappers that fail the test with ibex_last_error() text.
#pragma once

#include <gtest/gtest.h>
#include <ibex/ibex.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace ibex::test {

#define IBEX_ASSERT_OK(expr)                                                                          \
    do {                                                                                              \
        ibex_status_t _st = (expr);                                                                   \
        ASSERT_EQ(_st, IBEX_OK) << #expr << ": " << ibex_strerror(_st) << ": " << ibex_last_error();  \
    } while (0)

struct Endpoint {
    ibex_context_t *ctx = nullptr;
    ibex_pd_t *pd = nullptr;
    ibex_cq_t *cq = nullptr;
    ibex_qp_t *qp = nullptr;
    ibex_mr_t *mr = nullptr;
    std::vector<uint8_t> buf;

    void open(size_t bytes, const char *device = "udp:lo", int cqe = 4096) {
        IBEX_ASSERT_OK(ibex_open_device(device, nullptr, &ctx));
        IBEX_ASSERT_OK(ibex_alloc_pd(ctx, &pd));
        IBEX_ASSERT_OK(ibex_create_cq(ctx, cqe, &cq));
        ibex_qp_init_attr_t a = IBEX_QP_INIT_ATTR_INIT;
        a.send_cq = cq;
        a.recv_cq = cq;
        a.max_send_wr = 2048;
        a.max_recv_wr = 2048;
        IBEX_ASSERT_OK(ibex_create_qp(pd, &a, &qp));
        buf.assign(bytes, 0);
        IBEX_ASSERT_OK(ibex_reg_mr(pd, buf.data(), buf.size(),
                                   IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ |
                                       IBEX_ACCESS_REMOTE_ATOMIC,
                                   &mr));
    }
    ibex_ep_addr_t addr() {
        ibex_ep_addr_t a{};
        EXPECT_EQ(ibex_qp_local_addr(qp, &a), IBEX_OK);
        return a;
    }
    uint64_t va(size_t off = 0) const { return reinterpret_cast<uintptr_t>(buf.data()) + off; }
    void close() {
        if (mr) ibex_dereg_mr(mr);
        if (qp) ibex_destroy_qp(qp);
        if (cq) ibex_destroy_cq(cq);
        if (pd) ibex_dealloc_pd(pd);
        if (ctx) ibex_close_device(ctx);
        mr = nullptr;
        qp = nullptr;
        cq = nullptr;
        pd = nullptr;
        ctx = nullptr;
    }
    ~Endpoint() { close(); }

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
};

inline void connect_pair(Endpoint &a, Endpoint &b) {
    ibex_ep_addr_t aa = a.addr(), ba = b.addr();
    IBEX_ASSERT_OK(ibex_qp_connect(a.qp, &ba));
    IBEX_ASSERT_OK(ibex_qp_connect(b.qp, &aa));
}

inline ibex_sge_t sge(const Endpoint &e, size_t off, uint32_t len) {
    return {e.va(off), len, ibex_mr_lkey(e.mr)};
}

} // namespace ibex::test

// Test helper: one RC endpoint (context, PD, CQ, QP and a registered buffer) over the
// soft provider, plus small wrappers that fail the test with ibex_last_error() text.
#pragma once

#include <gtest/gtest.h>
#include <ibex/ibex.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace ibex::test {

// The device tests open: IBEX_TEST_DEVICE, else "udp:lo". "{pid}" in it becomes the test
// process's id, so parallel tests get their own memif socket (dpdk:memif:/tmp/x-{pid}.sock).
// Resolved at static initialisation, before any test forks, so children agree with it.
inline std::string resolve_test_device() {
    const char *env = std::getenv("IBEX_TEST_DEVICE");
    std::string d = env && *env ? env : "udp:lo";
    for (size_t at; (at = d.find("{pid}")) != std::string::npos;) d.replace(at, 5, std::to_string(getpid()));
    return d;
}
inline const std::string kTestDevice = resolve_test_device();
inline const char *test_device() { return kTestDevice.c_str(); }
// False where one of two contexts of one process cannot be closed and opened again while
// the other stays (dpdk memif: both ends of one socket in one process).
inline bool test_device_reopens() { return kTestDevice.compare(0, 10, "dpdk:memif") != 0; }

#define IBEX_ASSERT_OK(expr)                                                                          \
    do {                                                                                              \
        ibex_status_t _st = (expr);                                                                   \
        ASSERT_EQ(_st, IBEX_OK) << #expr << ": " << ibex_strerror(_st) << ": " << ibex_last_error();  \
    } while (0)

inline constexpr unsigned kAllAccess =
    IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ | IBEX_ACCESS_REMOTE_ATOMIC;

struct Endpoint {
    ibex_context_t *ctx = nullptr;
    ibex_pd_t *pd = nullptr;
    ibex_cq_t *cq = nullptr;
    ibex_qp_t *qp = nullptr;
    ibex_mr_t *mr = nullptr;
    std::vector<uint8_t> buf;
    // Knobs read by open(); change them before calling it.
    uint32_t max_send_wr = 2048;
    uint32_t max_recv_wr = 2048;
    unsigned mr_access = kAllAccess;

    void open(size_t bytes, const char *device = nullptr, int cqe = 4096) {
        if (!device) device = test_device();
        IBEX_ASSERT_OK(ibex_open_device(device, nullptr, &ctx));
        IBEX_ASSERT_OK(ibex_alloc_pd(ctx, &pd));
        IBEX_ASSERT_OK(ibex_create_cq(ctx, cqe, &cq));
        ibex_qp_init_attr_t a = IBEX_QP_INIT_ATTR_INIT;
        a.send_cq = cq;
        a.recv_cq = cq;
        a.max_send_wr = max_send_wr;
        a.max_recv_wr = max_recv_wr;
        IBEX_ASSERT_OK(ibex_create_qp(pd, &a, &qp));
        buf.assign(bytes, 0);
        IBEX_ASSERT_OK(ibex_reg_mr(pd, buf.data(), buf.size(), mr_access, &mr));
    }
    bool ok() const { return ctx && pd && cq && qp && mr; }
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

    ibex_counters_t counters() {
        ibex_counters_t c{};
        c.size = sizeof c;
        EXPECT_EQ(ibex_query_counters(ctx, &c), IBEX_OK) << ibex_last_error();
        return c;
    }
    ibex_qp_state_t qp_state() {
        ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
        EXPECT_EQ(ibex_query_qp(qp, &a), IBEX_OK) << ibex_last_error();
        return a.qp_state;
    }
    // RTS -> RTS change of the requester's timers (IB encodings; see ibex_qp_attr_t).
    ibex_status_t set_timers(uint8_t timeout, uint8_t retry_cnt, uint8_t rnr_retry) {
        ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
        a.qp_state = IBEX_QPS_RTS;
        a.timeout = timeout;
        a.retry_cnt = retry_cnt;
        a.rnr_retry = rnr_retry;
        return ibex_modify_qp(qp, &a, IBEX_QP_STATE | IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY);
    }
    ibex_status_t set_min_rnr_timer(uint8_t code) {
        ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
        a.min_rnr_timer = code;
        return ibex_modify_qp(qp, &a, IBEX_QP_MIN_RNR_TIMER);
    }
    // One-WR helpers over this endpoint's buffer; they return the post status.
    ibex_status_t post_rdma(ibex_wr_opcode_t op, uint64_t wr_id, size_t off, uint32_t len, uint64_t remote_addr,
                            uint32_t rkey, bool signaled = true, uint32_t imm = 0) {
        ibex_sge_t s{va(off), len, ibex_mr_lkey(mr)};
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
    ibex_status_t post_atomic(ibex_wr_opcode_t op, uint64_t wr_id, size_t off, uint64_t remote_addr, uint32_t rkey,
                              uint64_t compare_add, uint64_t swap = 0) {
        ibex_sge_t s{va(off), 8, ibex_mr_lkey(mr)};
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

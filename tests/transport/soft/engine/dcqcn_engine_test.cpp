// DCQCN in the soft engine: the context attribute and IBEX_DCQCN* configure it, each QP
// reports its state through ibex_query_qp_cc, and a QP's requests leave no faster than
// its rate. (CNPs, marks and rate cuts end to end: tests/bench/incast/incast_test.)
#include <chrono>
#include <cstdlib>

#include "tests/support/endpoint.h"

using namespace ibex::test;

namespace {

struct EnvGuard {
    explicit EnvGuard(std::initializer_list<std::pair<const char *, const char *>> vars) {
        for (auto &[k, v] : vars) {
            names.push_back(k);
            setenv(k, v, 1);
        }
    }
    ~EnvGuard() {
        for (const char *k : names) unsetenv(k);
    }
    std::vector<const char *> names;
};

ibex_qp_cc_t query(ibex_qp_t *qp) {
    ibex_qp_cc_t c{};
    c.size = sizeof c;
    EXPECT_EQ(ibex_query_qp_cc(qp, &c), IBEX_OK) << ibex_last_error();
    return c;
}

} // namespace

TEST(DcqcnEngine, OffByDefault) {
    Endpoint e;
    e.open(4096);
    const ibex_qp_cc_t c = query(e.qp);
    EXPECT_EQ(c.enabled, 0u);
    EXPECT_EQ(c.rate_mbps, 0);
}

TEST(DcqcnEngine, AttributeSelectsThePresetAndLineRate) {
    ibex_context_attr_t a = IBEX_CONTEXT_ATTR_INIT;
    a.dcqcn = "paper";
    a.dcqcn_line_rate_mbps = 300;
    ibex_context_t *ctx = nullptr;
    IBEX_ASSERT_OK(ibex_open_device("udp:lo", &a, &ctx));
    ibex_pd_t *pd = nullptr;
    ibex_cq_t *cq = nullptr;
    ibex_qp_t *qp = nullptr;
    IBEX_ASSERT_OK(ibex_alloc_pd(ctx, &pd));
    IBEX_ASSERT_OK(ibex_create_cq(ctx, 16, &cq));
    ibex_qp_init_attr_t qa = IBEX_QP_INIT_ATTR_INIT;
    qa.send_cq = qa.recv_cq = cq;
    IBEX_ASSERT_OK(ibex_create_qp(pd, &qa, &qp));
    const ibex_qp_cc_t c = query(qp);
    EXPECT_EQ(c.enabled, 1u);
    EXPECT_DOUBLE_EQ(c.rate_mbps, 300);
    EXPECT_DOUBLE_EQ(c.target_rate_mbps, 300);
    EXPECT_DOUBLE_EQ(c.alpha, 1023.0 / 1024); // initial_alpha_value
    EXPECT_EQ(c.rp_cnp_handled, 0u);
    // A caller built against a shorter struct gets only its part.
    ibex_qp_cc_t small{};
    small.size = 16;
    small.alpha = -1;
    IBEX_ASSERT_OK(ibex_query_qp_cc(qp, &small));
    EXPECT_DOUBLE_EQ(small.rate_mbps, 300);
    EXPECT_EQ(small.alpha, -1);
    small.size = 4;
    EXPECT_EQ(ibex_query_qp_cc(qp, &small), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_query_qp_cc(nullptr, &small), IBEX_ERR_INVALID_ARGUMENT);
    ibex_destroy_qp(qp);
    ibex_destroy_cq(cq);
    ibex_dealloc_pd(pd);
    ibex_close_device(ctx);
}

TEST(DcqcnEngine, UnknownProfileOrBadKnobIsRefused) {
    ibex_context_attr_t a = IBEX_CONTEXT_ATTR_INIT;
    a.dcqcn = "cubic";
    ibex_context_t *ctx = nullptr;
    EXPECT_EQ(ibex_open_device("udp:lo", &a, &ctx), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("cubic"), std::string::npos);
    EXPECT_EQ(ctx, nullptr);
}

TEST(DcqcnEngine, EnvironmentEnablesItAndOverridesKnobs) {
    EnvGuard env{{"IBEX_DCQCN", "mlx5"}, {"IBEX_DCQCN_LINE_RATE", "1234"}, {"IBEX_DCQCN_initial_alpha_value", "512"}};
    Endpoint e;
    e.open(4096);
    const ibex_qp_cc_t c = query(e.qp);
    EXPECT_EQ(c.enabled, 1u);
    EXPECT_DOUBLE_EQ(c.rate_mbps, 1234);
    EXPECT_DOUBLE_EQ(c.alpha, 0.5);
}

TEST(DcqcnEngine, RequestsLeaveNoFasterThanTheRate) {
    // No congestion on loopback: no CNP, so the QP stays at its line rate of 200 Mbit/s,
    // and pacing is all that holds it there.
    constexpr double kMbps = 200;
    EnvGuard env{{"IBEX_DCQCN", "paper"}, {"IBEX_DCQCN_LINE_RATE", "200"}};
    Endpoint a, b;
    a.open(1 << 20);
    b.open(1 << 20);
    connect_pair(a, b);
    const ibex_counters_t before = a.counters();
    const auto t0 = std::chrono::steady_clock::now();
    constexpr int kWrites = 160; // 160 x 64 KiB = 10 MiB: 0.42 s at 200 Mbit/s
    int posted = 0, done = 0;
    while (done < kWrites && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
        while (posted < kWrites && posted - done < 16)
            IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, uint64_t(posted++), 0, 65536, b.va(0), ibex_mr_rkey(b.mr)));
        for (const ibex_wc_t &wc : a.wait(1, 1000)) {
            ASSERT_EQ(wc.status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc.status);
            ++done;
        }
    }
    ASSERT_EQ(done, kWrites);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const ibex_counters_t after = a.counters();
    const double mbps = double(after.tx_bytes - before.tx_bytes) * 8 / secs / 1e6;
    std::printf("paced at %.1f Mbit/s (rate %.0f)\n", mbps, kMbps);
    // Never faster than the rate (5%; the 1 ms catch-up allowance is 0.25% of the run). A
    // loaded host makes it slower, so the lower bound only catches a pacer that stalls
    // (one that lost its credit at every late wake-up ran at 1/8 of the rate here).
    EXPECT_LE(mbps, kMbps * 1.05);
    EXPECT_GE(mbps, kMbps * 0.25);
    EXPECT_EQ(query(a.qp).rp_cnp_handled, 0u);
    EXPECT_DOUBLE_EQ(query(a.qp).rate_mbps, kMbps);
}

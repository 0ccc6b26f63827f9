// API misuse through the shared library's C API: null handles, bad struct size/magic,
// wrong QP state, unregistered memory, zero lengths where not allowed, unknown devices.
// Each call must return the exact status, leave a fresh non-empty ibex_last_error(), and
// not crash.
#include <gtest/gtest.h>
#include <ibex/ibex.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace {

// Sets the thread's detail message to a known sentinel, so a check can tell that the call
// under test wrote its own message.
std::string prime_error() {
    ibex_ep_addr_pack(nullptr, nullptr, 0);
    return ibex_last_error();
}

#define EXPECT_FAILS(expr, status)                                                                       \
    do {                                                                                                  \
        const std::string _sentinel = prime_error();                                                     \
        const ibex_status_t _st = (expr);                                                                 \
        EXPECT_EQ(_st, status) << #expr << " -> " << ibex_strerror(_st) << ": " << ibex_last_error();      \
        const std::string _msg = ibex_last_error();                                                       \
        EXPECT_FALSE(_msg.empty()) << #expr << ": no detail message";                                    \
        EXPECT_NE(_msg, _sentinel) << #expr << ": detail message not updated";                           \
    } while (0)

#define ASSERT_OK(expr)                                                                                   \
    do {                                                                                                  \
        const ibex_status_t _st = (expr);                                                                 \
        ASSERT_EQ(_st, IBEX_OK) << #expr << ": " << ibex_last_error();                                    \
    } while (0)

class ApiMisuse : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_OK(ibex_open_device("udp:lo", nullptr, &ctx));
        ASSERT_OK(ibex_alloc_pd(ctx, &pd));
        ASSERT_OK(ibex_create_cq(ctx, 64, &cq));
        buf.assign(1 << 16, 0);
        ASSERT_OK(ibex_reg_mr(pd, buf.data(), buf.size(),
                              IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ, &mr));
        ASSERT_OK(ibex_reg_mr(pd, buf.data(), 4096, IBEX_ACCESS_REMOTE_READ, &ro_mr)); // no LOCAL_WRITE
        ibex_qp_init_attr_t a = IBEX_QP_INIT_ATTR_INIT;
        a.send_cq = cq;
        a.recv_cq = cq;
        a.max_send_wr = 4;
        ASSERT_OK(ibex_create_qp(pd, &a, &qp));
    }
    void TearDown() override {
        if (qp) ibex_destroy_qp(qp);
        if (ro_mr) ibex_dereg_mr(ro_mr);
        if (mr) ibex_dereg_mr(mr);
        if (cq) ibex_destroy_cq(cq);
        if (pd) ibex_dealloc_pd(pd);
        if (ctx) ibex_close_device(ctx);
    }
    ibex_send_wr_t write_wr(ibex_sge_t *s) {
        ibex_send_wr_t wr{};
        wr.wr_id = 1;
        wr.sg_list = s;
        wr.num_sge = 1;
        wr.opcode = IBEX_WR_RDMA_WRITE;
        wr.send_flags = IBEX_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf.data());
        wr.wr.rdma.rkey = ibex_mr_rkey(mr);
        return wr;
    }
    // Moves qp to RTS towards a peer QP that does not exist (nothing ever answers).
    void to_rts() {
        ibex_ep_addr_t self;
        ASSERT_OK(ibex_qp_local_addr(qp, &self));
        ibex_ep_addr_t nobody = self;
        nobody.qpn = (self.qpn + 77) & 0xffffff;
        ASSERT_OK(ibex_qp_connect(qp, &nobody));
    }
    ibex_sge_t sge(size_t off, uint32_t len) { return {reinterpret_cast<uintptr_t>(buf.data()) + off, len, ibex_mr_lkey(mr)}; }

    ibex_context_t *ctx = nullptr;
    ibex_pd_t *pd = nullptr;
    ibex_cq_t *cq = nullptr;
    ibex_mr_t *mr = nullptr;
    ibex_mr_t *ro_mr = nullptr;
    ibex_qp_t *qp = nullptr;
    std::vector<uint8_t> buf;
};

TEST(ApiMisuseNoContext, DevicesAndContexts) {
    ibex_device_list_t *list = nullptr;
    int n = -1;
    EXPECT_FAILS(ibex_get_device_list(nullptr, &n), IBEX_ERR_INVALID_ARGUMENT);
    ASSERT_OK(ibex_get_device_list(&list, &n));
    ASSERT_GE(n, 1);
    bool has_lo = false;
    for (int i = 0; i < n; ++i) has_lo |= std::string(ibex_device_name(list, i)) == "udp:lo";
    EXPECT_TRUE(has_lo);
    EXPECT_EQ(ibex_device_name(list, -1), nullptr);
    EXPECT_EQ(ibex_device_name(list, n), nullptr);
    EXPECT_EQ(ibex_device_provider(list, n), nullptr);
    EXPECT_EQ(ibex_device_name(nullptr, 0), nullptr);
    ibex_free_device_list(list);
    ibex_free_device_list(nullptr);

    ibex_context_t *ctx = reinterpret_cast<ibex_context_t *>(0x1);
    EXPECT_FAILS(ibex_open_device(nullptr, nullptr, &ctx), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_open_device("udp:lo", nullptr, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_open_device("nosuch:dev0", nullptr, &ctx), IBEX_ERR_NO_DEVICE);
    EXPECT_EQ(ctx, nullptr) << "the out handle is cleared on failure";
    EXPECT_FAILS(ibex_open_device("", nullptr, &ctx), IBEX_ERR_NO_DEVICE);
    EXPECT_FAILS(ibex_open_device("udp:no_such_if9", nullptr, &ctx), IBEX_ERR_NO_DEVICE);
    ibex_context_attr_t attr = IBEX_CONTEXT_ATTR_INIT;
    attr.magic = 0xdeadbeef;
    EXPECT_FAILS(ibex_open_device("udp:lo", &attr, &ctx), IBEX_ERR_INVALID_ARGUMENT);
    attr = IBEX_CONTEXT_ATTR_INIT;
    attr.size = sizeof attr + 8; // from a newer library
    EXPECT_FAILS(ibex_open_device("udp:lo", &attr, &ctx), IBEX_ERR_INVALID_ARGUMENT);
    attr = IBEX_CONTEXT_ATTR_INIT;
    attr.size = 4; // too small to hold the magic
    EXPECT_FAILS(ibex_open_device("udp:lo", &attr, &ctx), IBEX_ERR_INVALID_ARGUMENT);
    attr = IBEX_CONTEXT_ATTR_INIT;
    attr.local_addr = "not-an-ip";
    EXPECT_FAILS(ibex_open_device("udp:lo", &attr, &ctx), IBEX_ERR_INVALID_ARGUMENT);

    EXPECT_FAILS(ibex_close_device(nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_alloc_pd(nullptr, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_dealloc_pd(nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_reg_mr(nullptr, &n, 4, 0, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_dereg_mr(nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_create_cq(nullptr, 1, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_destroy_cq(nullptr), IBEX_ERR_INVALID_ARGUMENT);
    int count = 5;
    ibex_wc_t wc;
    EXPECT_FAILS(ibex_poll_cq(nullptr, 1, &wc, &count), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_cq_fd(nullptr, &count), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_req_notify_cq(nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_cq_wait(nullptr, 0), IBEX_ERR_INVALID_ARGUMENT);
    ibex_qp_init_attr_t qa = IBEX_QP_INIT_ATTR_INIT;
    ibex_qp_t *qp = nullptr;
    EXPECT_FAILS(ibex_create_qp(nullptr, &qa, &qp), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_destroy_qp(nullptr), IBEX_ERR_INVALID_ARGUMENT);
    ibex_qp_attr_t at = IBEX_QP_ATTR_INIT;
    EXPECT_FAILS(ibex_modify_qp(nullptr, &at, IBEX_QP_STATE), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_query_qp(nullptr, &at), IBEX_ERR_INVALID_ARGUMENT);
    ibex_ep_addr_t ep;
    EXPECT_FAILS(ibex_qp_local_addr(nullptr, &ep), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_qp_connect(nullptr, &ep), IBEX_ERR_INVALID_ARGUMENT);
    ibex_send_wr_t swr{};
    ibex_send_wr_t *bad = nullptr;
    EXPECT_FAILS(ibex_post_send(nullptr, &swr, &bad), IBEX_ERR_INVALID_ARGUMENT);
    ibex_recv_wr_t rwr{};
    EXPECT_FAILS(ibex_post_recv(nullptr, &rwr, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    ibex_fault_config_t f = IBEX_FAULT_CONFIG_INIT;
    EXPECT_FAILS(ibex_set_faults(nullptr, &f), IBEX_ERR_INVALID_ARGUMENT);
    ibex_counters_t k{};
    k.size = sizeof k;
    EXPECT_FAILS(ibex_query_counters(nullptr, &k), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_progress(nullptr), IBEX_ERR_INVALID_ARGUMENT);
    ibex_mr_info_t info;
    EXPECT_FAILS(ibex_mr_query(nullptr, &info), IBEX_ERR_INVALID_ARGUMENT);

    // Accessors on NULL answer a neutral value.
    EXPECT_EQ(ibex_mr_lkey(nullptr), 0u);
    EXPECT_EQ(ibex_mr_rkey(nullptr), 0u);
    EXPECT_EQ(ibex_qp_num(nullptr), 0u);
    EXPECT_STREQ(ibex_context_device_name(nullptr), "");
    // Descriptions exist for every status, known or not.
    for (int s = 0; s <= 12; ++s) EXPECT_NE(ibex_strerror(static_cast<ibex_status_t>(s)), nullptr);
    EXPECT_STREQ(ibex_strerror(static_cast<ibex_status_t>(999)), "unknown status");
    EXPECT_STREQ(ibex_wc_status_str(IBEX_WC_REM_ACCESS_ERR), "IBV_WC_REM_ACCESS_ERR");
    EXPECT_STREQ(ibex_wc_status_str(static_cast<ibex_wc_status_t>(999)), "IBV_WC_UNKNOWN");
    EXPECT_EQ(ibex_version(), IBEX_VERSION);
}

TEST_F(ApiMisuse, ContextPdMrCqArguments) {
    ibex_pd_t *p2 = nullptr;
    EXPECT_FAILS(ibex_alloc_pd(ctx, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    (void)p2;
    ibex_mr_t *m = nullptr;
    EXPECT_FAILS(ibex_reg_mr(pd, buf.data(), 0, IBEX_ACCESS_LOCAL_WRITE, &m), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_reg_mr(pd, nullptr, 64, IBEX_ACCESS_LOCAL_WRITE, &m), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_reg_mr(pd, buf.data(), 64, IBEX_ACCESS_LOCAL_WRITE, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_reg_mr(pd, buf.data(), 64, 0x100, &m), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_reg_mr(pd, buf.data(), 64, IBEX_ACCESS_REMOTE_WRITE, &m), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_reg_mr(pd, buf.data(), 64, IBEX_ACCESS_REMOTE_ATOMIC, &m), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(m, nullptr);
    ibex_mr_info_t info;
    ASSERT_OK(ibex_mr_query(mr, &info));
    EXPECT_EQ(info.addr, buf.data());
    EXPECT_EQ(info.length, buf.size());
    EXPECT_EQ(info.lkey, ibex_mr_lkey(mr));
    EXPECT_FAILS(ibex_mr_query(mr, nullptr), IBEX_ERR_INVALID_ARGUMENT);

    ibex_cq_t *c = nullptr;
    EXPECT_FAILS(ibex_create_cq(ctx, 0, &c), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_create_cq(ctx, -1, &c), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_create_cq(ctx, (1 << 22) + 1, &c), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_create_cq(ctx, 4, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    int count = 7;
    ibex_wc_t wc[2];
    EXPECT_FAILS(ibex_poll_cq(cq, 1, wc, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_poll_cq(cq, -1, wc, &count), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(count, 0);
    EXPECT_FAILS(ibex_poll_cq(cq, 2, nullptr, &count), IBEX_ERR_INVALID_ARGUMENT);
    ASSERT_OK(ibex_poll_cq(cq, 0, nullptr, &count));
    EXPECT_EQ(count, 0);
    EXPECT_FAILS(ibex_cq_fd(cq, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    int fd = -1;
    ASSERT_OK(ibex_cq_fd(cq, &fd));
    EXPECT_GE(fd, 0);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FAILS(ibex_cq_wait(cq, 30), IBEX_ERR_TIMEOUT);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(ms, 25);
    EXPECT_LT(ms, 2000);
    // A CQ in use by a QP cannot go.
    EXPECT_FAILS(ibex_destroy_cq(cq), IBEX_ERR_INVALID_STATE);

    ibex_fault_config_t f = IBEX_FAULT_CONFIG_INIT;
    EXPECT_FAILS(ibex_set_faults(ctx, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    f.magic = 1;
    EXPECT_FAILS(ibex_set_faults(ctx, &f), IBEX_ERR_INVALID_ARGUMENT);
    f = IBEX_FAULT_CONFIG_INIT;
    f.loss = 1.5;
    EXPECT_FAILS(ibex_set_faults(ctx, &f), IBEX_ERR_INVALID_ARGUMENT);
    f.loss = 0;
    f.corrupt = -0.1;
    EXPECT_FAILS(ibex_set_faults(ctx, &f), IBEX_ERR_INVALID_ARGUMENT);
    ibex_counters_t k{};
    EXPECT_FAILS(ibex_query_counters(ctx, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    k.size = 0;
    EXPECT_FAILS(ibex_query_counters(ctx, &k), IBEX_ERR_INVALID_ARGUMENT);
    k.size = sizeof k + 8;
    EXPECT_FAILS(ibex_query_counters(ctx, &k), IBEX_ERR_INVALID_ARGUMENT);
    k.size = sizeof k;
    ASSERT_OK(ibex_query_counters(ctx, &k));
}

TEST_F(ApiMisuse, DeviceQueryWritesOnlyWhatTheCallersSizeHolds) {
    ibex_device_attr_t a{};
    a.size = sizeof a;
    EXPECT_FAILS(ibex_query_device(nullptr, &a), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_query_device(ctx, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    std::memset(&a, 0xab, sizeof a);
    a.size = 4;
    EXPECT_FAILS(ibex_query_device(ctx, &a), IBEX_ERR_INVALID_ARGUMENT);
    a.size = sizeof a + 8;
    EXPECT_FAILS(ibex_query_device(ctx, &a), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(a.max_msg_size, 0xababababababababull) << "a refused query writes nothing";
    // A caller built against a layout that ended after max_msg_size.
    a.size = offsetof(ibex_device_attr_t, max_mtu);
    ASSERT_OK(ibex_query_device(ctx, &a));
    EXPECT_EQ(a.size, offsetof(ibex_device_attr_t, max_mtu));
    EXPECT_EQ(a.max_msg_size, uint64_t(1) << 31);
    EXPECT_EQ(a.max_mtu, 0xababababu);
    EXPECT_EQ(a.efficient_msg_bytes, 0xababababababababull);
    a.size = sizeof a;
    ASSERT_OK(ibex_query_device(ctx, &a));
    EXPECT_GE(a.max_mtu, uint32_t(IBEX_MTU_256));
    EXPECT_LE(a.max_mtu, uint32_t(IBEX_MTU_4096));
    EXPECT_GT(a.efficient_msg_bytes, 0u);
}

TEST_F(ApiMisuse, QpCreationArguments) {
    ibex_qp_t *q = nullptr;
    ibex_qp_init_attr_t a = IBEX_QP_INIT_ATTR_INIT;
    a.send_cq = cq;
    a.recv_cq = cq;
    EXPECT_FAILS(ibex_create_qp(pd, nullptr, &q), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_create_qp(pd, &a, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    ibex_qp_init_attr_t b = a;
    b.magic = 0;
    EXPECT_FAILS(ibex_create_qp(pd, &b, &q), IBEX_ERR_INVALID_ARGUMENT);
    b = a;
    b.size = sizeof b + 4;
    EXPECT_FAILS(ibex_create_qp(pd, &b, &q), IBEX_ERR_INVALID_ARGUMENT);
    b = a;
    b.send_cq = nullptr;
    EXPECT_FAILS(ibex_create_qp(pd, &b, &q), IBEX_ERR_INVALID_ARGUMENT);
    b = a;
    b.max_send_wr = (1u << 16) + 1;
    EXPECT_FAILS(ibex_create_qp(pd, &b, &q), IBEX_ERR_INVALID_ARGUMENT);
    b = a;
    b.max_send_sge = 17;
    EXPECT_FAILS(ibex_create_qp(pd, &b, &q), IBEX_ERR_INVALID_ARGUMENT);
    // A CQ of another context.
    ibex_context_t *other = nullptr;
    ibex_cq_t *ocq = nullptr;
    ASSERT_OK(ibex_open_device("udp:lo", nullptr, &other));
    ASSERT_OK(ibex_create_cq(other, 8, &ocq));
    b = a;
    b.recv_cq = ocq;
    EXPECT_FAILS(ibex_create_qp(pd, &b, &q), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(q, nullptr);
    ASSERT_OK(ibex_destroy_cq(ocq));
    ASSERT_OK(ibex_close_device(other));
}

TEST_F(ApiMisuse, QpStateMachine) {
    ibex_qp_attr_t at = IBEX_QP_ATTR_INIT;
    ASSERT_OK(ibex_query_qp(qp, &at));
    EXPECT_EQ(at.qp_state, IBEX_QPS_RESET);
    ibex_sge_t s = sge(0, 64);
    ibex_send_wr_t wr = write_wr(&s);
    ibex_send_wr_t *bad = nullptr;
    // post_send before RTS, in every earlier state.
    EXPECT_FAILS(ibex_post_send(qp, &wr, &bad), IBEX_ERR_INVALID_STATE);
    EXPECT_EQ(bad, &wr);
    ibex_recv_wr_t rwr{};
    rwr.sg_list = &s;
    rwr.num_sge = 1;
    EXPECT_FAILS(ibex_post_recv(qp, &rwr, nullptr), IBEX_ERR_INVALID_STATE);
    // Invalid transitions from RESET.
    at.qp_state = IBEX_QPS_RTR;
    EXPECT_FAILS(ibex_modify_qp(qp, &at, IBEX_QP_STATE), IBEX_ERR_INVALID_STATE);
    at.qp_state = IBEX_QPS_RTS;
    EXPECT_FAILS(ibex_modify_qp(qp, &at, IBEX_QP_STATE), IBEX_ERR_INVALID_STATE);
    at.qp_state = IBEX_QPS_SQD;
    EXPECT_FAILS(ibex_modify_qp(qp, &at, IBEX_QP_STATE), IBEX_ERR_INVALID_STATE);
    // Bad attribute structures and values.
    ibex_qp_attr_t badattr = IBEX_QP_ATTR_INIT;
    badattr.magic = IBEX_MAGIC_QP_INIT_ATTR;
    EXPECT_FAILS(ibex_modify_qp(qp, &badattr, IBEX_QP_STATE), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_query_qp(qp, &badattr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_modify_qp(qp, nullptr, IBEX_QP_STATE), IBEX_ERR_INVALID_ARGUMENT);
    at = IBEX_QP_ATTR_INIT;
    EXPECT_FAILS(ibex_modify_qp(qp, &at, 1u << 20), IBEX_ERR_INVALID_ARGUMENT);
    at.qp_state = IBEX_QPS_INIT;
    ASSERT_OK(ibex_modify_qp(qp, &at, IBEX_QP_STATE));
    EXPECT_FAILS(ibex_post_send(qp, &wr, &bad), IBEX_ERR_INVALID_STATE);
    ASSERT_OK(ibex_post_recv(qp, &rwr, nullptr)); // receives are fine from INIT
    // INIT -> RTR needs the destination; then bad values.
    at.qp_state = IBEX_QPS_RTR;
    EXPECT_FAILS(ibex_modify_qp(qp, &at, IBEX_QP_STATE), IBEX_ERR_INVALID_ARGUMENT);
    at.qp_state = IBEX_QPS_RTS;
    EXPECT_FAILS(ibex_modify_qp(qp, &at, IBEX_QP_STATE), IBEX_ERR_INVALID_STATE);
    ibex_ep_addr_t self;
    ASSERT_OK(ibex_qp_local_addr(qp, &self));
    at.qp_state = IBEX_QPS_RTR;
    at.dest = self;
    at.path_mtu = static_cast<ibex_mtu_t>(0);
    EXPECT_FAILS(ibex_modify_qp(qp, &at, IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_PATH_MTU), IBEX_ERR_INVALID_ARGUMENT);
    at.path_mtu = static_cast<ibex_mtu_t>(6);
    EXPECT_FAILS(ibex_modify_qp(qp, &at, IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_PATH_MTU), IBEX_ERR_INVALID_ARGUMENT);
    ibex_qp_attr_t v = IBEX_QP_ATTR_INIT;
    v.retry_cnt = 8;
    EXPECT_FAILS(ibex_modify_qp(qp, &v, IBEX_QP_RETRY_CNT), IBEX_ERR_INVALID_ARGUMENT);
    v = IBEX_QP_ATTR_INIT;
    v.rnr_retry = 8;
    EXPECT_FAILS(ibex_modify_qp(qp, &v, IBEX_QP_RNR_RETRY), IBEX_ERR_INVALID_ARGUMENT);
    v = IBEX_QP_ATTR_INIT;
    v.timeout = 32;
    EXPECT_FAILS(ibex_modify_qp(qp, &v, IBEX_QP_TIMEOUT), IBEX_ERR_INVALID_ARGUMENT);
    v = IBEX_QP_ATTR_INIT;
    v.min_rnr_timer = 32;
    EXPECT_FAILS(ibex_modify_qp(qp, &v, IBEX_QP_MIN_RNR_TIMER), IBEX_ERR_INVALID_ARGUMENT);
    ibex_ep_addr_t v6 = self;
    std::memset(v6.gid, 0, 16);
    v6.gid[15] = 1; // ::1 is not IPv4-mapped
    at.dest = v6;
    EXPECT_FAILS(ibex_modify_qp(qp, &at, IBEX_QP_STATE | IBEX_QP_DEST), IBEX_ERR_NOT_SUPPORTED);
    ASSERT_OK(ibex_query_qp(qp, &at));
    EXPECT_EQ(at.qp_state, IBEX_QPS_INIT) << "failed modifies leave the state alone";
    // Valid path on to RTR: post_send still refused.
    at.dest = self;
    at.qp_state = IBEX_QPS_RTR;
    ASSERT_OK(ibex_modify_qp(qp, &at, IBEX_QP_STATE | IBEX_QP_DEST));
    EXPECT_FAILS(ibex_post_send(qp, &wr, &bad), IBEX_ERR_INVALID_STATE);
    at.qp_state = IBEX_QPS_INIT;
    EXPECT_FAILS(ibex_modify_qp(qp, &at, IBEX_QP_STATE), IBEX_ERR_INVALID_STATE);
    // ERR flushes, RESET clears, and from RESET the QP can be brought up again.
    at.qp_state = IBEX_QPS_ERR;
    ASSERT_OK(ibex_modify_qp(qp, &at, IBEX_QP_STATE));
    ibex_wc_t wc[4];
    int n = 0;
    ASSERT_OK(ibex_poll_cq(cq, 4, wc, &n));
    ASSERT_EQ(n, 1) << "the receive posted in INIT is flushed";
    EXPECT_EQ(wc[0].status, IBEX_WC_WR_FLUSH_ERR);
    at.qp_state = IBEX_QPS_RTS;
    EXPECT_FAILS(ibex_modify_qp(qp, &at, IBEX_QP_STATE), IBEX_ERR_INVALID_STATE);
    at.qp_state = IBEX_QPS_RESET;
    ASSERT_OK(ibex_modify_qp(qp, &at, IBEX_QP_STATE));
    to_rts();
    ASSERT_OK(ibex_query_qp(qp, &at));
    EXPECT_EQ(at.qp_state, IBEX_QPS_RTS);
}

TEST_F(ApiMisuse, WorkRequestsAgainstMemoryAndLimits) {
    to_rts();
    ibex_send_wr_t *bad = nullptr;
    auto expect_refused = [&](ibex_send_wr_t wr, ibex_status_t want, const char *what) {
        SCOPED_TRACE(what);
        bad = nullptr;
        EXPECT_FAILS(ibex_post_send(qp, &wr, &bad), want);
        EXPECT_EQ(bad, &wr) << "bad_wr must name the refused WR";
    };
    ibex_sge_t s = sge(0, 64);
    ibex_send_wr_t wr = write_wr(&s);
    EXPECT_FAILS(ibex_post_send(qp, nullptr, &bad), IBEX_ERR_INVALID_ARGUMENT);

    ibex_sge_t bad_key = s;
    bad_key.lkey = ibex_mr_lkey(mr) ^ 0x7700;
    wr.sg_list = &bad_key;
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "unregistered lkey");
    ibex_sge_t past = sge(buf.size() - 10, 11); // one byte past the MR
    wr.sg_list = &past;
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "range past the MR");
    ibex_sge_t before = s;
    before.addr -= 1;
    wr.sg_list = &before;
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "range before the MR");
    std::vector<uint8_t> other(64);
    ibex_sge_t foreign{reinterpret_cast<uintptr_t>(other.data()), 64, ibex_mr_lkey(mr)};
    wr.sg_list = &foreign;
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "memory that was never registered");
    // READ and atomics write local memory: the MR needs LOCAL_WRITE.
    ibex_sge_t ro{reinterpret_cast<uintptr_t>(buf.data()), 64, ibex_mr_lkey(ro_mr)};
    wr.sg_list = &ro;
    wr.opcode = IBEX_WR_RDMA_READ;
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "READ into an MR without LOCAL_WRITE");
    // Atomics need exactly 8 bytes and an aligned remote address.
    ibex_sge_t four = sge(0, 4);
    wr.sg_list = &four;
    wr.opcode = IBEX_WR_ATOMIC_FETCH_AND_ADD;
    wr.wr.atomic.remote_addr = reinterpret_cast<uintptr_t>(buf.data());
    wr.wr.atomic.rkey = ibex_mr_rkey(mr);
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "atomic with a 4-byte SGE");
    wr.num_sge = 0;
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "atomic with no SGE");
    ibex_sge_t eight = sge(0, 8);
    wr.sg_list = &eight;
    wr.num_sge = 1;
    wr.wr.atomic.remote_addr += 4;
    wr.opcode = IBEX_WR_ATOMIC_CMP_AND_SWP;
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "atomic at an unaligned remote address");
    // Malformed WRs.
    wr = write_wr(&s);
    wr.opcode = static_cast<ibex_wr_opcode_t>(99);
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "unknown opcode");
    wr = write_wr(&s);
    wr.num_sge = 17;
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "17 SGEs");
    wr.num_sge = -1;
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "negative SGE count");
    wr.num_sge = 1;
    wr.sg_list = nullptr;
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "num_sge without sg_list");
    ibex_sge_t big = sge(0, 65);
    wr = write_wr(&big);
    wr.send_flags |= IBEX_SEND_INLINE;
    expect_refused(wr, IBEX_ERR_INVALID_ARGUMENT, "inline data above the limit");

    // Receives against unregistered memory.
    ibex_recv_wr_t r{};
    r.sg_list = &bad_key;
    r.num_sge = 1;
    ibex_recv_wr_t *rbad = nullptr;
    EXPECT_FAILS(ibex_post_recv(qp, &r, &rbad), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rbad, &r);
    r.sg_list = &ro;
    EXPECT_FAILS(ibex_post_recv(qp, &r, &rbad), IBEX_ERR_INVALID_ARGUMENT);
    r.num_sge = 17;
    EXPECT_FAILS(ibex_post_recv(qp, &r, &rbad), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_FAILS(ibex_post_recv(qp, nullptr, &rbad), IBEX_ERR_INVALID_ARGUMENT);

    // A chain stops at the first bad WR: the ones before it are posted.
    ibex_send_wr_t chain[3] = {write_wr(&s), write_wr(&bad_key), write_wr(&s)};
    chain[0].next = &chain[1];
    chain[1].next = &chain[2];
    chain[1].sg_list = &bad_key;
    bad = nullptr;
    EXPECT_FAILS(ibex_post_send(qp, chain, &bad), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(bad, &chain[1]);
    // The send queue (max_send_wr 4) fills: nothing ever answers this QP.
    ibex_send_wr_t one = write_wr(&s);
    int accepted = 1; // chain[0]
    ibex_status_t st = IBEX_OK;
    for (int i = 0; i < 10 && (st = ibex_post_send(qp, &one, &bad)) == IBEX_OK; ++i) ++accepted;
    EXPECT_EQ(st, IBEX_ERR_QUEUE_FULL) << ibex_last_error();
    EXPECT_EQ(accepted, 4);
    // Moving to ERR flushes all of them.
    ibex_qp_attr_t at = IBEX_QP_ATTR_INIT;
    at.qp_state = IBEX_QPS_ERR;
    ASSERT_OK(ibex_modify_qp(qp, &at, IBEX_QP_STATE));
    ibex_wc_t wc[8];
    int n = 0;
    ASSERT_OK(ibex_poll_cq(cq, 8, wc, &n));
    EXPECT_EQ(n, 4);
    for (int i = 0; i < n; ++i) EXPECT_EQ(wc[i].status, IBEX_WC_WR_FLUSH_ERR);
}

} // namespace

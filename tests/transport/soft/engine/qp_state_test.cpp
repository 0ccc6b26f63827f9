// SoftQp::apply and SoftQp::reset (transport/soft/engine/qp_state.cpp) called directly,
// under the context lock, on a QP of a real context: what each attribute and transition
// changes in the engine's state, without the provider's checks in front. (The checks and
// the verbs-level state machine: tests/transport/soft/rc/qp_lifecycle_test.cpp and
// tests/runtime.)
#include <algorithm>
#include <mutex>

#include "congestion/window/send_window.h"
#include "tests/support/endpoint.h"
#include "transport/soft/engine/context.h"

using namespace ibex::test;
using ibex::soft::NetAddr;
using ibex::soft::SoftContext;
using ibex::soft::SoftQp;

namespace {

class SoftQpState : public ::testing::Test {
protected:
    void SetUp() override {
        e.open(1 << 16);
        ASSERT_TRUE(e.ok());
        qp = static_cast<SoftQp *>(e.qp);
        ctx = qp->ctx;
        std::lock_guard l(ctx->mutex());
        peer = ctx->port().local(); // any address will do: nothing is sent
    }
    void apply(const ibex_qp_attr_t &a, unsigned mask) {
        std::lock_guard l(ctx->mutex());
        qp->apply(a, mask, peer);
    }
    void to(ibex_qp_state_t s, unsigned more_mask = 0, ibex_qp_attr_t a = IBEX_QP_ATTR_INIT) {
        a.qp_state = s;
        apply(a, IBEX_QP_STATE | more_mask);
    }
    // RESET -> INIT -> RTR -> RTS with receive PSN 40 and send PSN 50.
    void bring_up() {
        to(IBEX_QPS_INIT);
        ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
        a.dest.qpn = 0x345;
        a.rq_psn = 40;
        to(IBEX_QPS_RTR, IBEX_QP_DEST | IBEX_QP_RQ_PSN, a);
        a.sq_psn = 50;
        to(IBEX_QPS_RTS, IBEX_QP_SQ_PSN, a);
    }
    uint32_t window() {
        std::lock_guard l(ctx->mutex());
        return qp->window.update(0, {ibex::cc::EventType::kTick}).window_packets;
    }
    void window_event(ibex::cc::EventType t) {
        std::lock_guard l(ctx->mutex());
        qp->window.update(0, {t});
    }
    // The window a QP connects with: the configured one, within the context's budget.
    uint32_t full_window() const {
        const auto &c = ctx->config();
        return std::min(c.max_inflight, std::max(ibex::cc::window::kMinPackets, c.max_inflight_context));
    }

    Endpoint e;
    SoftQp *qp = nullptr;
    SoftContext *ctx = nullptr;
    NetAddr peer;
};

} // namespace

TEST_F(SoftQpState, BringUpSetsTheConnection) {
    ASSERT_EQ(qp->state, IBEX_QPS_RESET);
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a.qp_access_flags = IBEX_ACCESS_REMOTE_READ;
    to(IBEX_QPS_INIT, IBEX_QP_ACCESS_FLAGS, a);
    EXPECT_EQ(qp->state, IBEX_QPS_INIT);
    EXPECT_EQ(qp->access, unsigned(IBEX_ACCESS_REMOTE_READ));

    // The peer's QPN and PSN are cut to 24 bits; without IBEX_QP_PATH_MTU the QP takes
    // the peer's MTU when it is smaller than its own.
    a.dest.qpn = 0xab123456;
    a.dest.psn = 0xcd000077;
    a.dest.mtu = IBEX_MTU_256;
    to(IBEX_QPS_RTR, IBEX_QP_DEST, a);
    EXPECT_EQ(qp->state, IBEX_QPS_RTR);
    EXPECT_TRUE(qp->dest == peer);
    EXPECT_EQ(qp->dest_qpn, 0x123456u);
    EXPECT_EQ(qp->epsn, 0x77u);
    EXPECT_EQ(qp->mtu_enum, IBEX_MTU_256);
    EXPECT_EQ(qp->mtu, 256u);

    a.sq_psn = 0x01000005;
    to(IBEX_QPS_RTS, IBEX_QP_SQ_PSN, a);
    EXPECT_EQ(qp->state, IBEX_QPS_RTS);
    EXPECT_EQ(qp->sq_psn, 5u);
    EXPECT_EQ(qp->una, 5u);
    EXPECT_EQ(qp->sent_high, 5u);
    EXPECT_EQ(qp->retry_left, qp->retry_cnt);
    EXPECT_EQ(qp->rnr_left, qp->rnr_retry);
    EXPECT_EQ(window(), full_window());
}

TEST_F(SoftQpState, ExplicitReceivePsnAndPathMtuWinOverThePeers) {
    to(IBEX_QPS_INIT);
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a.dest.psn = 77;
    a.dest.mtu = IBEX_MTU_256;
    a.rq_psn = 9;
    a.path_mtu = IBEX_MTU_512;
    to(IBEX_QPS_RTR, IBEX_QP_DEST | IBEX_QP_RQ_PSN | IBEX_QP_PATH_MTU, a);
    EXPECT_EQ(qp->epsn, 9u);
    EXPECT_EQ(qp->mtu_enum, IBEX_MTU_512);
    EXPECT_EQ(qp->mtu, 512u);
}

// What an RTS QP may still change (check_modify_common lets through no more: the access
// flags and the RNR timer) leaves the connection, its window and its budgets alone.
TEST_F(SoftQpState, RtsToRtsChangesTheRnrTimerButKeepsTheConnection) {
    bring_up();
    window_event(ibex::cc::EventType::kTimeout);
    {
        std::lock_guard l(ctx->mutex());
        qp->una = 60;
        qp->retry_left = 1;
        qp->rnr_left = 0;
    }
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a.min_rnr_timer = 5;
    a.qp_access_flags = IBEX_ACCESS_REMOTE_READ;
    to(IBEX_QPS_RTS, IBEX_QP_MIN_RNR_TIMER | IBEX_QP_ACCESS_FLAGS, a);
    EXPECT_EQ(qp->state, IBEX_QPS_RTS);
    EXPECT_EQ(qp->min_rnr_timer, 5);
    EXPECT_EQ(qp->access, unsigned(IBEX_ACCESS_REMOTE_READ));
    EXPECT_EQ(qp->retry_left, 1);                       // the live budgets go on
    EXPECT_EQ(qp->rnr_left, 0);
    EXPECT_EQ(qp->una, 60u);                            // not restarted at sq_psn
    EXPECT_EQ(window(), ibex::cc::window::kMinPackets); // nor the window
}

// The limits RTR -> RTS sets fill the live budgets.
TEST_F(SoftQpState, RtrToRtsSetsTheLimitsAndFillsTheBudgets) {
    to(IBEX_QPS_INIT);
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a.dest.qpn = 0x345;
    a.traffic_class = 0x20;
    a.sl = 5;
    a.max_rd_atomic = 4;
    to(IBEX_QPS_RTR, IBEX_QP_DEST | IBEX_QP_TRAFFIC_CLASS | IBEX_QP_SL | IBEX_QP_MAX_RD_ATOMIC, a);
    a.retry_cnt = 3;
    a.rnr_retry = 2;
    a.timeout = 20;
    to(IBEX_QPS_RTS, IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY | IBEX_QP_TIMEOUT, a);
    EXPECT_EQ(qp->retry_cnt, 3);
    EXPECT_EQ(qp->retry_left, 3);
    EXPECT_EQ(qp->rnr_retry, 2);
    EXPECT_EQ(qp->rnr_left, 2);
    EXPECT_EQ(qp->timeout, 20);
    EXPECT_EQ(qp->max_rd_atomic, 4);
    EXPECT_EQ(qp->traffic_class, 0x20);
    EXPECT_EQ(qp->sl, 5);
}

TEST_F(SoftQpState, ReconnectRestartsTheWindow) {
    bring_up();
    window_event(ibex::cc::EventType::kTimeout);
    ASSERT_EQ(window(), ibex::cc::window::kMinPackets);
    to(IBEX_QPS_RESET);
    EXPECT_EQ(window(), ibex::cc::window::kMinPackets); // until the QP is RTS again
    bring_up();
    EXPECT_EQ(window(), full_window());
}

TEST_F(SoftQpState, ResetForgetsTheOldConnection) {
    bring_up();
    IBEX_ASSERT_OK(e.post_recv(1, 0, 64));
    {
        std::lock_guard l(ctx->mutex());
        ASSERT_FALSE(qp->rq.empty());
        qp->rewound = true;
        qp->retry_left = 0;
        qp->rnr_left = 0;
        qp->rto_deadline = 123;
        qp->rnr_until = 456;
        qp->unacked_rx = 5;
        qp->ack_psn = 9;
        qp->in_offset = 100;
        qp->in_write = e.buf.data();
        qp->in_write_len = 100;
        qp->job_count = 2;
        qp->job_head = 1;
        qp->ack_pending = true;
        qp->nak_sent = true;
        qp->in_msg = SoftQp::InMsg::kSend;
        qp->msn = 3;
        qp->replays[0].valid = true;
    }
    const size_t sq_cap = qp->sq.capacity(), rq_cap = qp->rq.capacity();
    to(IBEX_QPS_RESET);
    std::lock_guard l(ctx->mutex());
    EXPECT_EQ(qp->state, IBEX_QPS_RESET);
    EXPECT_TRUE(qp->sq.empty());
    EXPECT_TRUE(qp->rq.empty());
    EXPECT_EQ(qp->sq.capacity(), sq_cap);
    EXPECT_EQ(qp->rq.capacity(), rq_cap);
    EXPECT_EQ(qp->tx_pos, 0u);
    EXPECT_EQ(qp->tx_pkt, 0u);
    EXPECT_FALSE(qp->rewound);
    EXPECT_EQ(qp->retry_left, qp->retry_cnt);
    EXPECT_EQ(qp->rnr_left, qp->rnr_retry);
    EXPECT_EQ(qp->rto_deadline, 0u);
    EXPECT_EQ(qp->rnr_until, 0u);
    EXPECT_EQ(qp->unacked_rx, 0u);
    EXPECT_EQ(qp->ack_psn, 0u);
    EXPECT_EQ(qp->in_offset, 0u);
    EXPECT_EQ(qp->in_write, nullptr);
    EXPECT_EQ(qp->in_write_len, 0u);
    EXPECT_EQ(qp->job_count, 0);
    EXPECT_EQ(qp->job_head, 0);
    EXPECT_FALSE(qp->ack_pending);
    EXPECT_FALSE(qp->nak_sent);
    EXPECT_EQ(qp->in_msg, SoftQp::InMsg::kNone);
    EXPECT_EQ(qp->msn, 0u);
    for (const auto &r : qp->replays) EXPECT_FALSE(r.valid);
    // The connection's addressing stays until the next bring-up sets it.
    EXPECT_EQ(qp->dest_qpn, 0x345u);
}

TEST_F(SoftQpState, ErrorFlushesWhatIsQueuedAfterApplyingTheAttributes) {
    to(IBEX_QPS_INIT);
    IBEX_ASSERT_OK(e.post_recv(11, 0, 64));
    IBEX_ASSERT_OK(e.post_recv(12, 64, 64));
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a.timeout = 3;
    to(IBEX_QPS_ERR, IBEX_QP_TIMEOUT, a);
    EXPECT_EQ(qp->state, IBEX_QPS_ERR);
    EXPECT_EQ(qp->timeout, 3);
    const auto wc = e.wait(2, 2000);
    ASSERT_EQ(wc.size(), 2u);
    EXPECT_EQ(wc[0].wr_id, 11u);
    EXPECT_EQ(wc[1].wr_id, 12u);
    for (const auto &c : wc) EXPECT_EQ(c.status, IBEX_WC_WR_FLUSH_ERR);
    // And back: RESET empties what is left and the QP starts over.
    to(IBEX_QPS_RESET);
    EXPECT_EQ(qp->state, IBEX_QPS_RESET);
    bring_up();
    EXPECT_EQ(qp->state, IBEX_QPS_RTS);
}

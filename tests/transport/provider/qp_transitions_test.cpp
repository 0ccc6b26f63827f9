// Which attributes each QP transition takes: one table (transport/qp_state.h) that every
// provider enforces, so a program that passes on the software providers also passes on an
// RNIC; and ibex_qp_connect_attr, which places each chosen attribute at its transition.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/endpoint.h"
#include "tests/support/scoped_env.h"
#include "transport/provider.h"
#include "transport/qp_state.h"

#ifdef IBEX_HAVE_VERBS
#include "transport/verbs/qp_attr.h"
#endif

namespace ibex {
namespace {

using test::Endpoint;

bool mentions(const std::string &detail, const char *what) { return detail.find(what) != std::string::npos; }

TEST(QpTransitions, EachTransitionTakesWhatVerbsTakesThere) {
    constexpr unsigned kTimers = IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY;
    const unsigned init = qp_transition_attrs(IBEX_QPS_RESET, IBEX_QPS_INIT);
    const unsigned rtr = qp_transition_attrs(IBEX_QPS_INIT, IBEX_QPS_RTR);
    const unsigned rts = qp_transition_attrs(IBEX_QPS_RTR, IBEX_QPS_RTS);
    const unsigned live = qp_transition_attrs(IBEX_QPS_RTS, IBEX_QPS_RTS);
    EXPECT_EQ(init & (kTimers | IBEX_QP_DEST | IBEX_QP_MAX_RD_ATOMIC), 0u);
    EXPECT_TRUE(init & IBEX_QP_ACCESS_FLAGS);
    EXPECT_EQ(rtr & kTimers, 0u) << "the requester's timers belong to RTR -> RTS";
    EXPECT_EQ(rtr & (IBEX_QP_DEST | IBEX_QP_PATH_MTU | IBEX_QP_RQ_PSN | IBEX_QP_SL | IBEX_QP_TRAFFIC_CLASS),
              unsigned(IBEX_QP_DEST | IBEX_QP_PATH_MTU | IBEX_QP_RQ_PSN | IBEX_QP_SL | IBEX_QP_TRAFFIC_CLASS));
    EXPECT_EQ(rts & (kTimers | IBEX_QP_SQ_PSN), kTimers | IBEX_QP_SQ_PSN);
    EXPECT_EQ(rts & (IBEX_QP_DEST | IBEX_QP_PATH_MTU | IBEX_QP_RQ_PSN | IBEX_QP_SL | IBEX_QP_TRAFFIC_CLASS), 0u);
    EXPECT_TRUE((rtr & IBEX_QP_MAX_RD_ATOMIC) && (rts & IBEX_QP_MAX_RD_ATOMIC)) << "responder, then initiator depth";
    EXPECT_EQ(live, unsigned(IBEX_QP_STATE | IBEX_QP_ACCESS_FLAGS | IBEX_QP_MIN_RNR_TIMER));
    for (ibex_qp_state_t from : {IBEX_QPS_RESET, IBEX_QPS_INIT, IBEX_QPS_RTR, IBEX_QPS_RTS, IBEX_QPS_ERR})
        for (ibex_qp_state_t to : {IBEX_QPS_RESET, IBEX_QPS_ERR})
            EXPECT_EQ(qp_transition_attrs(from, to), unsigned(IBEX_QP_STATE)) << from << " -> " << to;
    char names[64];
    EXPECT_STREQ(qp_attr_names(IBEX_QP_TIMEOUT | IBEX_QP_SL, names, sizeof names), "timeout, service level");
    EXPECT_STREQ(qp_attr_names(0, names, sizeof names), "");
    char tiny[10];
    EXPECT_STREQ(qp_attr_names(IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT, tiny, sizeof tiny), "timeout") << "cut, not overrun";
}

class EveryProvider : public ::testing::TestWithParam<const char *> {
protected:
    // Opens both endpoints (not connected) and reads b's address into ba.
    void open() {
        a.open(1 << 16, GetParam());
        b.open(1 << 16, GetParam());
        ASSERT_TRUE(a.ok() && b.ok()) << ibex_last_error();
        IBEX_ASSERT_OK(b.local_addr(&ba));
    }
    ibex_qp_attr_t query(const Endpoint &e) {
        ibex_qp_attr_t q = IBEX_QP_ATTR_INIT;
        EXPECT_EQ(ibex_query_qp(e.qp, &q), IBEX_OK) << ibex_last_error();
        return q;
    }
    // One WRITE from a to b completes and lands.
    void expect_write_works(uint8_t fill) {
        std::fill(a.buf.begin(), a.buf.begin() + 256, fill);
        IBEX_ASSERT_OK(a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, 256, b.va(512), ibex_mr_rkey(b.mr)));
        const auto wc = a.wait(1);
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
        EXPECT_EQ(b.buf[512], fill);
        EXPECT_EQ(b.buf[767], fill);
    }
    Endpoint a, b;
    ibex_ep_addr_t ba{}; // b's address, once open()ed
};

// What verbs refuses on an RTS QP, every provider refuses, naming the attributes, and the
// QP goes on as it was.
TEST_P(EveryProvider, RefusesWhatVerbsRefusesAndKeepsTheQp) {
    open();
    test::connect_pair(a, b);
    ibex_qp_attr_t at = IBEX_QP_ATTR_INIT;
    at.qp_state = IBEX_QPS_RTS;
    at.timeout = 20;
    at.max_rd_atomic = 2;
    EXPECT_EQ(ibex_modify_qp(a.qp, &at, IBEX_QP_STATE | IBEX_QP_TIMEOUT | IBEX_QP_MAX_RD_ATOMIC),
              IBEX_ERR_INVALID_ARGUMENT);
    const std::string detail = ibex_last_error();
    EXPECT_TRUE(mentions(detail, "RTS -> RTS") && mentions(detail, "timeout") && mentions(detail, "max_rd_atomic"))
        << detail;
    EXPECT_EQ(ibex_modify_qp(a.qp, &at, IBEX_QP_RETRY_CNT), IBEX_ERR_INVALID_ARGUMENT) << "without the state bit too";
    at.qp_state = IBEX_QPS_ERR;
    EXPECT_EQ(ibex_modify_qp(a.qp, &at, IBEX_QP_STATE | IBEX_QP_TIMEOUT), IBEX_ERR_INVALID_ARGUMENT)
        << "ERR takes the state alone";
    const ibex_qp_attr_t q = query(a);
    EXPECT_EQ(q.qp_state, IBEX_QPS_RTS);
    EXPECT_EQ(q.timeout, 14) << "a refused modify changes nothing";
    expect_write_works(0x5a);

    // What an RTS QP may change, it changes.
    at = IBEX_QP_ATTR_INIT;
    at.min_rnr_timer = 3;
    at.qp_access_flags = IBEX_ACCESS_REMOTE_WRITE;
    IBEX_ASSERT_OK(ibex_modify_qp(a.qp, &at, IBEX_QP_MIN_RNR_TIMER | IBEX_QP_ACCESS_FLAGS));
    EXPECT_EQ(query(a).min_rnr_timer, 3);
    expect_write_works(0x3c);
}

TEST_P(EveryProvider, RefusesAttributesBeforeTheirTransition) {
    open();
    ibex_qp_attr_t at = IBEX_QP_ATTR_INIT;
    at.qp_state = IBEX_QPS_INIT;
    at.timeout = 18;
    EXPECT_EQ(ibex_modify_qp(a.qp, &at, IBEX_QP_STATE | IBEX_QP_TIMEOUT), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions(ibex_last_error(), "RESET -> INIT")) << ibex_last_error();
    EXPECT_EQ(query(a).qp_state, IBEX_QPS_RESET);
    IBEX_ASSERT_OK(ibex_modify_qp(a.qp, &at, IBEX_QP_STATE));
    at.qp_state = IBEX_QPS_RTR;
    at.dest = ba;
    EXPECT_EQ(ibex_modify_qp(a.qp, &at, IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_TIMEOUT), IBEX_ERR_INVALID_ARGUMENT);
    at.sq_psn = 5;
    EXPECT_EQ(ibex_modify_qp(a.qp, &at, IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_SQ_PSN), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(query(a).qp_state, IBEX_QPS_INIT);
    at.sl = 8;
    EXPECT_EQ(ibex_modify_qp(a.qp, &at, IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_SL), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(mentions(ibex_last_error(), "0..7")) << ibex_last_error();
}

// ibex_qp_connect_attr puts every chosen attribute where it belongs, and the QPs work.
TEST_P(EveryProvider, ConnectAttrSetsTheChosenAttributes) {
    open();
    a.connect_attr.timeout = 18;
    a.connect_attr.retry_cnt = 3;
    a.connect_attr.rnr_retry = 2;
    a.connect_attr.min_rnr_timer = 5;
    a.connect_attr.max_rd_atomic = 4;
    a.connect_attr.traffic_class = 104;
    a.connect_attr.sl = 3;
    a.connect_attr.path_mtu = IBEX_MTU_1024;
    a.connect_mask = IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY | IBEX_QP_MIN_RNR_TIMER |
                     IBEX_QP_MAX_RD_ATOMIC | IBEX_QP_TRAFFIC_CLASS | IBEX_QP_SL | IBEX_QP_PATH_MTU;
    test::connect_pair(a, b);
    const ibex_qp_attr_t q = query(a);
    EXPECT_EQ(q.qp_state, IBEX_QPS_RTS);
    EXPECT_EQ(q.timeout, 18);
    EXPECT_EQ(q.retry_cnt, 3);
    EXPECT_EQ(q.rnr_retry, 2);
    EXPECT_EQ(q.min_rnr_timer, 5);
    EXPECT_EQ(q.max_rd_atomic, 4);
    EXPECT_EQ(q.traffic_class, 104);
    EXPECT_EQ(q.sl, 3);
    EXPECT_EQ(q.path_mtu, IBEX_MTU_1024);
    const ibex_qp_attr_t d = query(b);
    EXPECT_EQ(d.timeout, 14) << "b took ibex_qp_connect's defaults";
    EXPECT_EQ(d.sl, 0);
    expect_write_works(0x77);
}

TEST_P(EveryProvider, ConnectAttrRefusesWhatTheAddressesDecide) {
    open();
    ibex_qp_attr_t at = IBEX_QP_ATTR_INIT;
    for (unsigned bit : {unsigned(IBEX_QP_STATE), unsigned(IBEX_QP_DEST), unsigned(IBEX_QP_RQ_PSN),
                         unsigned(IBEX_QP_SQ_PSN), 1u << 20}) {
        EXPECT_EQ(ibex_qp_connect_attr(a.qp, &ba, &at, bit), IBEX_ERR_INVALID_ARGUMENT) << bit;
        EXPECT_TRUE(mentions(ibex_last_error(), "ibex_qp_connect_attr")) << ibex_last_error();
    }
    EXPECT_EQ(ibex_qp_connect_attr(a.qp, &ba, nullptr, IBEX_QP_TIMEOUT), IBEX_ERR_INVALID_ARGUMENT);
    ibex_qp_attr_t wrong = IBEX_QP_ATTR_INIT;
    wrong.magic = IBEX_MAGIC_QP_INIT_ATTR;
    EXPECT_EQ(ibex_qp_connect_attr(a.qp, &ba, &wrong, IBEX_QP_TIMEOUT), IBEX_ERR_INVALID_ARGUMENT);
    at.path_mtu = static_cast<ibex_mtu_t>(6);
    EXPECT_EQ(ibex_qp_connect_attr(a.qp, &ba, &at, IBEX_QP_PATH_MTU), IBEX_ERR_INVALID_ARGUMENT)
        << "not an IB MTU: refused, not lowered";
    EXPECT_EQ(query(a).qp_state, IBEX_QPS_RESET) << "refused before the first step: the QP is where it was";
    at.timeout = 40;
    EXPECT_EQ(ibex_qp_connect_attr(a.qp, &ba, &at, IBEX_QP_TIMEOUT | IBEX_QP_SL), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(ibex_last_error(), "ibex_qp_connect_attr: timeout must be 0..31");
    EXPECT_EQ(query(a).qp_state, IBEX_QPS_RESET);
    IBEX_ASSERT_OK(ibex_qp_connect_attr(a.qp, &ba, nullptr, 0)); // NULL with nothing chosen: ibex_qp_connect
    EXPECT_EQ(query(a).qp_state, IBEX_QPS_RTS);
}

// IBEX_TRAFFIC_CLASS and IBEX_SL give a context's new QPs their path, as on verbs, until a
// QP is given its own; a value out of range is ignored (with a warning).
TEST_P(EveryProvider, TheEnvironmentGivesNewQpsTheirPath) {
    {
        const test::ScopedEnv tc("IBEX_TRAFFIC_CLASS", "104"), sl("IBEX_SL", "3");
        open();
    }
    a.connect_attr.sl = 6;
    a.connect_mask = IBEX_QP_SL;
    test::connect_pair(a, b);
    EXPECT_EQ(query(b).traffic_class, 104);
    EXPECT_EQ(query(b).sl, 3);
    EXPECT_EQ(query(a).traffic_class, 104);
    EXPECT_EQ(query(a).sl, 6) << "the QP's own level wins";
    expect_write_works(0x21);

    a.close();
    const test::ScopedEnv bad("IBEX_SL", "9");
    a.open(1 << 16, GetParam());
    ASSERT_TRUE(a.ok()) << ibex_last_error();
    EXPECT_EQ(query(a).sl, 0) << "IBEX_SL=9 is no level: none is set";
}

INSTANTIATE_TEST_SUITE_P(Soft, EveryProvider, ::testing::Values("udp:lo"));
INSTANTIATE_TEST_SUITE_P(Shm, EveryProvider, ::testing::Values("shm"));

// ibex_qp_connect_attr's steps as a provider sees them, recorded by a fake provider.
struct Recorded {
    ibex_qp_attr_t attr;
    unsigned mask;
};
std::vector<Recorded> g_steps;

ibex_status_t record_modify(ibex_qp *, const ibex_qp_attr_t *a, unsigned mask) {
    g_steps.push_back({*a, mask});
    return IBEX_OK;
}
ibex_status_t fake_local_addr(ibex_qp *, ibex_ep_addr_t *out) {
    *out = {};
    out->gid[10] = out->gid[11] = 0xff;
    out->gid[12] = 10, out->gid[15] = 1;
    out->udp_port = 4791;
    out->mtu = IBEX_MTU_4096;
    out->qpn = 0x111;
    out->psn = 0x222;
    return IBEX_OK;
}
const ProviderOps kRecordingOps = {.name = "recording", .modify_qp = record_modify, .qp_local_addr = fake_local_addr};

TEST(QpConnectAttr, EachAttributeAtItsTransition) {
    ibex_context ctx{&kRecordingOps, "recording:0"};
    ibex_cq cq{&ctx, 16};
    ibex_pd pd{&ctx};
    ibex_qp qp{&pd, &cq, &cq, 1};
    ibex_ep_addr_t peer{};
    fake_local_addr(nullptr, &peer);
    peer.gid[15] = 2;
    peer.mtu = IBEX_MTU_2048;
    peer.qpn = 0x333;
    peer.psn = 0x444;
    ibex_qp_attr_t want = IBEX_QP_ATTR_INIT;
    want.timeout = 18;
    want.retry_cnt = 5;
    want.rnr_retry = 6;
    want.min_rnr_timer = 7;
    want.max_rd_atomic = 8;
    want.traffic_class = 106;
    want.sl = 3;
    want.path_mtu = IBEX_MTU_4096; // more than the peer carries: lowered to 2048
    g_steps.clear();
    IBEX_ASSERT_OK(ibex_qp_connect_attr(&qp, &peer, &want,
                                        IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY |
                                            IBEX_QP_MIN_RNR_TIMER | IBEX_QP_MAX_RD_ATOMIC | IBEX_QP_TRAFFIC_CLASS |
                                            IBEX_QP_SL | IBEX_QP_PATH_MTU));
    ASSERT_EQ(g_steps.size(), 3u);
    const ibex_qp_state_t states[] = {IBEX_QPS_INIT, IBEX_QPS_RTR, IBEX_QPS_RTS};
    ibex_qp_state_t from = IBEX_QPS_RESET;
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(g_steps[i].attr.qp_state, states[i]);
        EXPECT_EQ(g_steps[i].mask & ~qp_transition_attrs(from, states[i]), 0u) << "step " << i;
        from = states[i];
    }
    const Recorded &rtr = g_steps[1], &rts = g_steps[2];
    EXPECT_EQ(rtr.mask & (IBEX_QP_SL | IBEX_QP_TRAFFIC_CLASS | IBEX_QP_MAX_RD_ATOMIC | IBEX_QP_MIN_RNR_TIMER),
              unsigned(IBEX_QP_SL | IBEX_QP_TRAFFIC_CLASS | IBEX_QP_MAX_RD_ATOMIC | IBEX_QP_MIN_RNR_TIMER));
    EXPECT_EQ(rtr.attr.path_mtu, IBEX_MTU_2048);
    EXPECT_EQ(rtr.attr.rq_psn, 0x444u);
    EXPECT_EQ(rtr.attr.dest.qpn, 0x333u);
    EXPECT_EQ(rts.mask & (IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY | IBEX_QP_MAX_RD_ATOMIC),
              unsigned(IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY | IBEX_QP_MAX_RD_ATOMIC));
    EXPECT_EQ(rts.attr.sq_psn, 0x222u);
    EXPECT_EQ(rts.attr.timeout, 18);
    EXPECT_EQ(rts.attr.retry_cnt, 5);

#ifdef IBEX_HAVE_VERBS
    // The same steps through the verbs provider's translation, as on an RNIC.
    verbs::PortFacts port;
    port.gid_index = 3;
    port.active_mtu = IBV_MTU_4096;
    port.sl = 0;
    verbs::QpMemory mem;
    std::vector<verbs::VerbsModify> out(3);
    for (size_t i = 0; i < 3; ++i) {
        ASSERT_EQ(verbs::build_modify(g_steps[i].attr, g_steps[i].mask, mem, port, &out[i]), IBEX_OK)
            << "step " << i << ": " << ibex_last_error();
        verbs::commit_modify(g_steps[i].attr, g_steps[i].mask, &mem);
    }
    EXPECT_EQ(out[1].attr.ah_attr.sl, 3);
    EXPECT_EQ(out[1].attr.ah_attr.grh.traffic_class, 104) << "the ECN bits are the RNIC's";
    EXPECT_EQ(out[1].attr.max_dest_rd_atomic, 8);
    EXPECT_EQ(out[1].attr.min_rnr_timer, 7);
    EXPECT_EQ(out[1].attr.path_mtu, IBV_MTU_2048);
    EXPECT_EQ(out[2].attr.max_rd_atomic, 8);
    EXPECT_EQ(out[2].attr.timeout, 18);
    EXPECT_EQ(out[2].attr.rnr_retry, 6);
#endif
}

} // namespace
} // namespace ibex

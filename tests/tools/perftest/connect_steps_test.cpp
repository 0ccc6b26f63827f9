// The perftest tools' QP bring-up, replayed through the verbs provider's translation
// (the code an RNIC run goes through), so that what passes here on the software
// providers also passes on hardware: each attribute at the transition where verbs
// takes it, none left for RTS -> RTS, which an RNIC refuses.
#include <gtest/gtest.h>

#include <algorithm>

#include "tools/ibex_perftest/rdma.h"

#ifdef IBEX_HAVE_VERBS
#include "transport/verbs/qp_attr.h"
#endif

namespace ibex::perftest {
namespace {

ibex_ep_addr_t local_address() {
    ibex_ep_addr_t a{};
    a.gid[10] = a.gid[11] = 0xff;
    a.gid[12] = 10, a.gid[15] = 1;
    a.udp_port = kRoceUdpPort;
    a.mtu = IBEX_MTU_4096;
    a.qpn = 0x111;
    a.psn = 0x222;
    return a;
}

KeyRecord peer_record(uint16_t out_reads) {
    KeyRecord k;
    k.gid[10] = k.gid[11] = 0xff;
    k.gid[12] = 10, k.gid[15] = 2;
    k.qpn = 0x333;
    k.psn = 0x444;
    k.out_reads = out_reads;
    return k;
}

TEST(PerftestConnect, StepsCarryTheFlagsToTheTransitionsThatTakeThem) {
    ConnectParams p;
    p.mtu_bytes = 1024;
    p.out_reads = 8;
    p.traffic_class = 106;
    p.timeout = 18;
    const auto steps = connect_steps(local_address(), peer_record(4), p);
    EXPECT_EQ(steps[0].attr.qp_state, IBEX_QPS_INIT);
    EXPECT_TRUE(steps[0].attr.qp_access_flags & IBEX_ACCESS_REMOTE_READ);
    const ibex_qp_attr_t &rtr = steps[1].attr;
    EXPECT_EQ(rtr.qp_state, IBEX_QPS_RTR);
    EXPECT_EQ(rtr.dest.qpn, 0x333u);
    EXPECT_EQ(rtr.rq_psn, 0x444u);
    EXPECT_EQ(rtr.path_mtu, IBEX_MTU_1024);
    EXPECT_EQ(rtr.max_rd_atomic, 8) << "responder resources: what this side serves (-o)";
    EXPECT_EQ(rtr.traffic_class, 106);
    EXPECT_TRUE(steps[1].mask & IBEX_QP_TRAFFIC_CLASS);
    EXPECT_FALSE(steps[1].mask & IBEX_QP_SL) << "no -S: the provider's service level";
    const ibex_qp_attr_t &rts = steps[2].attr;
    EXPECT_EQ(rts.qp_state, IBEX_QPS_RTS);
    EXPECT_EQ(rts.sq_psn, 0x222u);
    EXPECT_EQ(rts.timeout, 18);
    EXPECT_EQ(rts.max_rd_atomic, 4) << "initiator depth: never more than the peer serves";

    // No agreed MTU, or one above the port's: the port's.
    p.mtu_bytes = 0;
    EXPECT_EQ(connect_steps(local_address(), peer_record(0), p)[1].attr.path_mtu, IBEX_MTU_4096);
    ibex_ep_addr_t small = local_address();
    small.mtu = IBEX_MTU_2048;
    p.mtu_bytes = 4096;
    EXPECT_EQ(connect_steps(small, peer_record(0), p)[1].attr.path_mtu, IBEX_MTU_2048);
    // -S: the service level, at RTR.
    p.sl = 5;
    const auto with_sl = connect_steps(local_address(), peer_record(0), p);
    EXPECT_TRUE(with_sl[1].mask & IBEX_QP_SL);
    EXPECT_EQ(with_sl[1].attr.sl, 5);
    p.sl = -1;
    // A stock peer that advertises no outstanding reads: 16, perftest's default.
    p.out_reads = 16;
    EXPECT_EQ(connect_steps(local_address(), peer_record(0), p)[2].attr.max_rd_atomic, 16);
}

TEST(PerftestConnect, AnRnicTakesEveryStep) {
#ifndef IBEX_HAVE_VERBS
    GTEST_SKIP() << "built without rdma-core (libibverbs-dev): the verbs translation is not compiled in";
#else
    verbs::PortFacts port;
    port.gid_index = 3;
    port.active_mtu = IBV_MTU_4096;
    port.max_rd_atomic = 16;
    port.max_dest_rd_atomic = 16;
    verbs::QpMemory mem;
    mem.initial_sq_psn = 0x222;
    ConnectParams p;
    p.out_reads = 8;
    p.traffic_class = 106;
    p.timeout = 18;
    p.sl = 3;
    const auto steps = connect_steps(local_address(), peer_record(4), p);
    verbs::VerbsModify m[3];
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(verbs::build_modify(steps[i].attr, steps[i].mask, mem, port, &m[i]), IBEX_OK)
            << "step " << i << ": " << ibex_last_error();
        verbs::commit_modify(steps[i].attr, steps[i].mask, &mem);
    }
    EXPECT_EQ(mem.state, IBEX_QPS_RTS);
    EXPECT_EQ(m[1].attr.max_dest_rd_atomic, 8);
    EXPECT_EQ(m[1].attr.ah_attr.grh.traffic_class, 104) << "the DSCP goes down; ECN is the RNIC's";
    EXPECT_EQ(m[1].attr.dest_qp_num, 0x333u);
    EXPECT_EQ(m[1].attr.ah_attr.sl, 3) << "-S reaches the address vector";
    EXPECT_EQ(m[2].attr.max_rd_atomic, 4);
    EXPECT_EQ(m[2].attr.timeout, 18);
    EXPECT_EQ(m[2].attr.sq_psn, 0x222u);

    // What the tools did before: connect with defaults, then set the depth on the RTS QP.
    // Verbs refuses that, so no RNIC run of a perftest tool got past its connect.
    ibex_qp_attr_t late = IBEX_QP_ATTR_INIT;
    late.max_rd_atomic = 4;
    verbs::VerbsModify refused;
    EXPECT_EQ(verbs::build_modify(late, IBEX_QP_MAX_RD_ATOMIC, mem, port, &refused), IBEX_ERR_INVALID_ARGUMENT);
#endif
}

} // namespace
} // namespace ibex::perftest

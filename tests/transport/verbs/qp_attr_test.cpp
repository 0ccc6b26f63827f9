// ibex_modify_qp -> ibv_modify_qp attribute construction, from a fixture port.
#include <cstring>

#include <gtest/gtest.h>

#include "tests/transport/verbs/fixture.h"
#include "transport/verbs/gid_select.h"
#include "transport/verbs/qp_attr.h"
#include "transport/verbs/sysfs.h"

namespace ibex::verbs {
namespace {

// The facts open_device derives, here from the connectx fixture: GID by policy, MTU from
// the GID's netdev (ibv_query_port's active_mtu on hardware).
PortFacts connectx_port1() {
    auto root = test::fixture_root("connectx");
    PortInfo info;
    std::string err;
    EXPECT_TRUE(DeviceSysfs(*root, "mlx5_0").read_port(1, &info, &err)) << err;
    const GidChoice gid = select_gid(info, GidPolicy{});
    PortFacts f;
    f.port_num = 1;
    f.gid_index = gid.index;
    f.active_mtu = roce_mtu_for_netdev(netdev_mtu(*root, gid.entry.ndev));
    f.max_rd_atomic = 16;
    f.max_dest_rd_atomic = 16;
    return f;
}

ibex_ep_addr_t peer() {
    ibex_ep_addr_t d{};
    d.gid[10] = d.gid[11] = 0xff;
    d.gid[12] = 192, d.gid[13] = 0, d.gid[14] = 2, d.gid[15] = 20;
    d.qpn = 0x1234;
    d.psn = 0xabcdef;
    d.mtu = IBEX_MTU_4096;
    return d;
}

TEST(VerbsQpAttr, RoceMtuFromNetdevMtu) {
    EXPECT_EQ(roce_mtu_for_netdev(9000), IBV_MTU_4096);
    EXPECT_EQ(roce_mtu_for_netdev(4200), IBV_MTU_4096);
    EXPECT_EQ(roce_mtu_for_netdev(4100), IBV_MTU_2048);
    EXPECT_EQ(roce_mtu_for_netdev(1500), IBV_MTU_1024);
    EXPECT_EQ(roce_mtu_for_netdev(1000), IBV_MTU_512);
    EXPECT_EQ(roce_mtu_for_netdev(0), IBV_MTU_256);
}

TEST(VerbsQpAttr, ConnectSequenceFromFixturePort) {
    const PortFacts port = connectx_port1();
    ASSERT_EQ(port.gid_index, 3);
    ASSERT_EQ(port.active_mtu, IBV_MTU_4096); // enp1s0f0 has MTU 9000
    QpMemory mem;
    mem.initial_sq_psn = 0x111111;
    mem.traffic_class = 106; // DSCP 26 with ECT(0) bits set by mistake: only the DSCP goes down

    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a.qp_state = IBEX_QPS_INIT;
    a.qp_access_flags = IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ;
    VerbsModify m;
    ASSERT_EQ(build_modify(a, IBEX_QP_STATE | IBEX_QP_ACCESS_FLAGS, mem, port, &m), IBEX_OK);
    EXPECT_EQ(m.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    EXPECT_EQ(m.attr.qp_state, IBV_QPS_INIT);
    EXPECT_EQ(m.attr.port_num, 1);
    EXPECT_EQ(m.attr.pkey_index, 0);
    EXPECT_EQ(m.attr.qp_access_flags, unsigned(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
    commit_modify(a, IBEX_QP_STATE | IBEX_QP_ACCESS_FLAGS, &mem);
    EXPECT_EQ(mem.state, IBEX_QPS_INIT);

    a.qp_state = IBEX_QPS_RTR;
    a.dest = peer();
    a.dest.mtu = IBEX_MTU_1024; // the peer's port is smaller
    ASSERT_EQ(build_modify(a, IBEX_QP_STATE | IBEX_QP_DEST, mem, port, &m), IBEX_OK);
    EXPECT_EQ(m.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    EXPECT_EQ(m.attr.ah_attr.is_global, 1);
    EXPECT_EQ(m.attr.ah_attr.port_num, 1);
    EXPECT_EQ(m.attr.ah_attr.dlid, 0);
    EXPECT_EQ(m.attr.ah_attr.grh.sgid_index, 3);
    EXPECT_EQ(std::memcmp(m.attr.ah_attr.grh.dgid.raw, a.dest.gid, 16), 0);
    EXPECT_EQ(m.attr.ah_attr.grh.traffic_class, 104); // DSCP 26 << 2, ECN bits cleared
    EXPECT_EQ(m.attr.ah_attr.grh.hop_limit, 64);
    EXPECT_EQ(m.attr.dest_qp_num, 0x1234u);
    EXPECT_EQ(m.attr.rq_psn, 0xabcdefu);       // from the peer's address
    EXPECT_EQ(m.attr.path_mtu, IBV_MTU_1024);  // min(port, peer)
    EXPECT_EQ(m.attr.max_dest_rd_atomic, 16);
    EXPECT_EQ(m.attr.min_rnr_timer, 12);
    commit_modify(a, IBEX_QP_STATE | IBEX_QP_DEST, &mem);

    a.qp_state = IBEX_QPS_RTS;
    ASSERT_EQ(build_modify(a, IBEX_QP_STATE, mem, port, &m), IBEX_OK);
    EXPECT_EQ(m.mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC);
    EXPECT_EQ(m.attr.sq_psn, 0x111111u); // what qp_local_addr advertised
    EXPECT_EQ(m.attr.timeout, 14);
    EXPECT_EQ(m.attr.retry_cnt, 7);
    EXPECT_EQ(m.attr.rnr_retry, 7);
    EXPECT_EQ(m.attr.max_rd_atomic, 16);
}

TEST(VerbsQpAttr, CallerValuesWinOverDefaults) {
    PortFacts port = connectx_port1();
    port.max_dest_rd_atomic = 8;
    QpMemory mem;
    mem.state = IBEX_QPS_INIT;
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a.qp_state = IBEX_QPS_RTR;
    a.dest = peer();
    a.path_mtu = IBEX_MTU_2048;
    a.rq_psn = 0x42;
    a.min_rnr_timer = 3;
    a.max_rd_atomic = 32; // capped by the device
    a.traffic_class = 0x60;
    VerbsModify m;
    const unsigned mask = IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_PATH_MTU | IBEX_QP_RQ_PSN | IBEX_QP_MIN_RNR_TIMER |
                          IBEX_QP_MAX_RD_ATOMIC | IBEX_QP_TRAFFIC_CLASS;
    ASSERT_EQ(build_modify(a, mask, mem, port, &m), IBEX_OK);
    EXPECT_EQ(m.attr.path_mtu, IBV_MTU_2048);
    EXPECT_EQ(m.attr.rq_psn, 0x42u);
    EXPECT_EQ(m.attr.min_rnr_timer, 3);
    EXPECT_EQ(m.attr.max_dest_rd_atomic, 8);
    EXPECT_EQ(m.attr.ah_attr.grh.traffic_class, 0x60);

    mem.state = IBEX_QPS_RTR;
    a.qp_state = IBEX_QPS_RTS;
    a.sq_psn = 0x1000005; // 25 bits: masked to 24
    a.timeout = 20;
    a.retry_cnt = 2;
    a.rnr_retry = 0;
    ASSERT_EQ(build_modify(a, IBEX_QP_STATE | IBEX_QP_SQ_PSN | IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY,
                           mem, port, &m),
              IBEX_OK);
    EXPECT_EQ(m.attr.sq_psn, 5u);
    EXPECT_EQ(m.attr.timeout, 20);
    EXPECT_EQ(m.attr.retry_cnt, 2);
    EXPECT_EQ(m.attr.rnr_retry, 0);
}

TEST(VerbsQpAttr, RejectsWhatVerbsWouldRefuse) {
    const PortFacts port = connectx_port1();
    QpMemory mem;
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    VerbsModify m;
    a.qp_state = IBEX_QPS_RTR;
    EXPECT_EQ(build_modify(a, IBEX_QP_STATE, mem, port, &m), IBEX_ERR_INVALID_STATE); // RESET -> RTR
    EXPECT_NE(std::string(ibex_last_error()).find("RESET -> RTR"), std::string::npos) << ibex_last_error();

    mem.state = IBEX_QPS_INIT;
    EXPECT_EQ(build_modify(a, IBEX_QP_STATE, mem, port, &m), IBEX_ERR_INVALID_ARGUMENT); // no DEST
    a.dest = peer();
    a.path_mtu = static_cast<ibex_mtu_t>(6);
    EXPECT_EQ(build_modify(a, IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_PATH_MTU, mem, port, &m), IBEX_ERR_INVALID_ARGUMENT);
    PortFacts small = port;
    small.active_mtu = IBV_MTU_1024;
    a.path_mtu = IBEX_MTU_4096;
    EXPECT_EQ(build_modify(a, IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_PATH_MTU, mem, small, &m), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("active MTU"), std::string::npos);
    PortFacts no_gid = port;
    no_gid.gid_index = -1;
    EXPECT_EQ(build_modify(a, IBEX_QP_STATE | IBEX_QP_DEST, mem, no_gid, &m), IBEX_ERR_INVALID_STATE);

    a.retry_cnt = 8;
    EXPECT_EQ(build_modify(a, IBEX_QP_RETRY_CNT, mem, port, &m), IBEX_ERR_INVALID_ARGUMENT);
    a.retry_cnt = 7;
    a.timeout = 32;
    EXPECT_EQ(build_modify(a, IBEX_QP_TIMEOUT, mem, port, &m), IBEX_ERR_INVALID_ARGUMENT);

    mem.state = IBEX_QPS_RTS;
    a.timeout = 10;
    EXPECT_EQ(build_modify(a, IBEX_QP_TIMEOUT, mem, port, &m), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("RTS -> RTS does not take timeout"), std::string::npos)
        << ibex_last_error();
    a.min_rnr_timer = 1;
    ASSERT_EQ(build_modify(a, IBEX_QP_MIN_RNR_TIMER, mem, port, &m), IBEX_OK);
    EXPECT_EQ(m.mask, IBV_QP_MIN_RNR_TIMER);
}

TEST(VerbsQpAttr, ErrorAndResetNeedOnlyTheState) {
    const PortFacts port = connectx_port1();
    QpMemory mem;
    mem.state = IBEX_QPS_RTS;
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a.qp_state = IBEX_QPS_ERR;
    a.timeout = 3;
    VerbsModify m;
    EXPECT_EQ(build_modify(a, IBEX_QP_STATE | IBEX_QP_TIMEOUT, mem, port, &m), IBEX_ERR_INVALID_ARGUMENT)
        << "ibv_modify_qp refuses attributes beside a move to ERR";
    ASSERT_EQ(build_modify(a, IBEX_QP_STATE, mem, port, &m), IBEX_OK);
    EXPECT_EQ(m.mask, IBV_QP_STATE);
    EXPECT_EQ(m.attr.qp_state, IBV_QPS_ERR);
    mem.state = IBEX_QPS_ERR;
    a.qp_state = IBEX_QPS_RESET;
    ASSERT_EQ(build_modify(a, IBEX_QP_STATE, mem, port, &m), IBEX_OK);
    EXPECT_EQ(m.attr.qp_state, IBV_QPS_RESET);
}

} // namespace
} // namespace ibex::verbs

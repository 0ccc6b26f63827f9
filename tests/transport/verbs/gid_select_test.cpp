// GID table reading and RoCE v2 GID selection against fixture sysfs trees.
#include <arpa/inet.h>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "tests/transport/verbs/fixture.h"
#include "transport/verbs/gid_select.h"
#include "transport/verbs/sysfs.h"

namespace ibex::verbs {
namespace {

PortInfo read(const char *root_name, const char *dev, int port) {
    auto root = test::fixture_root(root_name);
    EXPECT_TRUE(root->valid()) << root->error();
    DeviceSysfs sysfs(*root, dev);
    PortInfo info;
    std::string err;
    EXPECT_TRUE(sysfs.read_port(port, &info, &err)) << err;
    return info;
}

GidPolicy policy_for_address(const char *addr) {
    GidPolicy p;
    EXPECT_TRUE(p.set_address(addr));
    return p;
}

TEST(VerbsSysfs, ParsesGidText) {
    uint8_t g[16];
    ASSERT_TRUE(parse_sysfs_gid("0000:0000:0000:0000:0000:ffff:c000:020a", g));
    EXPECT_TRUE(gid_is_ipv4_mapped(g));
    EXPECT_EQ(gid_to_string(g), "::ffff:192.0.2.10");
    ASSERT_TRUE(parse_sysfs_gid("fe80:0:0:0:e42:a1ff:fe2b:3c4d", g));
    EXPECT_EQ(gid_to_string(g), "fe80::e42:a1ff:fe2b:3c4d");
    EXPECT_FALSE(parse_sysfs_gid("fe80::1", g));                       // sysfs never compresses
    EXPECT_FALSE(parse_sysfs_gid("0000:0000:0000:0000:0000:ffff:c000", g)); // 7 groups
    EXPECT_FALSE(parse_sysfs_gid("0000:0000:0000:0000:0000:ffff:c000:020a:1", g));
    EXPECT_FALSE(parse_sysfs_gid("00000:0000:0000:0000:0000:ffff:c000:020a", g));
    EXPECT_EQ(parse_gid_type("RoCE v2"), GidType::kRoceV2);
    EXPECT_EQ(parse_gid_type("IB/RoCE v1"), GidType::kRoceV1);
    EXPECT_EQ(parse_gid_type("bogus"), GidType::kUnknown);
}

TEST(VerbsSysfs, ReadsConnectXPort) {
    auto root = test::fixture_root("connectx");
    DeviceSysfs sysfs(*root, "mlx5_0");
    ASSERT_TRUE(sysfs.exists());
    EXPECT_EQ(sysfs.ports(), (std::vector<int>{1, 2}));
    EXPECT_EQ(list_sysfs_devices(*root), std::vector<std::string>{"mlx5_0"});
    EXPECT_FALSE(DeviceSysfs(*root, "mlx5_9").exists());

    PortInfo p1 = read("connectx", "mlx5_0", 1);
    EXPECT_TRUE(p1.active);
    EXPECT_EQ(p1.link_layer, "Ethernet");
    ASSERT_EQ(p1.gids.size(), 8u); // the two all-zero entries are dropped
    EXPECT_EQ(p1.gids[3].index, 3);
    EXPECT_EQ(p1.gids[3].type, GidType::kRoceV2);
    EXPECT_EQ(p1.gids[3].ndev, "enp1s0f0");
    EXPECT_EQ(p1.gids[2].type, GidType::kRoceV1);
    EXPECT_EQ(p1.gids[7].ndev, "enp1s0f0.100");
    EXPECT_EQ(p1.base_netdevs, (std::vector<std::string>{"enp1s0f0", "enp1s0f1"}));

    PortInfo p2 = read("connectx", "mlx5_0", 2);
    EXPECT_FALSE(p2.active);
    EXPECT_EQ(p2.gids.size(), 2u);

    PortInfo none;
    std::string err;
    EXPECT_FALSE(sysfs.read_port(3, &none, &err));
    EXPECT_NE(err.find("ports/3/state"), std::string::npos) << err;
}

TEST(VerbsGid, DefaultIsIpv4RoceV2OnTheUntaggedNetdev) {
    const GidChoice c = select_gid(read("connectx", "mlx5_0", 1), GidPolicy{});
    EXPECT_EQ(c.index, 3) << c.reason;
    EXPECT_EQ(gid_to_string(c.entry.gid), "::ffff:192.0.2.10");
    EXPECT_NE(c.reason.find("enp1s0f0"), std::string::npos) << c.reason;
}

TEST(VerbsGid, FamilyNetdevAndAddressPolicies) {
    const PortInfo p = read("connectx", "mlx5_0", 1);
    GidPolicy v6;
    v6.family = GidFamily::kIpv6;
    EXPECT_EQ(select_gid(p, v6).index, 5); // global IPv6 before the link-local entry 1

    GidPolicy vlan;
    vlan.netdev = "enp1s0f0.100";
    EXPECT_EQ(select_gid(p, vlan).index, 7);

    EXPECT_EQ(select_gid(p, policy_for_address("198.51.100.10")).index, 7);
    EXPECT_EQ(select_gid(p, policy_for_address("2001:db8::10")).index, 5);
    const GidChoice missing = select_gid(p, policy_for_address("192.0.2.99"));
    EXPECT_EQ(missing.index, -1);
    EXPECT_NE(missing.reason.find("192.0.2.99"), std::string::npos) << missing.reason;

    GidPolicy v6_on_vlan; // the VLAN has no IPv6 address
    v6_on_vlan.family = GidFamily::kIpv6;
    v6_on_vlan.netdev = "enp1s0f0.100";
    EXPECT_EQ(select_gid(p, v6_on_vlan).index, -1);
}

TEST(VerbsGid, ForcedIndexIsTakenAsIsButMustExist) {
    const PortInfo p = read("connectx", "mlx5_0", 1);
    GidPolicy forced;
    forced.forced_index = 2; // a RoCE v1 entry: the operator's call
    const GidChoice c = select_gid(p, forced);
    EXPECT_EQ(c.index, 2);
    EXPECT_EQ(c.entry.type, GidType::kRoceV1);
    forced.forced_index = 8; // unpopulated
    EXPECT_EQ(select_gid(p, forced).index, -1);
    forced.forced_index = 42;
    EXPECT_NE(select_gid(p, forced).reason.find("42"), std::string::npos);
}

TEST(VerbsGid, Ipv4OnAVlanBeatsTheLinkLocalGid) {
    EXPECT_EQ(select_gid(read("vlan_only", "mlx5_1", 1), GidPolicy{}).index, 3);
}

TEST(VerbsGid, RoceV1OnlyTableHasNoChoice) {
    const GidChoice c = select_gid(read("v1_only", "mlx4_0", 1), GidPolicy{});
    EXPECT_EQ(c.index, -1);
    EXPECT_NE(c.reason.find("no RoCE v2 GID"), std::string::npos) << c.reason;
}

TEST(VerbsGid, DownPortStillReadsButIsNotActive) {
    const PortInfo p = read("connectx", "mlx5_0", 2);
    EXPECT_FALSE(p.active);
    EXPECT_EQ(select_gid(p, GidPolicy{}).index, 1); // only the link-local v2 entry exists
}

TEST(VerbsGid, PolicyFromEnvironment) {
    setenv("IBEX_GID_INDEX", "5", 1);
    setenv("IBEX_GID_FAMILY", "ipv6", 1);
    setenv("IBEX_GID_NETDEV", "enp1s0f0", 1);
    setenv("IBEX_GID_ADDR", "192.0.2.10", 1);
    GidPolicy p;
    std::string err;
    ASSERT_TRUE(GidPolicy::from_env(&p, &err)) << err;
    EXPECT_EQ(p.forced_index, 5);
    EXPECT_EQ(p.family, GidFamily::kIpv6);
    EXPECT_EQ(p.netdev, "enp1s0f0");
    EXPECT_TRUE(p.has_address);
    EXPECT_TRUE(gid_is_ipv4_mapped(p.address));

    setenv("IBEX_GID_INDEX", "x1", 1);
    EXPECT_FALSE(GidPolicy::from_env(&p, &err));
    EXPECT_NE(err.find("IBEX_GID_INDEX"), std::string::npos);
    unsetenv("IBEX_GID_INDEX");
    setenv("IBEX_GID_FAMILY", "ipv5", 1);
    EXPECT_FALSE(GidPolicy::from_env(&p, &err));
    unsetenv("IBEX_GID_FAMILY");
    setenv("IBEX_GID_ADDR", "not-an-address", 1);
    EXPECT_FALSE(GidPolicy::from_env(&p, &err));
    unsetenv("IBEX_GID_ADDR");
    unsetenv("IBEX_GID_NETDEV");
    ASSERT_TRUE(GidPolicy::from_env(&p, &err));
    EXPECT_EQ(p.forced_index, -1);
    EXPECT_FALSE(p.has_address);
}

TEST(VerbsSysfs, CountersUseIbexNames) {
    auto root = test::fixture_root("connectx");
    ibex_counters_t c{};
    c.size = sizeof c;
    DeviceSysfs(*root, "mlx5_0").read_counters(1, &c);
    EXPECT_EQ(c.size, sizeof c);
    EXPECT_EQ(c.tx_packets, 1000u);
    EXPECT_EQ(c.tx_bytes, 100000u); // port_xmit_data counts 4-byte words
    EXPECT_EQ(c.rx_bytes, 90000u);
    EXPECT_EQ(c.np_ecn_marked_roce_packets, 17u);
    EXPECT_EQ(c.np_cnp_sent, 16u);
    EXPECT_EQ(c.rp_cnp_handled, 12u);
    EXPECT_EQ(c.packet_seq_err, 4u);
    EXPECT_EQ(c.rnr_nak_received, 6u);
    EXPECT_EQ(c.remote_access_errors, 7u);
    EXPECT_EQ(c.retransmitted_packets, 8u);
    EXPECT_EQ(c.rx_icrc_errors, 9u);
    ibex_counters_t down{};
    down.size = sizeof down;
    DeviceSysfs(*root, "mlx5_0").read_counters(2, &down); // no counter files: zeros
    EXPECT_EQ(down.tx_packets, 0u);
}

} // namespace
} // namespace ibex::verbs

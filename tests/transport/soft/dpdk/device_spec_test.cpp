// The dpdk device-name grammar (transport/soft/dpdk/README.md): targets, ibex's own keys,
// keys handed to the PMD, and the errors for names that cannot work.
#include <gtest/gtest.h>

#include "transport/soft/dpdk/device_spec.h"

using namespace ibex::soft::dpdk;

namespace {

DeviceSpec parse_ok(const std::string &name) {
    DeviceSpec s;
    std::string err;
    EXPECT_TRUE(parse_device(name, &s, &err)) << name << ": " << err;
    return s;
}

std::string parse_error(const std::string &name) {
    DeviceSpec s;
    std::string err;
    EXPECT_FALSE(parse_device(name, &s, &err)) << name << " should not parse";
    return err;
}

} // namespace

TEST(DpdkDeviceSpec, Targets) {
    EXPECT_TRUE(is_dpdk_device("dpdk:memif"));
    EXPECT_FALSE(is_dpdk_device("udp:lo"));
    EXPECT_FALSE(is_dpdk_device(nullptr));

    DeviceSpec m = parse_ok("dpdk:memif");
    EXPECT_EQ(m.target, Target::kMemif);
    EXPECT_EQ(m.name, "");
    EXPECT_EQ(m.role, MemifRole::kAuto);
    m = parse_ok("dpdk:memif:/tmp/a b.sock,role=client");
    EXPECT_EQ(m.name, "/tmp/a b.sock");
    EXPECT_EQ(m.role, MemifRole::kClient);

    EXPECT_EQ(parse_ok("dpdk:af_xdp:veth0").target, Target::kAfXdp);
    EXPECT_EQ(parse_ok("dpdk:af_xdp:veth0").name, "veth0");
    EXPECT_EQ(parse_ok("dpdk:af_packet:eth1").target, Target::kAfPacket);
    DeviceSpec p = parse_ok("dpdk:pci:0000:3b:00.0");
    EXPECT_EQ(p.target, Target::kPci);
    EXPECT_EQ(p.name, "0000:3b:00.0");
    EXPECT_EQ(parse_ok("dpdk:port:3").target, Target::kPort);
    DeviceSpec v = parse_ok("dpdk:net_tap0,iface=tap9");
    EXPECT_EQ(v.target, Target::kVdev);
    EXPECT_EQ(v.name, "net_tap0");
    EXPECT_EQ(v.pmd_args, "iface=tap9");
}

TEST(DpdkDeviceSpec, IbexKeysAndPmdKeys) {
    DeviceSpec s = parse_ok("dpdk:af_xdp:veth0,ip=10.1.2.3/24,vlan=7,pcp=5,dscp=26,queue_count=1,"
                            "neigh=10.1.2.4@02:00:00:00:00:04,neigh=10.1.2.5@02:00:00:00:00:05,rxd=512,txd=256,"
                            "sleep_us=50,mac=02:aa:bb:cc:dd:ee,busy_budget=0");
    EXPECT_EQ(s.ip, 0x0a010203u);
    EXPECT_EQ(s.prefix_len, 24);
    EXPECT_EQ(s.vlan, 7);
    EXPECT_EQ(s.pcp, 5);
    EXPECT_EQ(s.dscp, 26);
    EXPECT_EQ(s.rxd, 512);
    EXPECT_EQ(s.txd, 256);
    EXPECT_EQ(s.sleep_us, 50u);
    ASSERT_TRUE(s.has_mac);
    EXPECT_EQ(s.mac[0], 0x02);
    EXPECT_EQ(s.mac[5], 0xee);
    ASSERT_EQ(s.neighbours.size(), 2u);
    EXPECT_EQ(s.neighbours[1].ip, 0x0a010205u);
    EXPECT_EQ(s.neighbours[1].mac[5], 0x05);
    EXPECT_EQ(s.pmd_args, "queue_count=1,busy_budget=0") << "unknown keys go to the PMD, in order";
}

TEST(DpdkDeviceSpec, Errors) {
    EXPECT_NE(parse_error("dpdk:bogus0").find("unknown target"), std::string::npos);
    EXPECT_NE(parse_error("dpdk:af_xdp:").find("needs a name"), std::string::npos);
    EXPECT_NE(parse_error("dpdk:memif,vlan=4095").find("vlan=4095"), std::string::npos);
    EXPECT_NE(parse_error("dpdk:memif,dscp=64").find("dscp"), std::string::npos);
    EXPECT_NE(parse_error("dpdk:memif,ip=10.0.0").find("ip="), std::string::npos);
    EXPECT_NE(parse_error("dpdk:memif,role=master").find("role"), std::string::npos);
    EXPECT_NE(parse_error("dpdk:memif,neigh=10.0.0.1").find("neigh"), std::string::npos);
    EXPECT_NE(parse_error("dpdk:port:x").find("port"), std::string::npos);
    EXPECT_FALSE(parse_error("udp:lo").empty());
}

TEST(DpdkDeviceSpec, NeighbourList) {
    std::vector<StaticNeighbour> n;
    ASSERT_TRUE(parse_neighbours("10.0.0.1@02:00:00:00:00:01;10.0.0.2@0a:0b:0c:0d:0e:0f", &n));
    ASSERT_EQ(n.size(), 2u);
    EXPECT_EQ(n[0].ip, 0x0a000001u);
    EXPECT_EQ(n[1].mac[0], 0x0a);
    EXPECT_EQ(n[1].mac[5], 0x0f);
    EXPECT_FALSE(parse_neighbours("10.0.0.1@02:00:00:00:00", &n));
    EXPECT_FALSE(parse_neighbours("10.0.0.1@02:00:00:00:00:1ff", &n));
    uint8_t mac[6];
    EXPECT_FALSE(parse_mac("02:00:00:00:00:", mac));
}

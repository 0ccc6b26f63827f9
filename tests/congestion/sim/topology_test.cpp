// The built-in topologies have the shapes their descriptions promise, routing finds every
// equal-cost path, and the HPCC ns-3 topology format loads (and bad files are refused).
#include <set>

#include <gtest/gtest.h>

#include "congestion/sim/routing.h"
#include "congestion/sim/topology.h"

using namespace ibex::sim;

namespace {
size_t switches(const Topology &t) {
    size_t n = 0;
    for (bool s : t.is_switch) n += s;
    return n;
}
// The uplinks a path may take from host `src` to `dst`, over many hashes.
std::set<uint32_t> second_hops(const Routing &r, uint32_t src, uint32_t dst) {
    std::set<uint32_t> out;
    for (uint64_t h = 0; h < 256; ++h) {
        std::vector<uint32_t> p;
        r.path(src, dst, mix64(h), p);
        out.insert(p.at(1));
    }
    return out;
}
} // namespace

TEST(SimTopology, StarIsOneSwitchWithEveryHost) {
    FabricShape s;
    s.hosts = 9;
    const Topology t = build_star(s);
    EXPECT_EQ(switches(t), 1u);
    EXPECT_EQ(t.hosts.size(), 9u);
    EXPECT_EQ(t.links.size(), 9u);
}

TEST(SimTopology, LeafSpineSpinesFollowTheOversubscription) {
    FabricShape s;
    s.hosts = 64;
    s.hosts_per_leaf = 16;
    s.oversub = 2;
    const Topology t = build_leaf_spine(s);
    // 4 leaves; 16 x 100G down, 2:1 -> 800G up -> 8 spines.
    EXPECT_EQ(switches(t), 12u);
    EXPECT_EQ(t.links.size(), 64u + 4 * 8);
    Routing r;
    ASSERT_EQ(r.build(t), IBEX_OK);
    EXPECT_EQ(second_hops(r, 0, 63).size(), 8u); // ECMP over every spine
    EXPECT_EQ(r.distance(r.host_node(0), 63), 4);
    EXPECT_EQ(r.distance(r.host_node(0), 15), 2);
}

TEST(SimTopology, FatTreeIsKAryWithOversubscribedEdges) {
    FabricShape s;
    s.hosts = 128;
    s.oversub = 2;
    const Topology t = build_fat_tree(s);
    // k = 8: 8 pods x (4 edge + 4 agg) + 16 cores; 8 hosts per edge (2 x k/2).
    EXPECT_EQ(switches(t), 80u);
    Routing r;
    ASSERT_EQ(r.build(t), IBEX_OK);
    EXPECT_EQ(r.distance(r.host_node(0), 127), 6);
    EXPECT_EQ(r.distance(r.host_node(0), 7), 2);
    EXPECT_EQ(second_hops(r, 0, 127).size(), 4u); // any of the pod's aggregation switches
}

TEST(SimTopology, BiGraphJoinsEverySwitchOfOneLayerToEveryOneOfTheOther) {
    FabricShape s;
    s.hosts = 64;
    s.hosts_per_leaf = 8;
    const Topology t = build_bigraph(s);
    EXPECT_EQ(switches(t), 8u);
    EXPECT_EQ(t.links.size(), 64u + 16);
    Routing r;
    ASSERT_EQ(r.build(t), IBEX_OK);
    // Hosts 0-7 hang off upper switch 0, 8-15 off lower switch 0: one switch-to-switch hop.
    EXPECT_EQ(r.distance(r.host_node(0), 8), 3);
    // Two upper switches meet through any of the 4 lower ones.
    EXPECT_EQ(r.distance(r.host_node(0), 16), 4);
    EXPECT_EQ(second_hops(r, 0, 16).size(), 4u);
}

TEST(SimTopology, ReadsTheHpccFormat) {
    const char *text = "5 2 4\n"
                       "3 4\n"
                       "0 3 100Gbps 0.001ms 0\n"
                       "1 3 100Gbps 0.001ms 0\n"
                       "2 4 25Gbps 500ns 0\n"
                       "3 4 400Gbps 1us 0\n";
    Topology t;
    ASSERT_EQ(parse_hpcc_topology(text, t), IBEX_OK) << ibex_last_error();
    ASSERT_EQ(t.hosts.size(), 3u);
    EXPECT_EQ(t.hosts[2], 2u);
    EXPECT_DOUBLE_EQ(t.links[2].gbps, 25);
    EXPECT_EQ(t.links[0].delay_ns, 1000u);
    EXPECT_EQ(t.links[2].delay_ns, 500u);
    EXPECT_DOUBLE_EQ(t.links[3].gbps, 400);
    Routing r;
    EXPECT_EQ(r.build(t), IBEX_OK);
}

TEST(SimTopology, RefusesBadFilesAndFabrics) {
    Topology t;
    EXPECT_EQ(parse_hpcc_topology("3 1\n", t), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(parse_hpcc_topology("3 1 2\n2\n0 2 100Gbps 1us 0\n", t), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("2 links announced, 1 found"), std::string::npos);
    EXPECT_EQ(parse_hpcc_topology("3 1 2\n2\n0 2 fast 1us 0\n1 2 1G 1us 0\n", t), IBEX_ERR_INVALID_ARGUMENT);
    // Host 1 has no link: routing refuses it.
    ASSERT_EQ(parse_hpcc_topology("3 1 1\n2\n0 2 100Gbps 1us 0\n", t), IBEX_OK);
    Routing r;
    EXPECT_EQ(r.build(t), IBEX_ERR_INVALID_ARGUMENT);
    FabricShape s;
    EXPECT_EQ(build_named("torus", s, t), IBEX_ERR_INVALID_ARGUMENT);
    s.hosts = 1;
    EXPECT_EQ(build_named("star", s, t), IBEX_ERR_INVALID_ARGUMENT);
}

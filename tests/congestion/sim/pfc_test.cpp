// DCQCN off, PFC on: an incast through a spine fills the last hop's queue to xoff, that
// switch pauses the spine, the spine's queue fills and it pauses the senders' leaves, and
// they pause the senders: pauses spread upstream, hop by hop, and nothing is dropped.
// With PFC off too, the queue grows to the buffer and packets are dropped (and resent).
#include <algorithm>

#include <gtest/gtest.h>

#include "tests/congestion/sim/sim_fixture.h"

using namespace ibex::sim;
using namespace ibex::sim::test;

namespace {

struct Incast {
    std::unique_ptr<Simulator> sim;
    RunStats st;
    uint64_t buffer;
};

// 8 senders on leaves 1 and 2 into host 0 on leaf 0 through 4 spines (no oversubscription,
// so the last hop is the bottleneck).
Incast run_incast(bool pfc) {
    FabricShape s;
    s.hosts = 12;
    s.hosts_per_leaf = 4;
    s.delay_ns = 1000;
    SimConfig cfg;
    cfg.dcqcn = false;
    cfg.sw.buffer_bytes = 1u << 20;
    cfg.sw.reserve_bytes = 16u << 10;
    cfg.sw.pause = pfc;
    cfg.sw.xoff_bytes = 256u << 10;
    cfg.sw.xon_bytes = 128u << 10;
    cfg.rto_ns = 50'000;
    Incast r;
    r.buffer = cfg.sw.buffer_bytes;
    r.sim = make_sim(build_leaf_spine(s), cfg);
    for (uint32_t h = 4; h < 12; ++h) r.sim->add_message(r.sim->add_qp(h, 0), 2u << 20);
    r.st = r.sim->run();
    return r;
}

} // namespace

TEST(SimPfc, PausesSpreadUpstreamWithoutDrops) {
    Incast r = run_incast(true);
    ASSERT_TRUE(r.st.all_done);
    EXPECT_EQ(r.st.drops, 0u);
    // Switches: leaves 0..2, then spines 3..6 (each spine's port l faces leaf l).
    const auto [leaf0, down] = r.sim->host_port(0);
    ASSERT_EQ(leaf0, 0u);
    const auto ports = r.sim->port_stats();
    uint64_t leaf0_to_host = 0, spine_to_leaf0 = 0, leaf_up = 0;
    for (const PortStats &p : ports) {
        if (p.sw == 0 && p.port == down) leaf0_to_host = p.c.max_queue_bytes;
        if (p.sw >= 3 && p.port == 0) spine_to_leaf0 = std::max(spine_to_leaf0, p.c.max_queue_bytes);
        if ((p.sw == 1 || p.sw == 2) && p.port == 0) leaf_up = std::max(leaf_up, p.c.max_queue_bytes);
    }
    // Each hop's queue reached xoff and its switch paused the hop before it.
    EXPECT_GT(leaf0_to_host, 256u << 10);
    EXPECT_GT(spine_to_leaf0, 256u << 10);
    EXPECT_GT(leaf_up, 256u << 10);
    uint64_t leaf0_pauses = 0, spine_pauses = 0, host_pauses = 0;
    for (uint32_t p = 0; p < 4; ++p) leaf0_pauses += r.sim->pauses_sent(0, p); // ports 0-3: spines
    for (uint32_t sw = 3; sw <= 6; ++sw)
        for (uint32_t p = 1; p <= 2; ++p) spine_pauses += r.sim->pauses_sent(sw, p); // to leaves 1, 2
    for (uint32_t sw = 1; sw <= 2; ++sw)
        for (uint32_t p = 4; p <= 7; ++p) host_pauses += r.sim->pauses_sent(sw, p); // to their hosts
    EXPECT_GT(leaf0_pauses, 0u); // leaf 0 paused the spines
    EXPECT_GT(spine_pauses, 0u); // the spines paused leaves 1 and 2
    EXPECT_GT(host_pauses, 0u);  // they paused the senders
    EXPECT_EQ(r.st.cnps, 0u);
}

TEST(SimPfc, WithoutPfcTheQueueFillsTheBufferAndDrops) {
    Incast r = run_incast(false);
    ASSERT_TRUE(r.st.all_done); // every drop was sent again
    EXPECT_GT(r.st.drops, 0u);
    EXPECT_EQ(r.st.pause_frames, 0u);
    const auto [leaf0, down] = r.sim->host_port(0);
    const uint64_t limit = r.sim->switch_point(leaf0).port_limit();
    uint64_t most = 0;
    for (const PortStats &p : r.sim->port_stats())
        if (p.sw == leaf0 && p.port == down) most = p.c.max_queue_bytes;
    EXPECT_GT(most, limit - 8192); // full to within two packets
    uint64_t resent = 0;
    for (uint32_t q = 0; q < r.sim->qps(); ++q) resent += r.sim->qp_stats(q).retransmits;
    EXPECT_EQ(resent, r.st.drops);
}

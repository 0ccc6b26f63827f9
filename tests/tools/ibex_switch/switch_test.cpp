// The switch on in-memory ports: forwarding by destination with the addresses and ICRC
// rewritten, egress shaping, RED marking on dequeue, tail drop, pause, CSV export.
#include <cstdio>
#include <deque>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include <ibex/ibex.h>

#include "tests/tools/ibex_switch/fake_io.h"
#include "tools/ibex_switch/switch.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/roce.h"

using namespace ibex;
using namespace ibex::sw;

namespace {

using namespace ibex::sw::test;

const NetAddr kE0{0x7f000002, 4791}, kE1{0x7f000003, 4791}, kL0{0x7f000001, 5000}, kL1{0x7f000001, 5001};

struct TwoPorts {
    explicit TwoPorts(SwitchConfig cfg) : sw(cfg) {
        auto a = std::make_unique<FakeIo>(kL0);
        auto b = std::make_unique<FakeIo>(kL1);
        p0 = a.get();
        p1 = b.get();
        sw.add_port(std::move(a), kE0);
        sw.add_port(std::move(b), kE1);
    }
    Switch sw;
    FakeIo *p0;
    FakeIo *p1;
};

} // namespace

TEST(Switch, ForwardsByDestinationAndRewritesAddressesAndIcrc) {
    TwoPorts t{SwitchConfig{}};
    // Endpoint 1 sends to endpoint 0 by addressing switch port 0.
    t.p0->arrive(packet(1000, kE1, kL0), kE1, 0x2);
    t.sw.poll(1'000'000);
    ASSERT_EQ(t.p1->sent.size(), 1u); // leaves from port 1's address (the sender's stand-in)
    EXPECT_TRUE(t.p0->sent.empty());
    const Sent &s = t.p1->sent[0];
    EXPECT_EQ(s.to, kE0);
    EXPECT_EQ(s.tos, 0x2);
    EXPECT_EQ(roce::load_icrc(s.data.data() + s.data.size() - 4), icrc(s.data, kL1, kE0));
    EXPECT_EQ(t.sw.counters(1).rx_packets, 1u);
    EXPECT_EQ(t.sw.counters(0).tx_packets, 1u);
    EXPECT_EQ(t.sw.flow_bytes(1, 0), s.data.size());
}

TEST(Switch, DropsBadIcrcAndUnknownSources) {
    TwoPorts t{SwitchConfig{}};
    auto bad = packet(100, kE1, kL0);
    bad[20] ^= 1;
    t.p0->arrive(bad, kE1, 0x2);
    t.p0->arrive(packet(100, kE1, kL0), NetAddr{0x7f000009, 1}, 0x2);
    t.sw.poll(1'000'000);
    EXPECT_TRUE(t.p1->sent.empty());
    EXPECT_EQ(t.sw.counters(0).icrc_errors, 1u);
    EXPECT_EQ(t.sw.counters(0).unknown_src, 1u);
}

TEST(Switch, ShapesEgressToTheLinkRate) {
    SwitchConfig c;
    c.link_mbps = 1000;
    c.buffer_bytes = 64u << 20;
    c.ecn = false;
    c.burst_ns = 10'000; // the first poll may send this much early; keep it small here
    TwoPorts t{c};
    const size_t kPackets = 2000;
    for (size_t i = 0; i < kPackets; ++i) t.p0->arrive(packet(4096, kE1, kL0), kE1, 0x2);
    // 20 ms of simulated time in 10 us steps.
    uint64_t now = 1'000'000;
    for (int step = 0; step < 2000; ++step, now += 10'000) t.sw.poll(now);
    const double mbps = double(t.sw.counters(0).tx_bytes) * 8 / 20'000.0;
    EXPECT_NEAR(mbps, 1000, 50);
    EXPECT_LT(t.p1->sent.size(), kPackets);
}

TEST(Switch, TailDropsAtTheSharedBuffer) {
    SwitchConfig c;
    c.buffer_bytes = 10 * 4200;
    c.reserve_bytes = 0;
    c.ecn = false;
    TwoPorts t{c};
    const size_t len = packet(4096, kE1, kL0).size();
    for (int i = 0; i < 30; ++i) t.p0->arrive(packet(4096, kE1, kL0), kE1, 0x2);
    t.sw.poll(1'000'000); // one poll: the shaper lets only a burst out
    EXPECT_GT(t.sw.counters(0).dropped, 0u);
    EXPECT_LE(t.sw.counters(0).max_queue_bytes, c.buffer_bytes);
    EXPECT_EQ(t.sw.counters(0).queue_bytes % len, 0u);
    EXPECT_EQ(t.sw.counters(0).dropped + t.sw.counters(0).tx_packets + t.sw.counters(0).queue_bytes / len, 30u);
}

TEST(Switch, EachPortKeepsItsReserveWhenAnotherFillsTheSharedPool) {
    SwitchConfig c;
    c.buffer_bytes = 64 * 1024;
    c.reserve_bytes = 16 * 1024;
    c.ecn = false;
    c.link_mbps = 1; // nothing leaves during the test
    TwoPorts t{c};
    EXPECT_EQ(t.sw.port_limit(), 48u * 1024);
    const size_t len = packet(4096, kE1, kL0).size();
    for (int i = 0; i < 30; ++i) t.p0->arrive(packet(4096, kE1, kL0), kE1, 0x2);
    t.sw.poll(1'000'000);
    EXPECT_GT(t.sw.counters(0).dropped, 0u);
    EXPECT_LE(t.sw.counters(0).max_queue_bytes, t.sw.port_limit());
    EXPECT_GT(t.sw.counters(0).max_queue_bytes, t.sw.port_limit() - len);
    // Port 1 (towards endpoint 1: the ACKs and CNPs of the congested flow) still takes
    // packets up to its reserve.
    for (int i = 0; i < 3; ++i) t.p1->arrive(packet(4096, kE0, kL1), kE0, 0x2);
    t.sw.poll(1'000'001);
    EXPECT_EQ(t.sw.counters(1).dropped, 0u);
    EXPECT_EQ(t.sw.counters(1).queue_bytes + t.sw.counters(1).tx_bytes, 3 * len);
}

TEST(Switch, MarksCeByTheQueueOnlyOnEcnCapablePackets) {
    SwitchConfig c;
    c.red = {0, 4200, 1.0}; // anything queued behind a departing packet marks it
    c.link_mbps = 100;
    TwoPorts t{c};
    for (int i = 0; i < 6; ++i) t.p0->arrive(packet(4096, kE1, kL0), kE1, i < 3 ? 0x2 : 0x0);
    uint64_t now = 1'000'000;
    for (int step = 0; step < 200; ++step, now += 100'000) t.sw.poll(now);
    ASSERT_EQ(t.p1->sent.size(), 6u);
    // The first ECT packets left with others queued behind them: CE. Not-ECT ones never.
    EXPECT_EQ(t.p1->sent[0].tos & 3, 3);
    EXPECT_EQ(t.p1->sent[1].tos & 3, 3);
    for (int i = 3; i < 6; ++i) EXPECT_EQ(t.p1->sent[size_t(i)].tos & 3, 0) << i;
    EXPECT_EQ(t.p1->sent[2].tos & 3, 3);
    EXPECT_EQ(t.sw.counters(0).marked, 3u);
}

TEST(Switch, NoMarksBelowKmin) {
    SwitchConfig c;
    c.red = {1u << 20, 2u << 20, 1.0};
    TwoPorts t{c};
    for (int i = 0; i < 20; ++i) t.p0->arrive(packet(4096, kE1, kL0), kE1, 0x2);
    uint64_t now = 1'000'000;
    for (int step = 0; step < 100; ++step, now += 100'000) t.sw.poll(now);
    EXPECT_EQ(t.p1->sent.size(), 20u);
    EXPECT_EQ(t.sw.counters(0).marked, 0u);
}

TEST(Switch, PauseStopsTakingPacketsForACongestedPortUntilItDrains) {
    SwitchConfig c;
    c.link_mbps = 100; // 4 KiB every ~330 us
    c.pause = true;
    c.xoff_bytes = 5 * 4200;
    c.xon_bytes = 2 * 4200;
    c.ecn = false;
    TwoPorts t{c};
    for (int i = 0; i < 100; ++i) t.p0->arrive(packet(4096, kE1, kL0), kE1, 0x2);
    t.sw.poll(1'000'000);
    EXPECT_EQ(t.sw.counters(0).pauses, 1u);
    EXPECT_EQ(t.sw.counters(0).dropped, 0u);
    const size_t waiting = t.p0->rx.size();
    EXPECT_GT(waiting, 0u); // left upstream (in the sender's path), not dropped
    const int calls = t.p0->recv_calls;
    t.sw.poll(1'100'000); // still above xon: the port is not read
    EXPECT_EQ(t.p0->recv_calls, calls);
    uint64_t now = 1'100'000;
    for (int step = 0; step < 1000 && !t.p0->rx.empty(); ++step) t.sw.poll(now += 100'000);
    EXPECT_TRUE(t.p0->rx.empty());
    EXPECT_EQ(t.sw.counters(0).dropped, 0u);
    EXPECT_GT(t.sw.counters(0).pauses, 1u);
}

TEST(Switch, WritesTheTimeSeries) {
    SwitchConfig c;
    c.sample_ns = 100'000;
    TwoPorts t{c};
    t.p0->arrive(packet(100, kE1, kL0), kE1, 0x2);
    for (uint64_t now = 1'000'000; now < 2'000'000; now += 50'000) t.sw.poll(now);
    const std::string path = ::testing::TempDir() + "/ibex_switch_series.csv";
    std::string err;
    ASSERT_TRUE(t.sw.write_csv(path, err)) << err;
    std::ifstream f(path);
    std::string header, line;
    std::getline(f, header);
    EXPECT_EQ(header, "t_us,port,queue_bytes,tx_bytes,marked,dropped,from0_bytes,from1_bytes");
    int rows = 0;
    while (std::getline(f, line)) ++rows;
    EXPECT_EQ(rows, 2 * 10); // two ports, every 100 us of 1 ms
    std::remove(path.c_str());
    EXPECT_NE(t.sw.summary().find("127.0.0.2:4791"), std::string::npos);
}

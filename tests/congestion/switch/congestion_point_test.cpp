// The congestion point alone, driven with hand-picked times: tail drop, the reserve,
// RED marking on dequeue and on enqueue, shaping to the link rate with a bounded
// catch-up, xoff/xon hysteresis, and its counters.
#include <gtest/gtest.h>

#include <optional>

#include "congestion/switch/congestion_point.h"

using namespace ibex::cc;

namespace {

PacketMeta pkt(uint32_t bytes, uint16_t ingress = 1, bool ect = true, uint32_t handle = 0) {
    return {handle, bytes, ingress, ect};
}

// Two ports, no shaping (rate 0: a packet may always leave), no marking.
CongestionPointConfig unpaced() {
    CongestionPointConfig c;
    c.link_mbps = 0;
    c.ecn = false;
    return c;
}

struct TwoPorts {
    explicit TwoPorts(const CongestionPointConfig &c) : cp(c) {
        cp.add_port();
        cp.add_port();
    }
    CongestionPoint cp;
};

// The fraction of departures marked with `behind` bytes queued behind each one.
double marked_fraction_at(const RedParams &red, uint64_t behind) {
    CongestionPointConfig c = unpaced();
    c.ecn = true;
    c.red = red;
    c.buffer_bytes = 64u << 20;
    TwoPorts t(c);
    constexpr uint32_t kBytes = 100;
    for (uint64_t q = 0; q <= behind; q += kBytes) t.cp.enqueue(0, 0, pkt(kBytes));
    constexpr int kDepartures = 40000;
    int marked = 0;
    for (int i = 0; i < kDepartures; ++i) {
        const std::optional<Departure> d = t.cp.dequeue(1, 0);
        marked += d && d->ce;
        t.cp.enqueue(1, 0, pkt(kBytes));
    }
    EXPECT_EQ(t.cp.counters(0).marked, uint64_t(marked));
    return double(marked) / kDepartures;
}

} // namespace

TEST(CongestionPoint, ForwardsInOrderWithTheMetadataGiven) {
    TwoPorts t(unpaced());
    t.cp.enqueue(100, 0, pkt(500, 1, true, 7));
    t.cp.enqueue(200, 0, pkt(300, 1, false, 8));
    EXPECT_EQ(t.cp.counters(0).queue_bytes, 800u);
    EXPECT_EQ(t.cp.buffer_used(), 800u);
    const std::optional<Departure> a = t.cp.dequeue(600, 0);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->packet.handle, 7u);
    EXPECT_EQ(a->sojourn_ns, 500u);
    const std::optional<Departure> b = t.cp.dequeue(600, 0);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->packet.handle, 8u);
    EXPECT_FALSE(b->packet.ect);
    EXPECT_FALSE(t.cp.dequeue(600, 0));
    EXPECT_EQ(t.cp.counters(0).tx_packets, 2u);
    EXPECT_EQ(t.cp.counters(0).tx_bytes, 800u);
    EXPECT_EQ(t.cp.sent_by_ingress(0)[1], 800u);
    EXPECT_EQ(t.cp.buffer_used(), 0u);
    EXPECT_EQ(t.cp.counters(0).max_queue_bytes, 800u);
}

TEST(CongestionPoint, TailDropsAtAFullBuffer) {
    CongestionPointConfig c = unpaced();
    c.buffer_bytes = 10 * 1000;
    c.reserve_bytes = 0;
    TwoPorts t(c);
    int accepted = 0;
    for (int i = 0; i < 15; ++i) accepted += t.cp.enqueue(0, 0, pkt(1000)).accepted;
    EXPECT_EQ(accepted, 10);
    EXPECT_EQ(t.cp.counters(0).dropped, 5u);
    EXPECT_EQ(t.cp.counters(0).queue_bytes, 10u * 1000);
    EXPECT_FALSE(t.cp.admits(1, 1)); // the other port has no reserve either
    // A departure makes room for one more.
    ASSERT_TRUE(t.cp.dequeue(0, 0));
    EXPECT_TRUE(t.cp.enqueue(0, 0, pkt(1000)).accepted);
    t.cp.count_drop(0); // one the caller had no room for
    EXPECT_EQ(t.cp.counters(0).dropped, 6u);
}

TEST(CongestionPoint, ReserveKeepsRoomForAcksWhileAnotherPortFillsThePool) {
    CongestionPointConfig c = unpaced();
    c.buffer_bytes = 64 * 1024;
    c.reserve_bytes = 16 * 1024;
    TwoPorts t(c);
    EXPECT_EQ(t.cp.port_limit(), 48u * 1024);
    for (int i = 0; i < 60; ++i) t.cp.enqueue(0, 0, pkt(1024, 1));
    EXPECT_EQ(t.cp.counters(0).queue_bytes, 48u * 1024);
    EXPECT_EQ(t.cp.counters(0).dropped, 12u);
    // 64-byte ACKs the other way: all of its reserve, then drops.
    int acks = 0;
    for (int i = 0; i < 300; ++i) acks += t.cp.enqueue(0, 1, pkt(64, 0)).accepted;
    EXPECT_EQ(acks, 16 * 1024 / 64);
    EXPECT_EQ(t.cp.counters(1).dropped, 300u - 256u);
}

TEST(CongestionPoint, MarksWithRedsProbabilityBetweenKminAndKmax) {
    const RedParams red{10'000, 30'000, 0.4};
    EXPECT_EQ(marked_fraction_at(red, 5'000), 0);   // below Kmin: never
    EXPECT_EQ(marked_fraction_at(red, 10'000), 0);  // at Kmin: never
    // Half way: Pmax / 2; a quarter of the way: Pmax / 4. 40000 draws: sd ~ 0.002.
    EXPECT_NEAR(marked_fraction_at(red, 20'000), 0.2, 0.012);
    EXPECT_NEAR(marked_fraction_at(red, 15'000), 0.1, 0.01);
    EXPECT_EQ(marked_fraction_at(red, 30'100), 1); // above Kmax: always
}

TEST(CongestionPoint, NeverMarksPacketsThatAreNotEcnCapable) {
    CongestionPointConfig c = unpaced();
    c.ecn = true;
    c.red = {0, 100, 1.0};
    TwoPorts t(c);
    for (int i = 0; i < 4; ++i) t.cp.enqueue(0, 0, pkt(1000, 1, false));
    for (int i = 0; i < 4; ++i) EXPECT_FALSE(t.cp.dequeue(0, 0)->ce);
    EXPECT_EQ(t.cp.counters(0).marked, 0u);
    EXPECT_EQ(t.cp.counters(0).not_ect, 3u); // the last left an empty queue behind
}

TEST(CongestionPoint, NoMarksWithEcnOff) {
    CongestionPointConfig c = unpaced();
    c.red = {0, 100, 1.0};
    TwoPorts t(c);
    for (int i = 0; i < 4; ++i) t.cp.enqueue(0, 0, pkt(1000));
    for (int i = 0; i < 4; ++i) EXPECT_FALSE(t.cp.dequeue(0, 0)->ce);
    EXPECT_EQ(t.cp.counters(0).not_ect, 0u);
}

// Dequeue marking judges the queue a packet leaves behind; enqueue marking the queue it
// finds ahead. The first of a burst into an empty queue is marked only by the former, the
// last only by the latter.
TEST(CongestionPoint, MarksByTheQueueBehindOnDequeueAndAheadOnEnqueue) {
    CongestionPointConfig c = unpaced();
    c.ecn = true;
    c.red = {0, 1, 1.0}; // any other byte queued marks
    for (const MarkAt at : {MarkAt::kDequeue, MarkAt::kEnqueue}) {
        c.mark_at = at;
        TwoPorts t(c);
        std::vector<bool> on_arrival;
        for (int i = 0; i < 3; ++i) on_arrival.push_back(t.cp.enqueue(0, 0, pkt(1000)).ce);
        std::vector<bool> on_departure;
        for (int i = 0; i < 3; ++i) on_departure.push_back(t.cp.dequeue(0, 0)->ce);
        if (at == MarkAt::kDequeue) {
            EXPECT_EQ(on_arrival, (std::vector<bool>{false, false, false}));
            EXPECT_EQ(on_departure, (std::vector<bool>{true, true, false}));
        } else {
            EXPECT_EQ(on_arrival, (std::vector<bool>{false, true, true}));
            EXPECT_EQ(on_departure, on_arrival); // the mark travels with the packet
        }
        EXPECT_EQ(t.cp.counters(0).marked, 2u);
    }
}

TEST(CongestionPoint, ShapesEachPortToTheLinkRate) {
    CongestionPointConfig c;
    c.link_mbps = 1000; // 1000 bytes every 8 us
    c.burst_ns = 0;
    c.buffer_bytes = 64u << 20;
    c.ecn = false;
    TwoPorts t(c);
    for (int i = 0; i < 5000; ++i) t.cp.enqueue(0, 0, pkt(1000));
    // 10 ms in 1 us steps, sending whatever the shaper allows at each.
    const uint64_t start = 1'000'000;
    uint64_t bytes = 0;
    for (uint64_t now = start; now < start + 10'000'000; now += 1000)
        while (const std::optional<Departure> d = t.cp.dequeue(now, 0)) bytes += d->packet.bytes;
    EXPECT_NEAR(double(bytes) * 8 / 10'000.0, 1000, 1); // Mbit/s over the window
    EXPECT_EQ(bytes, t.cp.counters(0).tx_bytes);
    EXPECT_GE(t.cp.next_departure(), start + 10'000'000 - 8000);
    EXPECT_EQ(t.cp.counters(1).tx_bytes, 0u);
}

TEST(CongestionPoint, ALatePortCatchesUpByAtMostItsBurst) {
    CongestionPointConfig c;
    c.link_mbps = 1000; // 8 us a packet
    c.burst_ns = 80'000; // 10 packets
    c.ecn = false;
    TwoPorts t(c);
    for (int i = 0; i < 100; ++i) t.cp.enqueue(0, 0, pkt(1000));
    ASSERT_TRUE(t.cp.dequeue(1'000'000, 0));
    while (t.cp.dequeue(1'000'000, 0)) {}
    // 1 ms later, 125 packet times have passed; only the burst's worth leaves at once.
    int late = 0;
    while (t.cp.dequeue(2'000'000, 0)) ++late;
    EXPECT_EQ(late, 11); // the burst, plus the one due now
    EXPECT_EQ(t.cp.next_departure(), 2'000'000u + 8000);
}

TEST(CongestionPoint, PausesAboveXoffAndResumesOnlyBelowXon) {
    CongestionPointConfig c = unpaced();
    c.pause = true;
    c.xoff_bytes = 5000;
    c.xon_bytes = 2000;
    TwoPorts t(c);
    for (int i = 0; i < 5; ++i) EXPECT_FALSE(t.cp.enqueue(0, 0, pkt(1000)).xoff);
    EXPECT_FALSE(t.cp.paused(0)); // at xoff, not above
    const Admission a = t.cp.enqueue(0, 0, pkt(1000));
    EXPECT_TRUE(a.accepted);
    EXPECT_TRUE(a.xoff);
    EXPECT_TRUE(t.cp.paused(0));
    EXPECT_FALSE(t.cp.paused(1));
    // Packets already on their way are still taken (headroom), without a second xoff.
    EXPECT_FALSE(t.cp.enqueue(0, 0, pkt(1000)).xoff);
    EXPECT_EQ(t.cp.counters(0).pauses, 1u);
    // 7000 queued: paused down to 2000 (not below xon), resumed at 1000.
    for (uint64_t q = 7000; q > 2000; q -= 1000) {
        ASSERT_TRUE(t.cp.dequeue(0, 0));
        EXPECT_TRUE(t.cp.paused(0)) << q - 1000;
    }
    ASSERT_TRUE(t.cp.dequeue(0, 0));
    EXPECT_FALSE(t.cp.paused(0));
    // Up again: no pause until above xoff once more.
    for (int i = 0; i < 4; ++i) t.cp.enqueue(0, 0, pkt(1000));
    EXPECT_FALSE(t.cp.paused(0));
    EXPECT_TRUE(t.cp.enqueue(0, 0, pkt(1000)).xoff);
    EXPECT_EQ(t.cp.counters(0).pauses, 2u);
}

TEST(CongestionPoint, APacketTheLinkLostCountsAsATxErrorNotAsSent) {
    TwoPorts t(unpaced());
    t.cp.enqueue(0, 0, pkt(1000, 1));
    t.cp.enqueue(0, 0, pkt(400, 1));
    const std::optional<Departure> d = t.cp.dequeue(0, 0);
    ASSERT_TRUE(d);
    t.cp.not_sent(0, *d);
    ASSERT_TRUE(t.cp.dequeue(0, 0));
    EXPECT_EQ(t.cp.counters(0).tx_errors, 1u);
    EXPECT_EQ(t.cp.counters(0).tx_packets, 1u);
    EXPECT_EQ(t.cp.counters(0).tx_bytes, 400u);
    EXPECT_EQ(t.cp.sent_by_ingress(0)[1], 400u);
    EXPECT_EQ(t.cp.buffer_used(), 0u);
}

TEST(CongestionPoint, NextDepartureIsZeroWhenEveryQueueIsEmpty) {
    CongestionPointConfig c;
    c.link_mbps = 1000;
    c.burst_ns = 0;
    TwoPorts t(c);
    EXPECT_EQ(t.cp.next_departure(), 0u);
    t.cp.enqueue(0, 1, pkt(1000));
    t.cp.enqueue(0, 1, pkt(1000));
    ASSERT_TRUE(t.cp.dequeue(50'000, 1));
    EXPECT_EQ(t.cp.next_departure(), 58'000u);
    EXPECT_FALSE(t.cp.dequeue(57'999, 1));
    ASSERT_TRUE(t.cp.dequeue(58'000, 1));
    EXPECT_EQ(t.cp.next_departure(), 0u);
}

TEST(CongestionPoint, EachPortMayRunAtItsOwnRateAndSaysWhenItSendsNext) {
    // A simulated fabric mixes 100G host ports with 400G uplinks on one switch.
    CongestionPointConfig c;
    c.link_mbps = 100000;
    c.burst_ns = 0;
    CongestionPoint cp(c);
    cp.add_port();       // the config's 100 Gbit/s
    cp.add_port(400000); // its own 400 Gbit/s
    EXPECT_EQ(cp.next_departure(0), 0u); // empty
    for (size_t e = 0; e < 2; ++e) {
        cp.enqueue(1000, e, pkt(5000));
        cp.enqueue(1000, e, pkt(5000));
        ASSERT_TRUE(cp.dequeue(1000, e));
    }
    // 5000 bytes take 400 ns at 100G and 100 ns at 400G.
    EXPECT_EQ(cp.next_departure(0), 1400u);
    EXPECT_EQ(cp.next_departure(1), 1100u);
    EXPECT_EQ(cp.next_departure(), 1100u);
    EXPECT_FALSE(cp.dequeue(1099, 1));
    EXPECT_TRUE(cp.dequeue(1100, 1));
    EXPECT_EQ(cp.next_departure(1), 0u); // drained
}

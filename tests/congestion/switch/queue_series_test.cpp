// The congestion point's time series: one sample per port and period, from the first
// call, with the per-ingress bytes; a late caller does not take a burst of samples.
#include <gtest/gtest.h>

#include "congestion/switch/queue_series.h"

using namespace ibex::cc;

TEST(QueueSeries, SamplesEveryPortOncePerPeriod) {
    CongestionPointConfig c;
    c.link_mbps = 0;
    CongestionPoint cp(c);
    cp.add_port();
    cp.add_port();
    QueueSeries s(100'000);
    EXPECT_EQ(s.next_ns(), 0u);
    cp.enqueue(0, 0, {0, 700, 1, true});
    for (uint64_t now = 1'000'000; now < 2'000'000; now += 50'000) {
        if (now == 1'500'000) cp.dequeue(now, 0);
        s.sample(now, cp);
    }
    ASSERT_EQ(s.samples().size(), 2u * 10);
    const QueueSample &first = s.samples()[0];
    EXPECT_EQ(first.t_ns, 0u);
    EXPECT_EQ(first.port, 0u);
    EXPECT_EQ(first.queue_bytes, 700u);
    const QueueSample &last = s.samples().back();
    EXPECT_EQ(last.t_ns, 900'000u);
    EXPECT_EQ(last.port, 1u);
    const QueueSample &port0_late = s.samples()[s.samples().size() - 2];
    EXPECT_EQ(port0_late.queue_bytes, 0u);
    EXPECT_EQ(port0_late.tx_bytes, 700u);
    EXPECT_EQ(port0_late.from, (std::vector<uint64_t>{0, 700}));
    EXPECT_EQ(s.next_ns(), 2'000'000u);
}

TEST(QueueSeries, ALateCallerTakesOneSampleAndGoesOnAPeriodFromNow) {
    CongestionPoint cp(CongestionPointConfig{});
    cp.add_port();
    QueueSeries s(100'000);
    s.sample(1'000'000, cp);
    s.sample(1'750'000, cp);
    EXPECT_EQ(s.samples().size(), 2u);
    EXPECT_EQ(s.next_ns(), 1'850'000u);
}

// perftest's definitions on known inputs: bandwidth average and peak, latency statistics
// (two largest samples dropped, median, nearest-rank percentiles, half or full round
// trip), the unit conversions, and rows crossing the TCP connection intact.
#include <gtest/gtest.h>

#include "tools/ibex_perftest/report.h"

namespace ibex::perftest {
namespace {

TEST(Report, BandwidthAverageAndPeak) {
    // 4 messages of 1 MiB posted at 0, 1, 2, 3 ms; signaled every 2nd, completing at
    // 2 ms (covering messages 0-1) and 3.5 ms (2-3).
    const std::vector<uint64_t> tposted{0, 1000000, 2000000, 3000000};
    std::vector<uint64_t> tcompleted(4, 0);
    tcompleted[1] = 2000000;
    tcompleted[3] = 3500000;
    const BwResult r = bw_result(1 << 20, tposted, tcompleted, {1, 3}, false);
    EXPECT_EQ(r.iters, 4u);
    // 4 MiB in 3.5 ms.
    EXPECT_NEAR(r.avg, 4.0 / 0.0035, 1e-6);
    EXPECT_NEAR(r.msg_rate_mpps, 4 / 3500.0, 1e-9);
    // Windows run from any post to a later signaled completion: the best is message 3
    // alone, posted at 3 ms and done at 3.5 ms (0 -> 1 takes 1 ms each, 2 -> 3 0.75 ms).
    EXPECT_NEAR(r.peak, 1.0 / 0.0005, 1e-6);
    const BwResult g = bw_result(1 << 20, tposted, tcompleted, {1, 3}, true);
    EXPECT_NEAR(g.avg, 4.0 * 1048576 * 8 / 0.0035 / 1e9, 1e-9); // Gb = 10^9 bits
}

TEST(Report, BidirectionalSumAndDurationAverage) {
    const BwResult a = bw_result_avg(1000, 2000, 0, 1000000000, false);
    EXPECT_NEAR(a.msg_rate_mpps, 0.002, 1e-12);
    EXPECT_NEAR(a.avg, 2e6 / 1048576.0, 1e-9);
    EXPECT_EQ(a.peak, 0);
    const BwResult s = bw_sum(a, a);
    EXPECT_NEAR(s.avg, 2 * a.avg, 1e-12);
    EXPECT_NEAR(s.msg_rate_mpps, 2 * a.msg_rate_mpps, 1e-12);
    EXPECT_EQ(s.bytes, 1000u);
}

TEST(Report, LatencyStatistics) {
    // Post times with gaps 10, 20, ..., 100 us and two outliers of 1000 and 2000 us.
    std::vector<uint64_t> t{0};
    for (int gap : {30, 10, 1000, 20, 50, 40, 2000, 60, 70, 80, 90, 100}) t.push_back(t.back() + uint64_t(gap) * 1000);
    const LatResult half = lat_result(2, t, 2);
    EXPECT_EQ(half.iters, 13u);
    // Sorted and halved: 5, 10, ..., 50, 500, 1000. Median, average and deviation over the
    // first 10; maximum and percentiles at index 10 (ceil(0.99 x 10)), as perftest prints.
    EXPECT_DOUBLE_EQ(half.t_min, 5);
    EXPECT_DOUBLE_EQ(half.t_max, 500);
    EXPECT_DOUBLE_EQ(half.t_typical, 27.5); // median of 10 values
    EXPECT_DOUBLE_EQ(half.t_avg, 27.5);
    EXPECT_DOUBLE_EQ(half.p99, 500);
    EXPECT_DOUBLE_EQ(half.p999, 500);
    EXPECT_NEAR(half.t_stdev, 14.3614, 1e-3);
    const LatResult full = lat_result(2, t, 1); // READ/atomic: the whole round trip
    EXPECT_DOUBLE_EQ(full.t_typical, 55);
}

TEST(Report, RowsCrossTheWireIntact) {
    const BwResult b{65536, 5000, 11234.56789, 10987.654321, 0.175802};
    BwResult b2;
    ASSERT_TRUE(from_msg(to_msg(b), &b2));
    EXPECT_EQ(b2.bytes, b.bytes);
    EXPECT_EQ(b2.iters, b.iters);
    EXPECT_NEAR(b2.peak, b.peak, 1e-6);
    EXPECT_NEAR(b2.avg, b.avg, 1e-6);
    EXPECT_NEAR(b2.msg_rate_mpps, b.msg_rate_mpps, 1e-9);
    const LatResult l{8, 1000, 1.5, 99.25, 2.5, 3.125, 4.75, 50.5, 98.0};
    LatResult l2;
    ASSERT_TRUE(from_msg(to_msg(l), &l2));
    EXPECT_DOUBLE_EQ(l2.t_max, 99.25);
    EXPECT_DOUBLE_EQ(l2.p999, 98.0);
    EXPECT_FALSE(from_msg("error: something", &l2));
    EXPECT_FALSE(from_msg(to_msg(l), &b2)); // a latency row is not a bandwidth row
}

TEST(Report, TitlesFollowPerftest) {
    Options o;
    o.test = {Verb::write, Kind::bw};
    EXPECT_EQ(test_title(o), "RDMA_Write BW Test");
    o.bidirectional = true;
    EXPECT_EQ(test_title(o), "RDMA_Write Bidirectional BW Test");
    o.test = {Verb::atomic, Kind::lat};
    o.atomic_type = AtomicType::cmp_and_swap;
    EXPECT_EQ(test_title(o), "Atomic CMP_AND_SWAP Latency Test");
    o.test = {Verb::send, Kind::lat};
    EXPECT_EQ(test_title(o), "Send Latency Test");
}

} // namespace
} // namespace ibex::perftest

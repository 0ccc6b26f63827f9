// The cost model: formulas, the choice per size, agreement across ranks (medians), and
// the probe's arithmetic on known completion times.
#include <gtest/gtest.h>

#include <vector>

#include "allreduce/selector.h"

namespace ibex::coll {
namespace {

CostModel model(double alpha, double beta, double gamma) {
    CostModel m;
    m.alpha = alpha;
    m.beta = beta;
    m.gamma = gamma;
    return m;
}

TEST(Selector, LatencyBoundPicksFewestSteps) {
    Selector s;
    // Latency dominates: tree (depth 1 for 3 ranks: 2 hops) beats rhd (fold + 1 step + unfold).
    s.configure(3, 128 << 10, model(50e-6, 1e-9, 0.2e-9));
    EXPECT_EQ(s.choose(8), Algo::tree);
    EXPECT_NEAR(s.cost(Algo::ring, 0), 4 * 50e-6, 1e-12);
    EXPECT_NEAR(s.cost(Algo::rhd, 0), 4 * 50e-6, 1e-12);
    EXPECT_NEAR(s.cost(Algo::tree, 0), 2 * 50e-6, 1e-12);
    // 16 ranks: the ring's 30 steps lose to log-depth algorithms for small messages.
    s.configure(16, 128 << 10, model(50e-6, 1e-9, 0.2e-9));
    EXPECT_NE(s.choose(64), Algo::ring);
}

TEST(Selector, BandwidthBoundAvoidsTreeAndFoldedRhd) {
    Selector s;
    s.configure(6, 128 << 10, model(30e-6, 3e-9, 0.15e-9));
    // Non-power-of-two: rhd pays 2m to fold the extra ranks, tree moves about 2m per node.
    EXPECT_EQ(s.choose(64 << 20), Algo::ring);
    EXPECT_LT(s.cost(Algo::ring, 64 << 20), s.cost(Algo::rhd, 64 << 20));
    EXPECT_LT(s.cost(Algo::ring, 64 << 20), s.cost(Algo::tree, 64 << 20));
    // Power of two: rhd moves the same bytes as ring in fewer steps.
    s.configure(8, 128 << 10, model(30e-6, 3e-9, 0.15e-9));
    EXPECT_NE(s.choose(64 << 20), Algo::tree);
}

TEST(Selector, OneRankCostsNothing) {
    Selector s;
    s.configure(1, 128 << 10, CostModel{});
    for (Algo a : {Algo::ring, Algo::rhd, Algo::tree}) EXPECT_EQ(s.cost(a, 1 << 20), 0);
}

TEST(Selector, Names) {
    Algo a;
    for (const char *n : {"ring", "rhd", "tree"}) {
        ASSERT_TRUE(parse_algo(n, &a));
        EXPECT_STREQ(algo_name(a), n);
    }
    EXPECT_FALSE(parse_algo("Ring", &a));
    EXPECT_FALSE(parse_algo("", &a));
}

TEST(Selector, CombineTakesMediansOfMeasuredValues) {
    // Ranks 1 and 3 did not measure alpha/beta (odd ranks of the probe pairs).
    const std::vector<double> t = {30e-6, 2e-9, 0.2e-9, 0, 0, 0.1e-9, 50e-6, 4e-9, 0.3e-9, 0, 0, 0.4e-9, 40e-6, 3e-9, 0.2e-9};
    const CostModel m = combine(t);
    EXPECT_TRUE(m.measured);
    EXPECT_DOUBLE_EQ(m.alpha, 40e-6);
    EXPECT_DOUBLE_EQ(m.beta, 3e-9);
    EXPECT_DOUBLE_EQ(m.gamma, 0.2e-9);
    EXPECT_FALSE(combine({0, 0, 0}).measured);
}

TEST(Selector, ProbeArithmetic) {
    // Even side of 4 pings: (send, recv) x 4, then 2 bulk slices, then the ack.
    const int pings = 4;
    const size_t bulk = 1 << 20;
    std::vector<uint64_t> t;
    for (int k = 0; k < pings; ++k) {
        t.push_back(k * 100000 + 10);    // send done
        t.push_back(k * 100000 + 50000); // pong landed: RTT 100 us
    }
    t.push_back(400000);
    t.push_back(800000);
    t.push_back(3 * 100000 + 50000 + 1100000); // ack 1.1 ms after the last pong
    double alpha = 0, beta = 0;
    probe_result(0, 2, pings, bulk, t, &alpha, &beta);
    EXPECT_NEAR(alpha, 50e-6, 1e-9);
    EXPECT_NEAR(beta, 1.0e-3 / bulk, 1e-15); // 1.1 ms minus one round trip
    probe_result(1, 2, pings, bulk, t, &alpha, &beta);
    EXPECT_EQ(alpha, 0);
    probe_result(2, 3, pings, bulk, t, &alpha, &beta); // no partner
    EXPECT_EQ(alpha, 0);
}

} // namespace
} // namespace ibex::coll

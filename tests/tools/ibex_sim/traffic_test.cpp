// Flow traffic specs: incast, long flows, CDF sizes (parsing, mean, sampling), and the
// errors a bad spec gets.
#include <gtest/gtest.h>

#include "tests/congestion/sim/sim_fixture.h"
#include "tools/ibex_sim/traffic.h"

using namespace ibex;
using namespace ibex::sim;
using namespace ibex::simtool;

TEST(SimTraffic, CdfParsesPercentOrFractionAndSamplesWithinIt) {
    SizeCdf c;
    ASSERT_EQ(parse_cdf("1000 0\n1000 50\n\n9000 100\n", c), IBEX_OK) << ibex_last_error();
    EXPECT_DOUBLE_EQ(c.points.back().second, 1);
    EXPECT_DOUBLE_EQ(c.mean(), 0.5 * 1000 + 0.5 * 5000);
    EXPECT_DOUBLE_EQ(c.sample(0.25), 1000);
    EXPECT_DOUBLE_EQ(c.sample(0.75), 5000);
    EXPECT_EQ(parse_cdf("100 0.5\n50 0.4\n", c), IBEX_ERR_INVALID_ARGUMENT); // falls
    EXPECT_EQ(parse_cdf("100 0.5\n", c), IBEX_ERR_INVALID_ARGUMENT);         // never reaches 1
    EXPECT_EQ(parse_cdf("", c), IBEX_ERR_INVALID_ARGUMENT);
}

TEST(SimTraffic, SizesTakeBinarySuffixes) {
    uint64_t b = 0;
    EXPECT_TRUE(parse_size("64M", &b));
    EXPECT_EQ(b, 64u << 20);
    EXPECT_TRUE(parse_size("1.5K", &b));
    EXPECT_EQ(b, 1536u);
    EXPECT_FALSE(parse_size("12Q", &b));
    EXPECT_FALSE(parse_size("", &b));
}

TEST(SimTraffic, IncastSendsFromNHostsToHostZero) {
    FabricShape s;
    s.hosts = 5;
    auto sim = test::make_sim(build_star(s), {});
    FlowPlan plan;
    ASSERT_EQ(add_flows(*sim, "incast:4:1M", 100, 0, 1, plan), IBEX_OK) << ibex_last_error();
    ASSERT_EQ(plan.messages.size(), 4u);
    const RunStats st = sim->run();
    EXPECT_TRUE(st.all_done);
    for (uint32_t q = 0; q < sim->qps(); ++q) {
        EXPECT_EQ(sim->qp_stats(q).dst, 0u);
        EXPECT_EQ(sim->qp_stats(q).delivered_bytes, 1u << 20);
    }
    FlowPlan bad;
    EXPECT_EQ(add_flows(*sim, "incast:5", 100, 0, 1, bad), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(add_flows(*sim, "long", 100, 0, 1, bad), IBEX_ERR_INVALID_ARGUMENT); // needs a duration
    EXPECT_EQ(add_flows(*sim, "mice", 100, 0, 1, bad), IBEX_ERR_INVALID_ARGUMENT);
}

TEST(SimTraffic, LongFlowsRunToTheDurationAtLineRate) {
    FabricShape s;
    s.hosts = 4;
    SimConfig cfg;
    cfg.end_ns = 200'000;
    auto sim = test::make_sim(build_star(s), cfg);
    FlowPlan plan;
    ASSERT_EQ(add_flows(*sim, "long", 100, cfg.end_ns, 1, plan), IBEX_OK);
    const RunStats st = sim->run();
    EXPECT_FALSE(st.all_done);
    EXPECT_EQ(st.sim_ns, cfg.end_ns);
    // A permutation: no two flows share a port, each near line rate less headers.
    for (uint32_t q = 0; q < sim->qps(); ++q) {
        const double gbps = double(sim->qp_stats(q).delivered_bytes) * 8 / double(cfg.end_ns);
        EXPECT_NEAR(gbps, 100 * 4096.0 / 4158, 2) << q;
    }
}

// The congestion point's RED marking: the probability curve, and the marker's empirical
// rate matching it.
#include <gtest/gtest.h>

#include "congestion/red.h"

using namespace ibex::cc;

TEST(Red, ProbabilityFollowsTheCurve) {
    RedParams p{5000, 205000, 0.01};
    EXPECT_EQ(mark_probability(p, 0), 0);
    EXPECT_EQ(mark_probability(p, 5000), 0);
    EXPECT_DOUBLE_EQ(mark_probability(p, 105000), 0.005); // half way: Pmax / 2
    EXPECT_DOUBLE_EQ(mark_probability(p, 205000), 0.01);
    EXPECT_EQ(mark_probability(p, 205001), 1);
}

TEST(Red, MarkerRateMatchesProbability) {
    RedParams p{0, 100000, 0.5};
    RedMarker m(p, 42);
    int marked = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) marked += m.mark(50000); // p = 0.25
    EXPECT_NEAR(double(marked) / n, 0.25, 0.01);
    EXPECT_FALSE(m.mark(0));
    EXPECT_TRUE(m.mark(100001));
}

TEST(Red, SameSeedSameDecisions) {
    RedParams p{0, 1000, 0.5};
    RedMarker a(p, 7), b(p, 7);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.mark(uint64_t(i)), b.mark(uint64_t(i)));
}

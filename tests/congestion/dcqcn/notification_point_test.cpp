// The notification point sends at most one CNP per min_time_between_cnps.
#include <gtest/gtest.h>

#include "congestion/dcqcn/notification_point.h"

using ibex::cc::dcqcn::NotificationPoint;

TEST(NotificationPoint, OneCnpPerInterval) {
    NotificationPoint np(50'000);
    EXPECT_TRUE(np.on_ce(1'000));
    EXPECT_FALSE(np.on_ce(11'000));
    EXPECT_FALSE(np.on_ce(50'999));
    EXPECT_TRUE(np.on_ce(51'000));
    EXPECT_TRUE(np.on_ce(120'000));
    EXPECT_FALSE(np.on_ce(130'000));
    EXPECT_EQ(np.cnps_sent(), 3u);
    EXPECT_EQ(np.marked(), 6u);
}

TEST(NotificationPoint, FirstMarkAtTimeZeroSendsAndZeroIntervalSendsEveryTime) {
    NotificationPoint np(0);
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(np.on_ce(0));
    EXPECT_EQ(np.cnps_sent(), 5u);
}

TEST(NotificationPoint, MarksAtAPacketRateYieldOneCnpPerInterval) {
    // 1 ms of marked packets every 2 us, interval 50 us: 20 CNPs.
    NotificationPoint np(50'000);
    for (uint64_t t = 0; t < 1'000'000; t += 2'000) np.on_ce(t);
    EXPECT_EQ(np.cnps_sent(), 20u);
}

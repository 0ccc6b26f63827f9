// The reaction point against sequences worked by hand from the equations of Zhu et al.,
// SIGCOMM 2015 (REFERENCE.md section 4). Rates in Mbit/s, times in ns.
#include <cmath>

#include <gtest/gtest.h>

#include "congestion/dcqcn/dcqcn.h"
#include "congestion/dcqcn/reaction_point.h"

using namespace ibex::cc;
using namespace ibex::cc::dcqcn;

namespace {
constexpr uint64_t kUs = 1000;

// The paper's constants, alpha starting at exactly 1 so the numbers stay round.
Params paper(double line = 10000) {
    Params p;
    p.line_rate_mbps = line;
    p.initial_alpha = 1.0;
    p.g = 1.0 / 256;
    p.gd_shift = 11;
    p.min_dec_fraction = 0.5;
    p.min_rate_mbps = 1;
    p.alpha_timer_ns = 55 * kUs;
    p.rate_timer_ns = 55 * kUs;
    p.byte_counter = 0; // timer only, unless a test turns it on
    p.threshold = 5;
    p.ai_mbps = 40;
    p.hai_mbps = 400;
    return p;
}
} // namespace

TEST(ReactionPoint, StartsAtLineRateWithNoTimers) {
    ReactionPoint rp(paper());
    EXPECT_EQ(rp.rate_mbps(), 10000);
    EXPECT_EQ(rp.next_event_ns(), 0u);
    rp.advance(10'000 * kUs);
    EXPECT_EQ(rp.rate_mbps(), 10000);
    EXPECT_EQ(rp.alpha(), 1.0);
}

TEST(ReactionPoint, RateAfterKCnpsWithAlphaOne) {
    // alpha = 1 stays 1 ((1 - g) * 1 + g), so each CNP halves: Rc = line / 2^k.
    ReactionPoint rp(paper());
    for (int k = 1; k <= 6; ++k) {
        rp.on_cnp(uint64_t(k) * kUs);
        EXPECT_DOUBLE_EQ(rp.rate_mbps(), 10000 / std::pow(2.0, k)) << k;
        EXPECT_DOUBLE_EQ(rp.target_mbps(), 10000 / std::pow(2.0, k - 1)) << k;
        EXPECT_DOUBLE_EQ(rp.alpha(), 1.0);
    }
    EXPECT_EQ(rp.cnps_handled(), 6u);
}

TEST(ReactionPoint, RateAfterCnpsWithAlphaBelowOne) {
    Params p = paper();
    p.initial_alpha = 0.5;
    ReactionPoint rp(p);
    // CNP 1: Rc = 10000 (1 - 0.25) = 7500; alpha = 0.5 * 255/256 + 1/256 = 0.501953125
    rp.on_cnp(0);
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 7500);
    EXPECT_DOUBLE_EQ(rp.alpha(), 0.501953125);
    // CNP 2: Rc = 7500 (1 - 0.2509765625) = 5617.67578125; alpha = 0.503898620605...
    rp.on_cnp(1 * kUs);
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 5617.67578125);
    EXPECT_DOUBLE_EQ(rp.target_mbps(), 7500);
    EXPECT_DOUBLE_EQ(rp.alpha(), 0.501953125 * 255 / 256 + 1.0 / 256);
}

TEST(ReactionPoint, AlphaDecaysEveryAlphaTimer) {
    ReactionPoint rp(paper());
    rp.on_cnp(0); // alpha = 1, timer restarts at 0
    rp.advance(54 * kUs);
    EXPECT_DOUBLE_EQ(rp.alpha(), 1.0);
    rp.advance(55 * kUs);
    EXPECT_DOUBLE_EQ(rp.alpha(), 255.0 / 256);
    rp.advance(55 * 10 * kUs + 1);
    EXPECT_DOUBLE_EQ(rp.alpha(), std::pow(255.0 / 256, 10));
    // A CNP restarts the alpha timer: alpha = (1 - g) alpha + g, next decay 55 us later.
    const double a = std::pow(255.0 / 256, 10) * 255 / 256 + 1.0 / 256;
    rp.on_cnp(600 * kUs);
    EXPECT_DOUBLE_EQ(rp.alpha(), a);
    rp.advance(654 * kUs);
    EXPECT_DOUBLE_EQ(rp.alpha(), a);
    rp.advance(655 * kUs);
    EXPECT_DOUBLE_EQ(rp.alpha(), a * 255 / 256);
}

TEST(ReactionPoint, FastRecoveryThenAdditiveIncreaseOnTheTimer) {
    ReactionPoint rp(paper());
    rp.on_cnp(0); // Rt 10000, Rc 5000
    rp.on_cnp(0); // Rt 5000, Rc 2500
    ASSERT_DOUBLE_EQ(rp.rate_mbps(), 2500);
    // F = 5 fast-recovery stages: Rc = (Rt + Rc) / 2 towards Rt = 5000.
    const double fr[] = {3750, 4375, 4687.5, 4843.75, 4921.875};
    for (int i = 0; i < 5; ++i) {
        rp.advance(uint64_t(i + 1) * 55 * kUs);
        EXPECT_DOUBLE_EQ(rp.rate_mbps(), fr[i]) << i;
        EXPECT_DOUBLE_EQ(rp.target_mbps(), 5000);
    }
    // Then additive increase: Rt += 40, Rc = (Rt + Rc) / 2.
    rp.advance(6 * 55 * kUs);
    EXPECT_DOUBLE_EQ(rp.target_mbps(), 5040);
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 4980.9375);
    rp.advance(7 * 55 * kUs);
    EXPECT_DOUBLE_EQ(rp.target_mbps(), 5080);
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 5030.46875);
    EXPECT_EQ(rp.timer_stage(), 7u);
}

TEST(ReactionPoint, ByteCounterThenHyperIncrease) {
    Params p = paper();
    p.byte_counter = 1000;
    p.threshold = 2;
    ReactionPoint rp(p);
    rp.on_cnp(0);
    rp.on_cnp(0); // Rt 5000, Rc 2500
    rp.on_bytes(1 * kUs, 1000); // b = 0, t = 0: fast recovery
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 3750);
    rp.on_bytes(2 * kUs, 999); // not a whole B yet
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 3750);
    rp.on_bytes(3 * kUs, 1); // b = 1: fast recovery
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 4375);
    rp.on_bytes(4 * kUs, 1000); // b = 2 >= F, t = 0 < F: additive
    EXPECT_DOUBLE_EQ(rp.target_mbps(), 5040);
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 4707.5);
    rp.advance(55 * kUs); // t = 0, b = 3: additive
    EXPECT_DOUBLE_EQ(rp.target_mbps(), 5080);
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 4893.75);
    rp.advance(110 * kUs); // t = 1: additive
    EXPECT_DOUBLE_EQ(rp.target_mbps(), 5120);
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 5006.875);
    rp.advance(165 * kUs); // t = 2, b = 3: hyper, Rt += 400 * (2 - 2 + 1)
    EXPECT_DOUBLE_EQ(rp.target_mbps(), 5520);
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 5263.4375);
    rp.advance(220 * kUs); // t = 3, b = 3: hyper, Rt += 400 * 2
    EXPECT_DOUBLE_EQ(rp.target_mbps(), 6320);
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 5791.71875);
    // A CNP resets the stages: the next increase is fast recovery again.
    rp.on_cnp(221 * kUs);
    EXPECT_EQ(rp.timer_stage(), 0u);
    EXPECT_EQ(rp.byte_stage(), 0u);
    const double rt = rp.target_mbps(), rc = rp.rate_mbps();
    EXPECT_DOUBLE_EQ(rt, 5791.71875);
    rp.on_bytes(222 * kUs, 1000);
    EXPECT_DOUBLE_EQ(rp.target_mbps(), rt);
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), (rt + rc) / 2);
}

TEST(ReactionPoint, RecoversToLineRateAndNoFurther) {
    ReactionPoint rp(paper());
    rp.on_cnp(0);
    rp.advance(1'000'000 * kUs); // one second of timers, capped per call
    rp.advance(2'000'000 * kUs);
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 10000);
    EXPECT_DOUBLE_EQ(rp.target_mbps(), 10000);
}

TEST(ReactionPoint, NeverBelowMinimumRate) {
    Params p = paper();
    p.min_rate_mbps = 100;
    ReactionPoint rp(p);
    for (int k = 0; k < 20; ++k) rp.on_cnp(uint64_t(k));
    EXPECT_DOUBLE_EQ(rp.rate_mbps(), 100);
}

TEST(ReactionPoint, MinDecFacLimitsOneCut) {
    // rpg_gd = 10 makes the cut alpha itself (all of it at alpha = 1); rpg_min_dec_fac
    // = 50% keeps half anyway, 80% keeps 80%.
    Params p = paper();
    p.gd_shift = 10;
    ReactionPoint half(p);
    half.on_cnp(0);
    EXPECT_DOUBLE_EQ(half.rate_mbps(), 5000);
    p.min_dec_fraction = 0.8;
    ReactionPoint most(p);
    most.on_cnp(0);
    EXPECT_DOUBLE_EQ(most.rate_mbps(), 8000);
}

TEST(Dcqcn, InterfaceDrivesBothRoles) {
    Params p = paper();
    p.cnp_interval_ns = 50 * kUs;
    Dcqcn cc(p);
    Actions a = cc.update(0, {EventType::kCeReceived});
    EXPECT_TRUE(a.send_cnp);
    EXPECT_DOUBLE_EQ(a.rate_mbps, 10000);
    EXPECT_EQ(a.wake_ns, 0u);
    a = cc.update(1 * kUs, {EventType::kCeReceived});
    EXPECT_FALSE(a.send_cnp);
    a = cc.update(2 * kUs, {EventType::kCnpReceived});
    EXPECT_DOUBLE_EQ(a.rate_mbps, 5000);
    EXPECT_EQ(a.wake_ns, 57 * kUs);
    a = cc.update(57 * kUs, {EventType::kTick});
    EXPECT_DOUBLE_EQ(a.rate_mbps, 7500);
    EXPECT_EQ(cc.rp().cnps_handled(), 1u);
    EXPECT_EQ(cc.np().cnps_sent(), 1u);
}

TEST(Dcqcn, WindowSignalsLeaveTheRateAlone) {
    Dcqcn cc(paper());
    cc.update(0, {EventType::kCnpReceived});
    for (EventType t : {EventType::kStart, EventType::kAcked, EventType::kSequenceNak, EventType::kTimeout,
                        EventType::kActiveFlows}) {
        const Actions a = cc.update(1 * kUs, {t, 0, 8});
        EXPECT_DOUBLE_EQ(a.rate_mbps, 5000);
        EXPECT_EQ(a.window_packets, 0u);
        EXPECT_EQ(a.wake_ns, 55 * kUs);
        EXPECT_FALSE(a.send_cnp);
    }
    EXPECT_EQ(cc.rp().cnps_handled(), 1u);
}

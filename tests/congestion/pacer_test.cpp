// The pacer holds a flow to its rate (within 5%, here exactly up to one packet) and lets
// a late sender catch up by no more than its burst allowance.
#include <gtest/gtest.h>

#include "congestion/pacer.h"

using ibex::cc::Pacer;

namespace {
// Sends 4 KiB packets whenever allowed, checking every `step_ns`, for `dur_ns`.
uint64_t run(Pacer &p, uint64_t step_ns, uint64_t dur_ns, uint64_t start = 0) {
    uint64_t bytes = 0;
    for (uint64_t t = start; t < start + dur_ns; t += step_ns) {
        while (p.ready(t)) {
            p.sent(t, 4096);
            bytes += 4096;
        }
    }
    return bytes;
}
} // namespace

TEST(Pacer, HoldsTheRate) {
    for (double mbps : {100.0, 500.0, 2000.0, 10000.0}) {
        Pacer p;
        p.set_rate(mbps);
        const uint64_t dur = 100'000'000; // 100 ms
        const double got = double(run(p, 1000, dur)) * 8 / (dur / 1e3);
        EXPECT_NEAR(got, mbps, mbps * 0.05) << mbps;
    }
}

TEST(Pacer, CoarsePollingStillHoldsTheRateWithinTheBurst) {
    // A sender scheduled only every 50 us (below the 100 us burst allowance) keeps the rate.
    Pacer p;
    p.set_rate(1000);
    const uint64_t dur = 100'000'000;
    const double got = double(run(p, 50'000, dur)) * 8 / (dur / 1e3);
    EXPECT_NEAR(got, 1000, 50);
}

TEST(Pacer, IdleSenderCatchesUpOnlyByTheBurst) {
    Pacer p;
    p.set_rate(1000); // 8 ns per byte: 4 KiB every 32.768 us
    p.set_burst(100'000);
    p.sent(0, 4096);
    int n = 0;
    for (; n < 1000 && p.ready(1'000'000'000); ++n) p.sent(1'000'000'000, 4096);
    EXPECT_EQ(n, 4); // 100 us of credit: ceil(100 / 32.768) packets
}

TEST(Pacer, RateZeroIsUnpaced) {
    Pacer p;
    EXPECT_TRUE(p.ready(0));
    p.sent(0, 1 << 20);
    EXPECT_TRUE(p.ready(0));
    EXPECT_EQ(p.next_ns(), 0u);
}

// End to end: 4-to-1 incast of long RDMA WRITE flows through ibex_switch over loopback
// UDP, the receiver's egress port the bottleneck, at the 2 Gbit/s. With DCQCN the
// queue stays below a bound derived from Kmax and the flows share the link fairly;
// without it the queue reaches the buffer limit and the switch drops.
//
// CI runs this test alone (SERIAL) on two cores: 2 Gbit/s of 4 KiB packets (~60k/s
// through the switch) then leaves the link, not the CPU, the bottleneck. A run in which
// the host deschedules the switch thread anyway is repeated, then skipped (see below).
#include <cstdlib>

#include <gtest/gtest.h>

#include "bench/incast/incast.h"

using namespace ibex::sw;

namespace {

constexpr double kLinkMbps = 2000;
constexpr int kSenders = 4;
constexpr double kKmaxBytes = 200 * 1024;
constexpr uint64_t kBufferBytes = 2u << 20;
// The bound on the bottleneck queue with DCQCN (derivation in the test below):
// Kmax + (N - 1) * C * (CNP interval + 0.5 ms) = 200 KiB + 3 * 250 kB/ms * 1.5 ms ~ 1299 KiB,
// well below the port's limit (1920 KiB of the 2 MiB buffer), which the DCQCN-off run
// reaches (on a loaded host its samples sit near 1675 KiB, the limit less about 1 ms of
// drain at C: still clear of the bound).
constexpr double kCnpIntervalS = 0.001;
constexpr double kSchedulingS = 0.0005;
constexpr double kBoundBytes =
    kKmaxBytes + (kSenders - 1) * (kLinkMbps * 1e6 / 8) * (kCnpIntervalS + kSchedulingS);

IncastConfig base(const char *dcqcn) {
    IncastConfig c;
    c.senders = kSenders;
    c.seconds = 3;
    c.dcqcn = dcqcn;
    c.sw.link_mbps = kLinkMbps;
    c.sw.buffer_bytes = kBufferBytes;
    c.sw.red = {5 * 1024, uint64_t(kKmaxBytes), 0.01}; // the paper's Kmin, Kmax, Pmax
    c.sw.sample_ns = 1'000'000;
    return c;
}

// The paper's timers are for 40 Gbit/s and microsecond round trips. A software fabric's
// feedback loop takes milliseconds (scheduling, the switch queue), so the time knobs are
// stretched 20x and the increase steps scaled to the slower link (README.md).
void scaled_paper_knobs() {
    setenv("IBEX_DCQCN_rpg_time_reset", "1100", 1);
    setenv("IBEX_DCQCN_dce_tcp_rtt", "1100", 1);
    setenv("IBEX_DCQCN_min_time_between_cnps", "1000", 1);
    setenv("IBEX_DCQCN_rpg_ai_rate", "5", 1);
    setenv("IBEX_DCQCN_rpg_hai_rate", "50", 1);
}

} // namespace

TEST(Incast, DcqcnBoundsTheQueueAndSharesFairly) {
    scaled_paper_knobs();
    const IncastConfig c = base("paper");
    // A run during which the host left the switch thread unscheduled for long says
    // nothing about DCQCN: its links stop, the senders' packets pile up in its sockets and
    // reach the queue all at once when it runs again, a burst no sender caused. Such a
    // run is repeated (at most 4 in all); if the host never lets the switch run, the test
    // cannot judge DCQCN here and skips.
    constexpr double kMaxStallMs = 100;
    IncastResult r;
    for (int attempt = 0; attempt < 4; ++attempt) {
        r = run_incast(c);
        ASSERT_TRUE(r.ok) << r.error;
        std::printf("%s%s", format_result(c, r).c_str(), r.sw->summary().c_str());
        if (r.switch_stalled_ms < kMaxStallMs) break;
    }
    if (r.switch_stalled_ms >= kMaxStallMs)
        GTEST_SKIP() << "host too busy: the switch thread was descheduled for " << r.switch_stalled_ms
                     << " ms of a 3 s run in each of 4 attempts";
    for (const FlowResult &f : r.flows) {
        EXPECT_EQ(f.errors, 0u);
        EXPECT_GT(f.completed, 0u);
        EXPECT_GT(f.cnps_handled, 0u); // every sender was told to slow down
    }
    EXPECT_GT(r.marks, 0u);
    EXPECT_GT(r.cnps_sent, 0u);
    // The notification point sends at most one CNP per QP per 1 ms (plus the drain).
    EXPECT_LE(r.cnps_sent, uint64_t(kSenders * (c.seconds + 3) * 1000 + kSenders));
    // Above Kmax every departing packet is marked, so once the queue passes Kmax each
    // sender hears within one CNP interval (min_time_between_cnps, 1 ms) plus the loop's
    // scheduling delay (the receiver's and sender's progress threads and the switch
    // thread must each run; on an otherwise idle host each wake-up takes tens of us,
    // allow 0.5 ms in all) and then slows down. Meanwhile the queue grows by at most the
    // arrival rate beyond what the port drains: N senders at line rate C against C, i.e.
    // (N - 1) * C. So q <= Kmax + (N - 1) * C * (1 ms + 0.5 ms) ~ 1299 KiB. (At 2 Gbit/s
    // a 5 ms allowance would put the bound above the buffer: it would bound nothing.)
    // Longer scheduling delays do happen on a shared host; they show as the spikes the
    // 90th percentile leaves out.
    // Asserted on the last half (every flow starts at line rate, and the start-up burst
    // depends on how fast this host schedules the switch), at the 90th percentile (a
    // host that deschedules a thread for longer shows as rare spikes); the 99th
    // percentile must stay clear of the buffer limit.
    ASSERT_LT(kBoundBytes, double(r.sw->port_limit())) << "the bound must say more than the buffer";
    const double bound = kBoundBytes;
    EXPECT_LT(double(r.queue_p90_last_half), bound);
    EXPECT_LT(r.queue_p99_last_half, r.sw->port_limit() - 8192);
    EXPECT_GE(r.jain_last_half, 0.95);
}

TEST(Incast, WithoutDcqcnTheQueueFillsTheBufferAndDrops) {
    const IncastResult r = run_incast(base("off"));
    ASSERT_TRUE(r.ok) << r.error;
    std::printf("%s%s", format_result(base("off"), r).c_str(), r.sw->summary().c_str());
    EXPECT_GE(r.queue_max_bytes, r.sw->port_limit() - 8192); // within two packets of the limit
    EXPECT_GT(r.drops, 0u);
    EXPECT_GT(double(r.queue_p90_last_half), kBoundBytes); // the bound DCQCN keeps does not hold
    EXPECT_EQ(r.cnps_sent, 0u);
    EXPECT_GT(r.marks, 0u); // the switch still marks; nobody listens
}

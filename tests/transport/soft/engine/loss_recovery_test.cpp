// The pieces of selective (IRN) loss recovery alone: the responder's out-of-order store,
// the requester's retransmit set and the tail timer (transport/soft/engine/loss_recovery.h).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "transport/soft/codec/roce.h"
#include "transport/soft/engine/loss_recovery.h"

using namespace ibex::soft;
using ibex::roce::psn_add;

namespace {

std::vector<uint8_t> packet(uint32_t tag, uint32_t len) {
    std::vector<uint8_t> p(len);
    for (uint32_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(tag * 31 + i);
    return p;
}

TEST(OooWindow, HoldsWithinTheWindowAndFindsByPsn) {
    OooWindow w;
    w.configure(100, 256); // rounded up to a power of two
    EXPECT_EQ(w.slots(), 128u);
    const uint32_t epsn = 1000;
    auto a = packet(1, 200), b = packet(2, 256);
    EXPECT_TRUE(w.hold(epsn, 3, a.data(), 200));
    EXPECT_TRUE(w.hold(epsn, 127, b.data(), 256));
    EXPECT_FALSE(w.hold(epsn, 128, b.data(), 256)) << "past the window";
    EXPECT_FALSE(w.hold(epsn, 0, b.data(), 256)) << "the expected PSN is executed, not held";
    EXPECT_FALSE(w.hold(epsn, 5, b.data(), 257)) << "longer than a slot";
    EXPECT_FALSE(w.hold(epsn, 3, b.data(), 256)) << "a duplicate of a held PSN";
    EXPECT_EQ(w.held(), 2u);
    uint32_t len = 0;
    const uint8_t *p = w.find(1003, len);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(len, 200u);
    EXPECT_EQ(0, std::memcmp(p, a.data(), 200)) << "the duplicate did not overwrite the held copy";
    EXPECT_EQ(w.find(1004, len), nullptr);
    uint32_t first = 0;
    ASSERT_TRUE(w.first_after(epsn, first));
    EXPECT_EQ(first, 1003u);
    w.release(1003);
    EXPECT_EQ(w.find(1003, len), nullptr);
    ASSERT_TRUE(w.first_after(epsn, first));
    EXPECT_EQ(first, 1127u);
    w.drop_before(1128);
    EXPECT_TRUE(w.empty());
    EXPECT_FALSE(w.first_after(epsn, first));
}

TEST(OooWindow, PsnWrapMapsEveryPsnOfAWindowToItsOwnSlot) {
    OooWindow w;
    w.configure(16, 64);
    const uint32_t epsn = ibex::roce::kPsnMask - 6; // the window spans the wrap
    for (uint32_t d = 1; d < 16; ++d) {
        auto p = packet(d, 64);
        ASSERT_TRUE(w.hold(epsn, d, p.data(), 64)) << d;
    }
    EXPECT_EQ(w.held(), 15u);
    for (uint32_t d = 1; d < 16; ++d) {
        uint32_t len = 0;
        const uint8_t *p = w.find(psn_add(epsn, d), len);
        ASSERT_NE(p, nullptr) << d;
        EXPECT_EQ(0, std::memcmp(p, packet(d, 64).data(), 64)) << d;
    }
    // Executed in order across the wrap, the store empties.
    uint32_t e = psn_add(epsn, 1);
    for (uint32_t d = 1; d < 16; ++d, e = psn_add(e, 1)) w.release(e);
    EXPECT_TRUE(w.empty());
}

TEST(OooWindow, OffHoldsNothing) {
    OooWindow w;
    w.configure(0, 4096);
    auto p = packet(1, 10);
    EXPECT_EQ(w.slots(), 0u);
    EXPECT_FALSE(w.hold(5, 1, p.data(), 10));
}

TEST(RetransmitSet, QueuesRangesInOrderAndTrimsAcknowledgedParts) {
    RetransmitSet s;
    s.reset(100);
    EXPECT_TRUE(s.add(100, 103));
    EXPECT_TRUE(s.add(110, 112));
    EXPECT_FALSE(s.add(101, 103)) << "still waiting: a repeated NAK adds nothing";
    EXPECT_TRUE(s.add(111, 115)) << "partly new";
    ASSERT_EQ(s.size(), 3);
    EXPECT_EQ(s.front().begin, 100u);
    EXPECT_FALSE(s.acked(101));
    EXPECT_EQ(s.front().begin, 101u) << "the acknowledged part is not resent";
    EXPECT_TRUE(s.acked(110));
    EXPECT_EQ(s.front().begin, 110u);
    s.pop();
    EXPECT_EQ(s.front().begin, 112u) << "trimmed to its new part";
    EXPECT_EQ(s.front().end, 115u);
    s.pop();
    EXPECT_TRUE(s.empty());
    // Drained: the same hole named again means the resend was lost; it is taken again.
    EXPECT_TRUE(s.add(112, 115));
    EXPECT_FALSE(s.add(113, 113)) << "empty range";
}

TEST(RetransmitSet, IsBoundedAndWrapsPsns) {
    RetransmitSet s;
    const uint32_t base = ibex::roce::kPsnMask - 20;
    s.reset(base);
    int added = 0;
    for (int i = 0; i < 40; ++i) added += s.add(psn_add(base, 2 * i), psn_add(base, 2 * i + 1));
    EXPECT_EQ(added, RetransmitSet::kRanges) << "a full set refuses: the timers recover the rest";
    EXPECT_TRUE(s.acked(psn_add(base, 30))); // past the wrap
    EXPECT_EQ(s.front().begin, psn_add(base, 30));
    s.reset(0);
    EXPECT_TRUE(s.empty());
}

TEST(TailTimer, RunsOnlyWithAFewPacketsInFlight) {
    TailTimer t;
    t.set_rto_low(1000);
    t.update(0, 4, false);
    EXPECT_EQ(t.deadline(), 0u) << "more than N = 3 in flight: the transport timeout's job";
    t.update(0, 0, false);
    EXPECT_EQ(t.deadline(), 0u);
    t.update(10, 3, false);
    EXPECT_EQ(t.deadline(), 1010u);
    t.update(500, 2, false);
    EXPECT_EQ(t.deadline(), 1010u) << "a send does not push the deadline out";
    EXPECT_FALSE(t.fire(1009));
    EXPECT_TRUE(t.fire(1010));
    EXPECT_FALSE(t.fire(1011)) << "fires once, then waits a doubled RTO_low";
    EXPECT_EQ(t.deadline(), 1010u + 2000u);
    EXPECT_TRUE(t.fire(3010));
    EXPECT_EQ(t.deadline(), 3010u + 4000u);
    t.update(4000, 1, true);
    EXPECT_EQ(t.deadline(), 5000u) << "an acknowledgement restarts it without back-off";
    t.update(4100, 0, true);
    EXPECT_EQ(t.deadline(), 0u) << "nothing in flight";
}

TEST(TailTimer, RunsWithMoreInFlightOnceTheRequesterHasSentAll) {
    // Coalesced ACKs: a lost last packet leaves a whole message unacknowledged.
    TailTimer t;
    t.set_rto_low(1000);
    t.update(0, 16, false, false);
    EXPECT_EQ(t.deadline(), 0u) << "still sending: later packets will reveal a hole";
    t.update(5, 16, false, true);
    EXPECT_EQ(t.deadline(), 1005u);
    t.update(6, 0, true, true);
    EXPECT_EQ(t.deadline(), 0u);
    t.update(10, 128, false, true);
    EXPECT_EQ(t.deadline(), 10u + 8 * 1000u) << "RTO_low per 16 packets outstanding";
}

TEST(TailTimer, BackOffIsBoundedAndOffMeansOff) {
    TailTimer t;
    t.set_rto_low(100);
    t.update(0, 1, false);
    uint64_t now = 0;
    for (int i = 0; i < 20; ++i) {
        now = t.deadline();
        ASSERT_TRUE(t.fire(now));
    }
    EXPECT_EQ(t.deadline() - now, 100u << TailTimer::kMaxBackoff);
    TailTimer off;
    off.update(0, 1, false);
    EXPECT_EQ(off.deadline(), 0u);
    EXPECT_FALSE(off.fire(UINT64_MAX));
}

TEST(RetransmitMode, ParsesTheEnvironmentValues) {
    RetransmitMode m = RetransmitMode::kGoBackN;
    EXPECT_TRUE(parse_retransmit_mode("selective", m));
    EXPECT_EQ(m, RetransmitMode::kSelective);
    EXPECT_TRUE(parse_retransmit_mode("gbn", m));
    EXPECT_EQ(m, RetransmitMode::kGoBackN);
    EXPECT_FALSE(parse_retransmit_mode("sack", m));
    EXPECT_FALSE(parse_retransmit_mode(nullptr, m));
    EXPECT_STREQ(retransmit_mode_name(RetransmitMode::kSelective), "selective");
}

} // namespace

// The send window against sequences worked by hand: it starts at its maximum, grows by 16
// packets per acknowledgement up to that maximum, halves on a sequence NAK (not below 16),
// falls to 16 on a timeout, and is capped by an even share of the common budget (never
// below 16). It neither paces nor sets timers.
#include <gtest/gtest.h>

#include "congestion/window/send_window.h"

using namespace ibex::cc;
using ibex::cc::window::Params;
using ibex::cc::window::SendWindow;

namespace {

uint32_t send(SendWindow &w, EventType t, uint32_t flows = 0) {
    const Actions a = w.update(0, {t, 0, flows});
    EXPECT_EQ(a.rate_mbps, 0);
    EXPECT_EQ(a.wake_ns, 0u);
    EXPECT_FALSE(a.send_cnp);
    return a.window_packets;
}

Params params(uint32_t max, uint32_t shared = 1u << 24) {
    Params p;
    p.max_packets = max;
    p.shared_packets = shared;
    return p;
}

} // namespace

TEST(SendWindow, StartsAndRestartsAtItsMaximum) {
    SendWindow w(params(512));
    EXPECT_EQ(w.cwnd(), 512u);
    EXPECT_EQ(send(w, EventType::kTick), 512u);
    send(w, EventType::kTimeout);
    EXPECT_EQ(send(w, EventType::kStart), 512u);
}

TEST(SendWindow, DefaultsAreTheEngineDefaults) {
    const Params p;
    EXPECT_EQ(p.max_packets, 512u);     // IBEX_MAX_INFLIGHT
    EXPECT_EQ(p.shared_packets, 1024u); // IBEX_MAX_INFLIGHT_CONTEXT
    EXPECT_EQ(window::kMinPackets, 16u);
    EXPECT_EQ(window::kGrowthPackets, 16u);
}

TEST(SendWindow, EachAcknowledgementAddsSixteenUpToTheMaximum) {
    SendWindow w(params(100));
    EXPECT_EQ(send(w, EventType::kTimeout), 16u);
    EXPECT_EQ(send(w, EventType::kAcked), 32u);
    EXPECT_EQ(send(w, EventType::kAcked), 48u);
    EXPECT_EQ(send(w, EventType::kAcked), 64u);
    EXPECT_EQ(send(w, EventType::kAcked), 80u);
    EXPECT_EQ(send(w, EventType::kAcked), 96u);
    EXPECT_EQ(send(w, EventType::kAcked), 100u);
    EXPECT_EQ(send(w, EventType::kAcked), 100u);
}

TEST(SendWindow, SequenceNakHalvesDownToSixteen) {
    SendWindow w(params(512));
    EXPECT_EQ(send(w, EventType::kSequenceNak), 256u);
    EXPECT_EQ(send(w, EventType::kSequenceNak), 128u);
    EXPECT_EQ(send(w, EventType::kSequenceNak), 64u);
    EXPECT_EQ(send(w, EventType::kSequenceNak), 32u);
    EXPECT_EQ(send(w, EventType::kSequenceNak), 16u);
    EXPECT_EQ(send(w, EventType::kSequenceNak), 16u);
    send(w, EventType::kAcked);
    EXPECT_EQ(send(w, EventType::kSequenceNak), 16u); // 32 / 2
    send(w, EventType::kAcked);
    send(w, EventType::kAcked);
    send(w, EventType::kAcked);
    EXPECT_EQ(send(w, EventType::kSequenceNak), 32u); // 64 / 2
    EXPECT_EQ(send(w, EventType::kTimeout), 16u);
}

TEST(SendWindow, SixteenHoldsEvenAboveASmallerMaximum) {
    // A configured maximum below the floor (IBEX_MAX_INFLIGHT=4) starts and grows to that
    // maximum, but a cut never goes under the floor: the engine always behaved so.
    SendWindow w(params(4));
    EXPECT_EQ(send(w, EventType::kStart), 4u);
    EXPECT_EQ(send(w, EventType::kSequenceNak), 16u);
    EXPECT_EQ(send(w, EventType::kAcked), 4u);
    EXPECT_EQ(send(w, EventType::kTimeout), 16u);
}

TEST(SendWindow, ActiveFlowsShareTheBudgetEvenly) {
    SendWindow w(params(512, 1024));
    EXPECT_EQ(send(w, EventType::kActiveFlows, 1), 512u);  // share 1024 > window
    EXPECT_EQ(send(w, EventType::kActiveFlows, 4), 256u);  // 1024 / 4
    EXPECT_EQ(w.cwnd(), 512u);                              // the flow's own is kept
    EXPECT_EQ(send(w, EventType::kActiveFlows, 100), 16u); // 10 rounds up to the floor
    EXPECT_EQ(send(w, EventType::kActiveFlows, 0), 512u);  // no flow listed counts as one
    send(w, EventType::kActiveFlows, 3);
    EXPECT_EQ(send(w, EventType::kAcked), 341u);            // the share holds until it changes
    EXPECT_EQ(send(w, EventType::kTimeout), 16u);           // the smaller of the two
}

TEST(SendWindow, RateSignalsLeaveTheWindowAlone) {
    SendWindow w(params(512));
    send(w, EventType::kSequenceNak);
    EXPECT_EQ(w.update(5, {EventType::kTxBytes, 1u << 20}).window_packets, 256u);
    EXPECT_EQ(send(w, EventType::kCnpReceived), 256u);
    EXPECT_EQ(send(w, EventType::kCeReceived), 256u);
    EXPECT_EQ(send(w, EventType::kTick), 256u);
}

TEST(SendWindow, DrivenThroughTheInterface) {
    SendWindow concrete(params(64));
    CongestionControl &cc = concrete;
    EXPECT_EQ(cc.update(0, {EventType::kTimeout}).window_packets, 16u);
    EXPECT_EQ(cc.update(1, {EventType::kAcked}).window_packets, 32u);
    EXPECT_EQ(concrete.allowed(), 32u);
}

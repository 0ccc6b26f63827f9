// The send window of one reliable flow (a soft RC QP's requester), in packets: additive
// increase on every acknowledgement, halved on a sequence NAK, back to the minimum on a
// timeout, and never above the flow's share of a budget that several flows split evenly
// (the context's, IBEX_MAX_INFLIGHT_CONTEXT in the soft transport). Without it, many
// flows that lose packets together retransmit full windows together and overflow the
// receiver's socket buffer again (a retransmission storm).
//
// Each answer names the window (Actions::window_packets): the requester puts no new
// packet in flight while that many are unacknowledged. It has no timers (wake_ns is 0)
// and does not pace (rate_mbps is 0).
#pragma once

#include <cstdint>

#include "congestion/cc.h"

namespace ibex::cc::window {

// Neither the floor nor a share below it ever holds a flow under this many packets.
inline constexpr uint32_t kMinPackets = 16;
// Added per acknowledgement: the window about doubles per round trip.
inline constexpr uint32_t kGrowthPackets = 16;

struct Params {
    uint32_t max_packets = 512;      // the window a flow starts with and never grows past
    uint32_t shared_packets = 1024;  // the budget the active flows share evenly
};

class SendWindow final : public CongestionControl {
public:
    explicit SendWindow(const Params &p) : p_(p), cwnd_(p.max_packets) {}
    Actions update(uint64_t now_ns, const Event &ev) override;

    uint32_t cwnd() const { return cwnd_; }        // the flow's own window
    uint32_t allowed() const;                      // the window, its share applied

private:
    Params p_;
    uint32_t cwnd_;
    uint32_t flows_ = 1;
};

} // namespace ibex::cc::window

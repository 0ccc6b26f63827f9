#include "congestion/window/send_window.h"

#include <algorithm>

namespace ibex::cc::window {

uint32_t SendWindow::allowed() const {
    return std::min(cwnd_, std::max(kMinPackets, p_.shared_packets / flows_));
}

Actions SendWindow::update(uint64_t, const Event &ev) {
    switch (ev.type) {
    case EventType::kStart: cwnd_ = p_.max_packets; break;
    case EventType::kAcked: cwnd_ = std::min(p_.max_packets, cwnd_ + kGrowthPackets); break;
    // A gap means the path dropped packets: send less until acknowledgements come back.
    case EventType::kSequenceNak: cwnd_ = std::max(kMinPackets, cwnd_ / 2); break;
    // A timeout means the path lost a whole window (or the peer is gone): resend the
    // oldest packets only, not the whole window of every flow at once.
    case EventType::kTimeout: cwnd_ = kMinPackets; break;
    case EventType::kActiveFlows: flows_ = std::max<uint32_t>(1, ev.flows); break;
    // Rate signals: the window reacts to acknowledgements and loss only.
    case EventType::kTick:
    case EventType::kTxBytes:
    case EventType::kCnpReceived:
    case EventType::kCeReceived: break;
    }
    Actions a;
    a.window_packets = allowed();
    return a;
}

} // namespace ibex::cc::window

#include "congestion/dcqcn/dcqcn.h"

namespace ibex::cc::dcqcn {

Actions Dcqcn::update(uint64_t now, const Event &ev) {
    Actions a;
    switch (ev.type) {
    case EventType::kTick: rp_.advance(now); break;
    case EventType::kTxBytes: rp_.on_bytes(now, ev.bytes); break;
    case EventType::kCnpReceived: rp_.on_cnp(now); break;
    case EventType::kCeReceived: a.send_cnp = np_.on_ce(now); break;
    // Window signals: DCQCN reacts to ECN feedback only, not to loss.
    case EventType::kStart:
    case EventType::kAcked:
    case EventType::kSequenceNak:
    case EventType::kTimeout:
    case EventType::kActiveFlows: break;
    }
    a.rate_mbps = rp_.rate_mbps();
    a.wake_ns = rp_.next_event_ns();
    return a;
}

} // namespace ibex::cc::dcqcn

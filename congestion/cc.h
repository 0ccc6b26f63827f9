// The congestion-control interface of the soft transport (and of anything that wants to
// replay it, such as a simulator): one object per flow and controller, driven by
// update(now, event), answering with what to do. It never reads a clock or touches a
// socket, so the same code paces real packets and virtual ones, and tests drive it with
// hand-picked times. A controller ignores the events it has no use for: a rate controller
// (DCQCN) answers with a rate and leaves the window open, a window controller
// (window/send_window.h) answers with a window and leaves the rate unpaced.
#pragma once

#include <cstdint>

namespace ibex::cc {

enum class EventType : uint8_t {
    kTick,        // time passed; run whatever timers expired
    kTxBytes,     // the flow transmitted `bytes` bytes of requests
    kCnpReceived, // a CNP for this flow arrived (reaction point)
    kCeReceived,  // a CE-marked packet of this flow arrived (notification point)
    kStart,       // the flow (re)connects: what was learned about an earlier path is void
    kAcked,       // an acknowledgement moved the flow's oldest unacknowledged packet on
    kSequenceNak, // the receiver reported a gap: the path dropped packets
    kTimeout,     // the transport timer expired with packets outstanding
    kActiveFlows, // `flows` flows (this one among them) now share one in-flight budget
};

struct Event {
    EventType type = EventType::kTick;
    uint64_t bytes = 0;
    uint32_t flows = 0;
};

struct Actions {
    double rate_mbps = 0;        // pace the flow at this rate (0: not paced by this controller)
    bool send_cnp = false;       // send one CNP to the flow's sender now
    uint64_t wake_ns = 0;        // the next time the state changes without an event (0: never)
    uint32_t window_packets = 0; // at most this many packets unacknowledged (0: no limit from this controller)
};

class CongestionControl {
public:
    virtual ~CongestionControl() = default;
    virtual Actions update(uint64_t now_ns, const Event &ev) = 0;
};

} // namespace ibex::cc

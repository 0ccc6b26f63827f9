// The congestion-control interface of the soft transport (and of anything that wants to
// replay it, such as a simulator): one object per flow, driven by update(now, event),
// answering with what to do. It never reads a clock or touches a socket, so the same code
// paces real packets and virtual ones, and tests drive it with hand-picked times.
#pragma once

#include <cstdint>

namespace ibex::cc {

enum class EventType : uint8_t {
    kTick,        // time passed; run whatever timers expired
    kTxBytes,     // the flow transmitted `bytes` bytes of requests
    kCnpReceived, // a CNP for this flow arrived (reaction point)
    kCeReceived,  // a CE-marked packet of this flow arrived (notification point)
};

struct Event {
    EventType type = EventType::kTick;
    uint64_t bytes = 0;
};

struct Actions {
    double rate_mbps = 0;  // pace the flow at this rate
    bool send_cnp = false; // send one CNP to the flow's sender now
    uint64_t wake_ns = 0;  // the next time the state changes without an event (0: never)
};

class CongestionControl {
public:
    virtual ~CongestionControl() = default;
    virtual Actions update(uint64_t now_ns, const Event &ev) = 0;
};

} // namespace ibex::cc

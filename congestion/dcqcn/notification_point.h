// DCQCN notification point (the receiver side of one flow): a CE-marked packet asks for a
// CNP to the flow's sender, at most one per min_time_between_cnps.
#pragma once

#include <cstdint>

namespace ibex::cc::dcqcn {

class NotificationPoint {
public:
    explicit NotificationPoint(uint64_t interval_ns) : interval_ns_(interval_ns) {}
    // True when a CNP goes out now for a CE-marked packet that arrived at `now`.
    bool on_ce(uint64_t now);
    uint64_t cnps_sent() const { return sent_; }
    uint64_t marked() const { return marked_; }

private:
    uint64_t interval_ns_;
    uint64_t last_ = 0;
    uint64_t sent_ = 0;
    uint64_t marked_ = 0;
};

} // namespace ibex::cc::dcqcn

// Paces one flow at a rate: each packet moves the flow's next allowed send time on by
// its serialisation time at that rate. A flow that fell behind (its sender was not
// scheduled) may catch up by at most `burst_ns` worth of packets, so pacing holds the
// long-run rate without letting a late sender dump a whole window at once. Pure: the
// caller passes the time.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ibex::cc {

class Pacer {
public:
    void set_rate(double mbps) { ns_per_byte_ = mbps > 0 ? 8000.0 / mbps : 0; }
    void set_burst(uint64_t ns) { burst_ns_ = ns; }
    double rate_mbps() const { return ns_per_byte_ > 0 ? 8000.0 / ns_per_byte_ : 0; }
    // Unpaced (rate 0) flows may always send.
    bool ready(uint64_t now) const { return ns_per_byte_ == 0 || now >= next_ns_; }
    uint64_t next_ns() const { return ns_per_byte_ == 0 ? 0 : next_ns_; }
    void sent(uint64_t now, uint32_t bytes) {
        if (ns_per_byte_ == 0) return;
        const uint64_t floor = now > burst_ns_ ? now - burst_ns_ : 0;
        next_ns_ = std::max(next_ns_, floor) + static_cast<uint64_t>(bytes * ns_per_byte_ + 0.5);
    }

private:
    double ns_per_byte_ = 0;
    uint64_t burst_ns_ = 100000;
    uint64_t next_ns_ = 0;
};

} // namespace ibex::cc

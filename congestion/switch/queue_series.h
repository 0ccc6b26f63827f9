// A time series of a congestion point's egress ports: every period, one sample per port
// of its queue and cumulative counters, and the bytes it sent per ingress port (per-flow
// rates). Pure: the caller passes the time.
#pragma once

#include <cstdint>
#include <vector>

#include "congestion/switch/congestion_point.h"

namespace ibex::cc {

struct QueueSample {
    uint64_t t_ns; // since the series' first sample
    uint32_t port;
    uint64_t queue_bytes;
    uint64_t tx_bytes;
    uint64_t marked;
    uint64_t dropped;
    std::vector<uint64_t> from; // tx bytes by ingress port
};

class QueueSeries {
public:
    explicit QueueSeries(uint64_t period_ns) : period_ns_(period_ns) {}
    // Samples every port of `cp` if a period is due at `now`; the first call starts the
    // series. A caller that was late takes one sample and goes on a period from now.
    void sample(uint64_t now, const CongestionPoint &cp);
    // When the next sample is due (0 before the first).
    uint64_t next_ns() const { return next_ns_; }
    const std::vector<QueueSample> &samples() const { return samples_; }

private:
    uint64_t period_ns_;
    uint64_t start_ns_ = 0;
    uint64_t next_ns_ = 0;
    std::vector<QueueSample> samples_;
};

} // namespace ibex::cc

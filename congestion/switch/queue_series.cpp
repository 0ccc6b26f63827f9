#include "congestion/switch/queue_series.h"

namespace ibex::cc {

void QueueSeries::sample(uint64_t now, const CongestionPoint &cp) {
    if (!start_ns_) {
        start_ns_ = now;
        next_ns_ = now;
    }
    if (now < next_ns_) return;
    for (size_t i = 0; i < cp.ports(); ++i) {
        const EgressCounters &c = cp.counters(i);
        samples_.push_back({now - start_ns_, static_cast<uint32_t>(i), c.queue_bytes, c.tx_bytes, c.marked, c.dropped,
                            cp.sent_by_ingress(i)});
    }
    next_ns_ += period_ns_;
    if (next_ns_ <= now) next_ns_ = now + period_ns_;
}

} // namespace ibex::cc

#include "congestion/switch/congestion_point.h"

#include <algorithm>

namespace ibex::cc {

CongestionPoint::CongestionPoint(const CongestionPointConfig &cfg)
    : cfg_(cfg), red_(cfg.red, cfg.seed), buffer_(cfg.buffer_bytes, cfg.reserve_bytes) {}

size_t CongestionPoint::add_port(double link_mbps) {
    Port p;
    p.shaper.set_rate(link_mbps > 0 ? link_mbps : cfg_.link_mbps);
    p.shaper.set_burst(cfg_.burst_ns);
    ports_.push_back(std::move(p));
    buffer_.add_port();
    for (Port &q : ports_) q.from.resize(ports_.size(), 0);
    return ports_.size() - 1;
}

bool CongestionPoint::admits(size_t egress, uint32_t bytes) const {
    return buffer_.admits(ports_[egress].c.queue_bytes, bytes);
}

bool CongestionPoint::mark(Port &port, bool ect, uint64_t queue_bytes) {
    if (!cfg_.ecn) return false;
    if (!ect) {
        if (queue_bytes > cfg_.red.kmin_bytes) ++port.c.not_ect;
        return false;
    }
    if (!red_.mark(queue_bytes)) return false;
    ++port.c.marked;
    return true;
}

Admission CongestionPoint::enqueue(uint64_t now, size_t egress, const PacketMeta &p) {
    Port &port = ports_[egress];
    Admission a;
    if (!buffer_.admits(port.c.queue_bytes, p.bytes)) {
        ++port.c.dropped;
        return a;
    }
    a.accepted = true;
    if (cfg_.mark_at == MarkAt::kEnqueue) a.ce = mark(port, p.ect, port.c.queue_bytes);
    buffer_.take(port.c.queue_bytes, p.bytes);
    port.queue.push_back({p, now, a.ce});
    port.c.queue_bytes += p.bytes;
    port.c.max_queue_bytes = std::max(port.c.max_queue_bytes, port.c.queue_bytes);
    if (cfg_.pause && !port.paused && port.c.queue_bytes > cfg_.xoff_bytes) {
        port.paused = true;
        ++port.c.pauses;
        a.xoff = true;
    }
    return a;
}

std::optional<Departure> CongestionPoint::dequeue(uint64_t now, size_t egress) {
    Port &port = ports_[egress];
    std::optional<Departure> d;
    if (!port.queue.empty() && port.shaper.ready(now)) {
        const Queued q = port.queue.front();
        port.queue.pop_front();
        const uint32_t bytes = q.packet.bytes;
        buffer_.give_back(port.c.queue_bytes, bytes);
        port.c.queue_bytes -= bytes;
        const bool ce = cfg_.mark_at == MarkAt::kDequeue ? mark(port, q.packet.ect, port.c.queue_bytes) : q.ce;
        port.shaper.sent(now, bytes);
        ++port.c.tx_packets;
        port.c.tx_bytes += bytes;
        port.from[q.packet.ingress] += bytes;
        d = Departure{q.packet, ce, now - q.enqueued_ns};
    }
    if (port.paused && port.c.queue_bytes < cfg_.xon_bytes) port.paused = false;
    return d;
}

void CongestionPoint::not_sent(size_t egress, const Departure &d) {
    Port &port = ports_[egress];
    --port.c.tx_packets;
    port.c.tx_bytes -= d.packet.bytes;
    port.from[d.packet.ingress] -= d.packet.bytes;
    ++port.c.tx_errors;
}

uint64_t CongestionPoint::next_departure() const {
    uint64_t t = 0;
    for (size_t e = 0; e < ports_.size(); ++e) {
        const uint64_t d = next_departure(e);
        if (d && (!t || d < t)) t = d;
    }
    return t;
}

uint64_t CongestionPoint::next_departure(size_t egress) const {
    const Port &p = ports_[egress];
    return p.queue.empty() ? 0 : p.shaper.next_ns();
}

} // namespace ibex::cc

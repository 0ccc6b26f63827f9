// Switches: a packet arriving at a switch is offered to the congestion point of its
// egress port (congestion/switch: shared buffer, RED/ECN, tail drop, xoff/xon), the port
// is served when its shaper allows, and PFC pause/resume frames go to the senders that
// feed a queue above xoff.
#include <algorithm>

#include "congestion/sim/simulator_parts.h"

namespace ibex::sim {

void Simulator::arrive_at_switch(uint32_t p, uint64_t now) {
    Packet &pk = pkt_[p];
    const Link &in = link_[pk.link];
    const uint32_t s = node_index_[in.to];
    const Qp &qp = qp_[pk.qp];
    ++pk.hop;
    const uint32_t next = (pk.flags & kCnp) ? path_[qp.rpath + pk.hop] : path_[qp.path + pk.hop];
    const uint32_t egress = link_[next].from_port;
    Switch &sw = sw_[s];
    const cc::PacketMeta meta{p, pk.wire, static_cast<uint16_t>(in.to_port), !(pk.flags & kCnp)};
    if (on_offer) on_offer(now, s, egress, meta);
    const cc::Admission a = sw.cp->enqueue(now, egress, meta);
    if (!a.accepted) {
        if (pk.flags & kCnp) {
            free_packet(p);
        } else {
            events_.push(now + cfg_.rto_ns, EventKind::kRetransmit, p);
        }
        return;
    }
    pk.link = next;
    if (cfg_.sw.pause && sw.cp->paused(egress)) blame(s, egress, in.to_port, now);
    port_kick(sw.first_gport + egress, now);
}

void Simulator::port_kick(uint32_t gport, uint64_t now) {
    Switch &sw = sw_[gport_sw_[gport]];
    const uint32_t e = gport_port_[gport];
    Switch::Port &pt = sw.ports[e];
    if (pt.scheduled || link_[pt.out_link].paused || sw.cp->counters(e).queue_bytes == 0) return;
    const uint64_t t = std::max(now, sw.cp->next_departure(e));
    if (t == now && !in_service_) {
        // An idle port sends at once: no event for the commonest case, a packet crossing
        // an uncongested switch. (Not from inside port_service, which just sent.)
        in_service_ = true;
        port_service(gport, now);
        in_service_ = false;
        return;
    }
    pt.scheduled = true;
    events_.push(t, EventKind::kPortService, gport);
}

void Simulator::port_service(uint32_t gport, uint64_t now) {
    Switch &sw = sw_[gport_sw_[gport]];
    const uint32_t e = gport_port_[gport];
    Switch::Port &pt = sw.ports[e];
    pt.scheduled = false;
    if (link_[pt.out_link].paused) return; // the resume kicks the port again
    if (const std::optional<cc::Departure> d = sw.cp->dequeue(now, e)) {
        const uint32_t p = d->packet.handle;
        if (on_depart) on_depart(now, gport_sw_[gport], e, *d);
        if (d->ce) pkt_[p].flags |= kCe;
        transmit(p, pt.out_link, now);
    }
    if (!pt.blamed.empty() && !sw.cp->paused(e)) {
        // Below xon: every ingress told to pause for this queue may go again, unless
        // another queue still holds it.
        for (uint32_t i : pt.blamed) {
            Switch::Port &in = sw.ports[i];
            if (--in.pause_refs == 0) {
                in.pausing = false;
                events_.push(now + link_[in.in_link].delay_ns, EventKind::kResume, in.in_link);
            }
        }
        pt.blamed.clear();
    }
    port_kick(gport, now);
}

void Simulator::blame(uint32_t s, uint32_t egress, uint32_t ingress, uint64_t now) {
    Switch::Port &e = sw_[s].ports[egress];
    if (std::find(e.blamed.begin(), e.blamed.end(), ingress) != e.blamed.end()) return;
    e.blamed.push_back(ingress);
    Switch::Port &in = sw_[s].ports[ingress];
    if (in.pause_refs++ == 0) {
        in.pausing = true;
        ++in.pauses_sent;
        ++stats_.pause_frames;
        events_.push(now + link_[in.in_link].delay_ns, EventKind::kPause, in.in_link);
    }
}

void Simulator::pfc_frame(uint32_t l, bool pause, uint64_t now) {
    Link &link = link_[l];
    link.paused = pause;
    if (pause) {
        ++link.pauses_received;
        return;
    }
    const uint32_t idx = node_index_[link.from];
    if (routing_.is_switch(link.from))
        port_kick(sw_[idx].first_gport + link.from_port, now);
    else
        nic_kick(idx, now);
}

void Simulator::sample(uint64_t now) {
    uint64_t drops = 0;
    for (uint32_t g = 0; g < gport_sw_.size(); ++g) {
        const cc::EgressCounters &c = sw_[gport_sw_[g]].cp->counters(gport_port_[g]);
        drops += c.dropped;
        const uint64_t q = c.queue_bytes;
        if (q || last_sampled_queue_[g]) queue_series_.push_back({now, gport_sw_[g], gport_port_[g], q});
        last_sampled_queue_[g] = q;
    }
    counter_series_.push_back({now, stats_.cnps, stats_.pause_frames, drops, delivered_total_});
    if (qp_.size() <= cfg_.rate_series_max_qps)
        for (uint32_t q = 0; q < qp_.size(); ++q)
            rate_series_.push_back({now, q, qp_[q].pacer.rate_mbps(), qp_[q].delivered});
    events_.push(now + cfg_.sample_ns, EventKind::kSample, 0);
}

std::vector<PortStats> Simulator::port_stats() const {
    std::vector<PortStats> out;
    for (uint32_t s = 0; s < sw_.size(); ++s)
        for (uint32_t p = 0; p < sw_[s].ports.size(); ++p)
            out.push_back({s, p, link_[sw_[s].ports[p].out_link].to, sw_[s].cp->counters(p)});
    return out;
}

const cc::CongestionPoint &Simulator::switch_point(uint32_t s) const { return *sw_[s].cp; }

std::pair<uint32_t, uint32_t> Simulator::host_port(uint32_t h) const {
    const Link &up = link_[host_[h].uplink];
    return {node_index_[up.to], up.to_port};
}

uint64_t Simulator::pauses_sent(uint32_t s, uint32_t port) const { return sw_[s].ports[port].pauses_sent; }

} // namespace ibex::sim

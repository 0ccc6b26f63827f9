// Hosts, QPs and messages: the NIC's choice of what to send, DCQCN at both ends, delivery,
// dependencies, and the run loop. Switches and PFC are in switching.cpp.
#include <algorithm>

#include "congestion/sim/simulator_parts.h"

namespace ibex::sim {

Simulator::Simulator(const Routing &routing, const SimConfig &cfg) : cfg_(cfg), routing_(routing) {
    cfg_.sw.burst_ns = 0; // simulated ports are served exactly on time: no catch-up
    for (const DirectedLink &l : routing_.links())
        link_.push_back({l.from, l.to, l.from_port, l.to_port, 8.0 / l.gbps, l.delay_ns});
    node_index_.assign(routing_.nodes(), kNone);
    for (uint32_t h = 0; h < routing_.hosts(); ++h) {
        Host host;
        host.node = routing_.host_node(h);
        host.uplink = routing_.out_links(host.node)[0];
        node_index_[host.node] = h;
        host_.push_back(std::move(host));
    }
    for (uint32_t v = 0; v < routing_.nodes(); ++v) {
        if (!routing_.is_switch(v)) continue;
        Switch s;
        s.node = v;
        s.first_gport = static_cast<uint32_t>(gport_sw_.size());
        cc::CongestionPointConfig c = cfg_.sw;
        c.seed = mix64(cfg_.seed + v);
        s.cp = std::make_unique<cc::CongestionPoint>(c);
        for (uint32_t out : routing_.out_links(v)) {
            s.cp->add_port(routing_.links()[out].gbps * 1000);
            Switch::Port p;
            p.out_link = out;
            p.in_link = Routing::reverse(out);
            gport_sw_.push_back(static_cast<uint32_t>(sw_.size()));
            gport_port_.push_back(static_cast<uint32_t>(s.ports.size()));
            s.ports.push_back(std::move(p));
        }
        node_index_[v] = static_cast<uint32_t>(sw_.size());
        sw_.push_back(std::move(s));
    }
    last_sampled_queue_.assign(gport_sw_.size(), 0);
    events_.reserve(1 << 16);
}

Simulator::~Simulator() = default;

uint64_t Simulator::serialise(uint32_t link, uint32_t bytes) const {
    // As the congestion point's shaper (congestion/pacer.h) rounds it, so a port and the
    // link it feeds agree on when a packet has left.
    return static_cast<uint64_t>(bytes * link_[link].ns_per_byte + 0.5);
}

uint32_t Simulator::add_qp(uint32_t src, uint32_t dst) {
    Qp q;
    q.src = src;
    q.dst = dst;
    const uint32_t id = static_cast<uint32_t>(qp_.size());
    const uint64_t hash = mix64(cfg_.seed ^ (uint64_t(id) << 1));
    q.path = static_cast<uint32_t>(path_.size());
    if (src != dst) routing_.path(src, dst, hash, path_);
    q.path_len = static_cast<uint32_t>(path_.size()) - q.path;
    q.rpath = static_cast<uint32_t>(path_.size());
    if (src != dst) routing_.path(dst, src, mix64(hash), path_);
    q.rpath_len = static_cast<uint32_t>(path_.size()) - q.rpath;
    q.pacer.set_burst(0);
    if (cfg_.dcqcn && src != dst) {
        cc::dcqcn::Params p = cfg_.dcqcn_params;
        p.line_rate_mbps = routing_.links()[host_[src].uplink].gbps * 1000;
        q.cc = std::make_unique<cc::dcqcn::Dcqcn>(p);
        q.pacer.set_rate(p.line_rate_mbps);
    }
    qp_.push_back(std::move(q));
    return id;
}

uint32_t Simulator::add_message(uint32_t qp, uint64_t bytes, std::span<const uint32_t> deps, uint64_t start_ns) {
    const uint32_t id = static_cast<uint32_t>(msg_.size());
    Message m;
    m.qp = qp;
    m.pending = static_cast<uint32_t>(deps.size());
    m.bytes = bytes;
    m.start_ns = start_ns;
    msg_.push_back(m);
    for (uint32_t d : deps) dep_pairs_.push_back({d, id});
    return id;
}

void Simulator::add_dependency(uint32_t m, uint32_t dep) {
    ++msg_[m].pending;
    dep_pairs_.push_back({dep, m});
}

uint32_t Simulator::new_packet() {
    if (free_pkt_.empty()) {
        pkt_.push_back({});
        return static_cast<uint32_t>(pkt_.size() - 1);
    }
    const uint32_t p = free_pkt_.back();
    free_pkt_.pop_back();
    return p;
}

void Simulator::free_packet(uint32_t p) { free_pkt_.push_back(p); }

// ---- messages

void Simulator::release_when_due(uint32_t m, uint64_t now) {
    if (msg_[m].start_ns > now)
        events_.push(msg_[m].start_ns, EventKind::kRelease, m);
    else
        release(m, now);
}

void Simulator::release(uint32_t m, uint64_t now) {
    Message &msg = msg_[m];
    msg.ready_ns = now;
    Qp &q = qp_[msg.qp];
    if (q.src == q.dst) {
        const double ns = double(msg.bytes) * 8 / cfg_.local_gbps;
        events_.push(now + cfg_.local_latency_ns + static_cast<uint64_t>(ns), EventKind::kLocalDone, m);
        return;
    }
    if (q.tail == kNone)
        q.head = m;
    else
        msg_[q.tail].next = m;
    q.tail = m;
    qp_activate(msg.qp, now);
}

void Simulator::complete(uint32_t m, uint64_t now) {
    msg_[m].done_ns = now;
    --remaining_;
    ++stats_.messages_done;
    for (uint32_t i = dependents_off_[m]; i < dependents_off_[m + 1]; ++i) {
        const uint32_t d = dependents_[i];
        if (--msg_[d].pending == 0) release_when_due(d, now);
    }
}

// ---- QPs and DCQCN

void Simulator::qp_activate(uint32_t q, uint64_t now) {
    Qp &qp = qp_[q];
    if (!qp.active) {
        qp.active = true;
        host_[qp.src].active.push_back(q);
        // The reaction point's timers ran on while the QP was idle; catch them up.
        if (qp.cc) rp_apply(q, qp.cc->update(now, {cc::EventType::kTick, 0, 0}), now);
    }
    nic_kick(qp.src, now);
}

void Simulator::rp_apply(uint32_t q, const cc::Actions &a, uint64_t now) {
    Qp &qp = qp_[q];
    qp.pacer.set_rate(a.rate_mbps);
    if (a.wake_ns && (qp.wake_ns == 0 || a.wake_ns < qp.wake_ns)) {
        qp.wake_ns = std::max(a.wake_ns, now);
        events_.push(qp.wake_ns, EventKind::kRpWake, q);
    }
}

void Simulator::rp_wake(uint32_t q, uint64_t now) {
    Qp &qp = qp_[q];
    if (qp.wake_ns != now) return; // superseded by an earlier wake-up
    qp.wake_ns = 0;
    // An idle QP's timers are caught up when it next has work (qp_activate), so an idle
    // fabric has no events left.
    if (!qp.has_work()) return;
    rp_apply(q, qp.cc->update(now, {cc::EventType::kTick, 0, 0}), now);
}

// ---- the NIC

void Simulator::nic_kick(uint32_t h, uint64_t now) {
    Host &host = host_[h];
    const uint64_t t = std::max(now, host.busy_until);
    if (host.send_at == 0 || t < host.send_at) {
        host.send_at = t;
        events_.push(t, EventKind::kNicSend, h);
    }
}

void Simulator::transmit(uint32_t p, uint32_t link, uint64_t now) {
    pkt_[p].link = link;
    events_.push(now + serialise(link, pkt_[p].wire) + link_[link].delay_ns, EventKind::kArrive, p);
}

void Simulator::nic_send(uint32_t h, uint64_t now) {
    Host &host = host_[h];
    if (host.send_at != now) return; // superseded
    host.send_at = 0;
    if (host.busy_until > now) {
        nic_kick(h, now);
        return;
    }
    if (host.cnp_head != kNone) {
        const uint32_t p = host.cnp_head;
        host.cnp_head = pkt_[p].next;
        if (host.cnp_head == kNone) host.cnp_tail = kNone;
        transmit(p, host.uplink, now);
        host.busy_until = now + serialise(host.uplink, pkt_[p].wire);
        nic_kick(h, now);
        return;
    }
    if (link_[host.uplink].paused || host.active.empty()) return; // a resume or new work kicks again
    uint64_t earliest = UINT64_MAX;
    for (size_t tries = 0; tries < host.active.size();) {
        if (host.rr >= host.active.size()) host.rr = 0;
        const uint32_t q = host.active[host.rr];
        Qp &qp = qp_[q];
        if (!qp.has_work()) {
            qp.active = false;
            host.active[host.rr] = host.active.back();
            host.active.pop_back();
            continue;
        }
        ++host.rr;
        if (qp.pacer.ready(now)) {
            if (send_from_qp(host, q, now)) nic_kick(h, now);
            return;
        }
        earliest = std::min(earliest, qp.pacer.next_ns());
        ++tries;
    }
    if (earliest != UINT64_MAX && (host.send_at == 0 || earliest < host.send_at)) {
        host.send_at = earliest;
        events_.push(earliest, EventKind::kNicSend, h);
    }
}

bool Simulator::send_from_qp(Host &host, uint32_t q, uint64_t now) {
    Qp &qp = qp_[q];
    uint32_t p;
    if (qp.resend_head != kNone) {
        p = qp.resend_head;
        qp.resend_head = pkt_[p].next;
        if (qp.resend_head == kNone) qp.resend_tail = kNone;
        ++qp.retransmits;
    } else {
        const uint32_t m = qp.head;
        Message &msg = msg_[m];
        const uint32_t payload = static_cast<uint32_t>(std::min<uint64_t>(cfg_.mtu, msg.bytes - qp.head_sent));
        p = new_packet();
        pkt_[p] = Packet{q, m, payload, payload + cfg_.header_bytes, kNone, kNone, 0, 0};
        qp.head_sent += payload;
        if (qp.head_sent == msg.bytes) {
            qp.head = msg.next;
            qp.head_sent = 0;
            if (qp.head == kNone) qp.tail = kNone;
        }
    }
    Packet &pk = pkt_[p];
    pk.hop = 0;
    pk.flags = 0;
    if (!qp.first_tx) qp.first_tx = now ? now : 1;
    ++stats_.packets;
    if (qp.cc) rp_apply(q, qp.cc->update(now, {cc::EventType::kTxBytes, pk.wire, 0}), now);
    qp.pacer.sent(now, pk.wire);
    transmit(p, path_[qp.path], now);
    host.busy_until = now + serialise(host.uplink, pk.wire);
    return true;
}

void Simulator::deliver(uint32_t p, uint64_t now) {
    const uint32_t q = pkt_[p].qp;
    const uint8_t flags = pkt_[p].flags;
    Qp &qp = qp_[q];
    if (flags & kCnp) {
        ++qp.cnps;
        if (qp.cc) rp_apply(q, qp.cc->update(now, {cc::EventType::kCnpReceived, 0, 0}), now);
        free_packet(p);
        return;
    }
    const bool ce = flags & kCe;
    bool cnp = false;
    if (ce && qp.cc) cnp = qp.cc->update(now, {cc::EventType::kCeReceived, 0, 0}).send_cnp;
    if (on_receive) on_receive(now, q, ce, cnp);
    if (cnp) {
        const uint32_t c = new_packet();
        pkt_[c] = Packet{q, kNone, 0, cfg_.cnp_bytes, kNone, kNone, 0, kCnp};
        Host &dst = host_[qp.dst];
        if (dst.cnp_tail == kNone)
            dst.cnp_head = c;
        else
            pkt_[dst.cnp_tail].next = c;
        dst.cnp_tail = c;
        ++dst.cnps_sent;
        ++stats_.cnps;
        nic_kick(qp.dst, now);
    }
    const Packet &data = pkt_[p]; // new_packet() may have moved the pool
    qp.delivered += data.payload;
    qp.last_rx = now;
    delivered_total_ += data.payload;
    Message &msg = msg_[data.msg];
    msg.delivered += data.payload;
    const uint32_t m = data.msg;
    const bool done = msg.delivered == msg.bytes;
    free_packet(p);
    if (done) complete(m, now);
}

// ---- the run

void Simulator::dispatch(const Event &e) {
    const uint64_t now = e.t;
    switch (e.kind()) {
    case EventKind::kNicSend: nic_send(e.id, now); break;
    case EventKind::kArrive:
        if (routing_.is_switch(link_[pkt_[e.id].link].to))
            arrive_at_switch(e.id, now);
        else
            deliver(e.id, now);
        break;
    case EventKind::kPortService: port_service(e.id, now); break;
    case EventKind::kPause: pfc_frame(e.id, true, now); break;
    case EventKind::kResume: pfc_frame(e.id, false, now); break;
    case EventKind::kRpWake: rp_wake(e.id, now); break;
    case EventKind::kRelease: release(e.id, now); break;
    case EventKind::kRetransmit: {
        Qp &qp = qp_[pkt_[e.id].qp];
        pkt_[e.id].next = kNone;
        if (qp.resend_tail == kNone)
            qp.resend_head = e.id;
        else
            pkt_[qp.resend_tail].next = e.id;
        qp.resend_tail = e.id;
        qp_activate(pkt_[e.id].qp, now);
        break;
    }
    case EventKind::kLocalDone: complete(e.id, now); break;
    case EventKind::kSample: sample(now); break;
    }
}

RunStats Simulator::run(const Progress &progress) {
    // Dependents as one flat list per message (counting sort of the pairs).
    dependents_off_.assign(msg_.size() + 1, 0);
    for (const auto &[d, m] : dep_pairs_) ++dependents_off_[d + 1];
    for (size_t i = 0; i < msg_.size(); ++i) dependents_off_[i + 1] += dependents_off_[i];
    dependents_.assign(dep_pairs_.size(), 0);
    std::vector<uint32_t> fill(dependents_off_.begin(), dependents_off_.end() - 1);
    for (const auto &[d, m] : dep_pairs_) dependents_[fill[d]++] = m;
    dep_pairs_.clear();
    dep_pairs_.shrink_to_fit();

    remaining_ = msg_.size();
    for (const Message &m : msg_) bytes_total_ += m.bytes;
    for (uint32_t m = 0; m < msg_.size(); ++m)
        if (msg_[m].pending == 0) release_when_due(m, 0);
    if (cfg_.sample_ns) events_.push(0, EventKind::kSample, 0);
    uint64_t now = 0;
    while (!events_.empty() && (remaining_ > 0 || cfg_.end_ns)) {
        const Event e = events_.pop();
        if (cfg_.end_ns && e.t > cfg_.end_ns) {
            now = cfg_.end_ns;
            break;
        }
        now = e.t;
        dispatch(e);
        if ((++stats_.events & ((1u << 20) - 1)) == 0 && progress) {
            stats_.sim_ns = now;
            progress(stats_, delivered_total_, bytes_total_);
        }
    }
    stats_.sim_ns = cfg_.end_ns && remaining_ ? std::max(now, cfg_.end_ns) : now;
    stats_.all_done = remaining_ == 0;
    for (const Switch &s : sw_)
        for (size_t p = 0; p < s.ports.size(); ++p) stats_.drops += s.cp->counters(p).dropped;
    return stats_;
}

// ---- results

const MessageResult Simulator::result(uint32_t m) const {
    const Message &x = msg_[m];
    return {x.qp, x.bytes, x.ready_ns, x.done_ns};
}

QpStats Simulator::qp_stats(uint32_t q) const {
    const Qp &x = qp_[q];
    return {x.src, x.dst, x.delivered, x.first_tx, x.last_rx, x.cnps, x.retransmits, x.pacer.rate_mbps()};
}

const cc::dcqcn::Dcqcn *Simulator::dcqcn(uint32_t q) const { return qp_[q].cc.get(); }

uint64_t Simulator::cnps_sent(uint32_t h) const { return host_[h].cnps_sent; }
uint32_t Simulator::hosts() const { return static_cast<uint32_t>(host_.size()); }
size_t Simulator::messages() const { return msg_.size(); }
uint32_t Simulator::qps() const { return static_cast<uint32_t>(qp_.size()); }
uint32_t Simulator::switches() const { return static_cast<uint32_t>(sw_.size()); }

} // namespace ibex::sim

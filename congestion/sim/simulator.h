// A discrete-event, packet-level simulator of an RDMA fabric. It knows hosts, links,
// switches and messages with dependencies, and runs ibex's own state machines on them:
// every switch is a congestion/switch CongestionPoint (shared buffer, egress queues
// shaped to the link, RED/ECN on enqueue or dequeue, tail drop, PFC xoff/xon), every QP
// carries a congestion/dcqcn Dcqcn (reaction point at the sender, notification point at
// the receiver) and a congestion/pacer Pacer. Nothing of collectives: a caller turns its
// work into messages (src host, dst host, bytes, the messages it waits for).
//
// Model, in short (README.md of tools/ibex_sim has the accuracy notes):
// - A host has one NIC link. Its NIC sends CNPs first, then round-robin among QPs whose
//   pacer allows; a packet is `mtu` payload bytes plus `header_bytes`.
// - Links are store-and-forward: a packet arrives at the far end after its serialisation
//   at the link rate plus the propagation delay.
// - Switches route by shortest paths, choosing among equal next hops by a hash of the QP
//   (its 5-tuple is fixed, so a QP's packets stay on one path: ECMP).
// - PFC: a packet offered to a paused egress queue makes its ingress port send PAUSE to
//   the link's sender (after the propagation delay); RESUME follows when every queue it
//   was blamed for is below xon. CNPs travel at their own priority and are never paused.
// - A packet a full buffer drops is sent again by its QP after `rto_ns`.
// - Messages between two ranks of one host do not touch the fabric: they take
//   bytes / local_gbps plus local_latency_ns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "congestion/dcqcn/dcqcn.h"
#include "congestion/pacer.h"
#include "congestion/sim/event_queue.h"
#include "congestion/sim/routing.h"
#include "congestion/sim/topology.h"
#include "congestion/switch/congestion_point.h"

namespace ibex::sim {

inline constexpr uint32_t kNone = UINT32_MAX;

struct SimConfig {
    uint32_t mtu = 4096;         // payload bytes per packet (a coarser "segment" trades accuracy for speed)
    uint32_t header_bytes = 62;  // Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4
    uint32_t cnp_bytes = 78;     // a CNP frame: the headers above and 16 reserved bytes
    cc::CongestionPointConfig sw; // per switch; link_mbps comes from each link, burst_ns is 0
    bool dcqcn = true;
    cc::dcqcn::Params dcqcn_params; // line_rate_mbps is set per host from its link
    uint64_t rto_ns = 100'000;
    double local_gbps = 400;
    uint64_t local_latency_ns = 1000;
    uint64_t end_ns = 0;     // stop here (0: when every message is done)
    uint64_t sample_ns = 0;  // queue and rate series period (0: none)
    uint32_t rate_series_max_qps = 64; // per-QP rates are sampled only up to this many QPs
    uint64_t seed = 1;
};

struct MessageResult {
    uint32_t qp;
    uint64_t bytes;
    uint64_t ready_ns; // dependencies met and start time reached
    uint64_t done_ns;  // last byte delivered (0: not done)
};

struct QpStats {
    uint32_t src, dst; // hosts
    uint64_t delivered_bytes;
    uint64_t first_tx_ns, last_rx_ns;
    uint64_t cnps;        // CNPs that reached this QP's sender
    uint64_t retransmits; // packets sent again after a drop
    double rate_mbps;     // the pacer's rate at the end (0: unpaced)
};

struct QueueRecord {
    uint64_t t_ns;
    uint32_t sw, port;
    uint64_t queue_bytes;
};

struct RateRecord {
    uint64_t t_ns;
    uint32_t qp;
    double rate_mbps;
    uint64_t delivered_bytes;
};

// The fabric's running totals at one sample (PFC and DCQCN activity over time).
struct CounterRecord {
    uint64_t t_ns;
    uint64_t cnps, pause_frames, drops, delivered_bytes;
};

struct PortStats {
    uint32_t sw, port;
    uint32_t peer_node; // node at the far end
    cc::EgressCounters c;
};

struct RunStats {
    uint64_t events = 0;
    uint64_t sim_ns = 0;
    uint64_t packets = 0;
    uint64_t cnps = 0;        // CNPs sent by notification points
    uint64_t pause_frames = 0;
    uint64_t drops = 0;
    uint64_t messages_done = 0;
    bool all_done = false;
};

class Simulator {
public:
    // `routing` built from the topology (Routing::build checks it).
    Simulator(const Routing &routing, const SimConfig &cfg);
    ~Simulator();

    uint32_t hosts() const;
    // A QP from host src to host dst: one DCQCN flow, one ECMP path, messages in order.
    uint32_t add_qp(uint32_t src, uint32_t dst);
    // A message on `qp` that starts once every message in `deps` is done and `start_ns`
    // has come. Deps must name messages added earlier.
    uint32_t add_message(uint32_t qp, uint64_t bytes, std::span<const uint32_t> deps = {}, uint64_t start_ns = 0);
    // Message `m` also waits for `dep` (added earlier or later, before run()).
    void add_dependency(uint32_t m, uint32_t dep);
    size_t messages() const;

    // Runs to the end; `progress` (may be empty) is called about every 2^20 events.
    using Progress = std::function<void(const RunStats &, uint64_t delivered, uint64_t total)>;
    RunStats run(const Progress &progress = {});

    const MessageResult result(uint32_t m) const;
    QpStats qp_stats(uint32_t qp) const;
    uint32_t qps() const;
    const cc::dcqcn::Dcqcn *dcqcn(uint32_t qp) const;
    std::vector<PortStats> port_stats() const;
    const cc::CongestionPoint &switch_point(uint32_t sw) const;
    uint32_t switches() const;
    // The switch and egress port that face `host` (its ToR's downlink).
    std::pair<uint32_t, uint32_t> host_port(uint32_t host) const;
    // Pause frames a switch sent on the link into port `port`.
    uint64_t pauses_sent(uint32_t sw, uint32_t port) const;
    uint64_t cnps_sent(uint32_t host) const;
    const std::vector<QueueRecord> &queue_series() const { return queue_series_; }
    const std::vector<RateRecord> &rate_series() const { return rate_series_; }
    const std::vector<CounterRecord> &counter_series() const { return counter_series_; }
    const Routing &routing() const { return routing_; }

    // Packet-level hook for tests: called for every data packet a host receives (qp, ce)
    // and every CNP its notification point decides to send.
    std::function<void(uint64_t now, uint32_t qp, bool ce, bool cnp)> on_receive;
    // Every packet a switch's congestion point is offered (before its decision), and every
    // one it sends (with its CE decision): a trace another switch can be driven with.
    std::function<void(uint64_t now, uint32_t sw, uint32_t egress, const cc::PacketMeta &)> on_offer;
    std::function<void(uint64_t now, uint32_t sw, uint32_t egress, const cc::Departure &)> on_depart;

private:
    struct Link;
    struct Packet;
    struct Qp;
    struct Host;
    struct Switch;
    struct Message;

    void dispatch(const Event &e);
    // hosts (simulator.cpp)
    void nic_kick(uint32_t h, uint64_t now);
    void nic_send(uint32_t h, uint64_t now);
    bool send_from_qp(Host &host, uint32_t q, uint64_t now);
    void transmit(uint32_t pkt, uint32_t link, uint64_t now);
    void deliver(uint32_t pkt, uint64_t now);
    void release(uint32_t m, uint64_t now);
    void complete(uint32_t m, uint64_t now);
    void qp_activate(uint32_t q, uint64_t now);
    void rp_apply(uint32_t q, const cc::Actions &a, uint64_t now);
    void rp_wake(uint32_t q, uint64_t now);
    // switches (switching.cpp)
    void arrive_at_switch(uint32_t pkt, uint64_t now);
    void port_kick(uint32_t gport, uint64_t now);
    void port_service(uint32_t gport, uint64_t now);
    void blame(uint32_t sw, uint32_t egress, uint32_t ingress, uint64_t now);
    void pfc_frame(uint32_t link, bool pause, uint64_t now);
    void link_resumed(uint32_t link, uint64_t now);
    void sample(uint64_t now);

    void release_when_due(uint32_t m, uint64_t now);
    uint64_t serialise(uint32_t link, uint32_t bytes) const;
    uint32_t new_packet();
    void free_packet(uint32_t p);

    SimConfig cfg_;
    Routing routing_;
    EventQueue events_;
    std::vector<Link> link_;
    std::vector<Packet> pkt_;
    std::vector<uint32_t> free_pkt_;
    std::vector<Qp> qp_;
    std::vector<uint32_t> path_; // QPs' forward and reverse paths, as link ids
    std::vector<Host> host_;
    std::vector<Switch> sw_;
    std::vector<uint32_t> node_index_; // node -> index into host_ or sw_
    std::vector<uint32_t> gport_sw_, gport_port_; // global port -> (switch, port)
    std::vector<Message> msg_;
    std::vector<std::pair<uint32_t, uint32_t>> dep_pairs_; // (dep, dependent) as added
    std::vector<uint32_t> dependents_off_, dependents_;    // CSR, built by run()
    std::vector<QueueRecord> queue_series_;
    std::vector<RateRecord> rate_series_;
    std::vector<CounterRecord> counter_series_;
    std::vector<uint64_t> last_sampled_queue_;
    RunStats stats_;
    uint64_t delivered_total_ = 0, bytes_total_ = 0;
    uint64_t remaining_ = 0;
    bool in_service_ = false;
};

} // namespace ibex::sim

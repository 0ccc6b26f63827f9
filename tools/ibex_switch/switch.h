// ibex_switch: an output-queued software switch for soft RoCEv2 endpoints. Port i stands
// for endpoint i: endpoints address a peer j as port j's address, the switch takes the
// packet's destination port from the address it arrived on and its ingress port from
// its source, queues it on the destination's egress queue (shared buffer, RED/ECN
// marking, tail drop), and sends it from port i's address to endpoint j at the egress
// port's shaped link rate, recomputing the ICRC for the rewritten addresses. memif ports
// (transport/soft/dpdk/memif_fabric.h) instead forward whole frames by destination IP, addresses unchanged.
// See README.md for the design and its limits.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "congestion/pacer.h"
#include "congestion/red.h"
#include "transport/soft/port.h"

namespace ibex::sw {

struct SwitchConfig {
    double link_mbps = 2000;           // every egress port's rate (RoCE transport bytes)
    uint64_t buffer_bytes = 2u << 20;  // all egress queues together; tail drop beyond
    // Of the buffer, each port keeps this much for itself; the rest is shared. Without a
    // reserve one congested port fills the whole buffer and the switch drops the ACKs and
    // CNPs heading the other way, which cuts DCQCN's feedback exactly when it is needed.
    uint64_t reserve_bytes = 32u << 10;
    bool ecn = true;                   // RED/ECN marking on egress queues
    cc::RedParams red;
    bool pause = false; // PFC-style: stop taking packets for a port above xoff, resume below xon
    uint64_t xoff_bytes = 1u << 20;
    uint64_t xon_bytes = 512u << 10;
    // How far a late egress port may catch up at once: a software switch thread is not
    // always scheduled when a departure is due, and without catch-up the port's rate
    // would fall with every late wake-up (the queue then grows for want of CPU, not link).
    uint64_t burst_ns = 1'000'000;
    uint64_t sample_ns = 1'000'000; // queue/counter sampling period for the time series
    // With a port that has no wake-up descriptor (memif has no rx interrupts), keep polling
    // this long after a packet before sleeping; such a port is otherwise looked at only
    // once per sleep.
    uint64_t spin_ns = 200'000;
    // Longest sleep while such a port is open: a frame waits at most this long.
    uint64_t idle_poll_ns = 50'000;
    uint64_t seed = 1;
};

struct PortCounters {
    uint64_t rx_packets = 0, rx_bytes = 0;
    uint64_t tx_packets = 0, tx_bytes = 0;
    uint64_t marked = 0;    // CE set by this egress queue
    uint64_t not_ect = 0;   // sent above Kmin but not ECN-capable, so never marked
    uint64_t dropped = 0;   // tail drops at this egress queue (buffer full)
    uint64_t tx_errors = 0; // the port could not send
    uint64_t unknown_src = 0; // arrived from an address that is no endpoint
    uint64_t icrc_errors = 0; // arrived for this port with a bad ICRC (dropped)
    uint64_t pauses = 0;    // xoff events
    uint64_t queue_bytes = 0;
    uint64_t max_queue_bytes = 0;
};

// One sample of one egress port: cumulative counters, the queue at that moment, and the
// bytes sent per ingress port (for per-flow rates).
struct Sample {
    uint64_t t_ns;
    uint32_t port;
    uint64_t queue_bytes;
    uint64_t tx_bytes;
    uint64_t marked;
    uint64_t dropped;
    std::vector<uint64_t> from; // tx bytes by ingress port
};

class Switch {
public:
    explicit Switch(const SwitchConfig &cfg);
    // Port i: its I/O and the endpoint attached to it.
    void add_port(std::unique_ptr<soft::Port> io, const soft::NetAddr &endpoint);
    size_t ports() const { return ports_.size(); }
    soft::NetAddr port_addr(size_t i) const { return ports_[i].io->local(); }

    // One pass at time `now`: receive, enqueue, transmit what the shapers allow, sample.
    // Returns true if it moved any packet.
    bool poll(uint64_t now);
    // The earliest time a queued packet may leave (0: queues empty).
    uint64_t next_departure() const;
    // Runs poll() until `stop` is set or `duration_ns` passes (0: no limit), sleeping in
    // ppoll between departures.
    void run(const std::atomic<bool> &stop, uint64_t duration_ns);

    const PortCounters &counters(size_t port) const { return ports_[port].c; }
    uint64_t flow_bytes(size_t ingress, size_t egress) const { return ports_[egress].from[ingress]; }
    const std::vector<Sample> &samples() const { return samples_; }
    uint64_t buffer_used() const { return used_; }
    // The most one egress queue can hold: its reserve and the whole shared pool.
    uint64_t port_limit() const { return shared_size() + cfg_.reserve_bytes; }
    // Time the switch thread was not running when it should have: the sum of the gaps
    // between polls beyond 2 ms (a software switch descheduled by its host; its links
    // stop while it is).
    uint64_t stalled_ns() const { return stalled_ns_; }
    static uint64_t now_ns();

    bool write_csv(const std::string &path, std::string &err) const;
    std::string summary() const;

private:
    struct Packet {
        uint32_t slot;
        uint32_t len;
        uint16_t ingress;
        uint8_t tos;
    };
    struct Port {
        std::unique_ptr<soft::Port> io;
        soft::NetAddr endpoint;
        std::deque<Packet> queue;
        cc::Pacer shaper;
        PortCounters c;
        std::vector<uint64_t> from;
        bool paused = false;
    };

    int ingress_of(const soft::NetAddr &src) const;
    uint64_t shared_size() const;
    bool admit(const Port &out, uint32_t len) const;
    void enqueue(size_t egress, size_t ingress, const soft::RxPacket &f);
    bool transmit(size_t egress, uint64_t now);
    void sample(uint64_t now);

    SwitchConfig cfg_;
    cc::RedMarker red_;
    std::vector<Port> ports_;
    // Packet buffers, allocated as the queues first need them (up to max_slots_) and
    // reused after: the memory follows the deepest queue seen, not the configured buffer.
    std::vector<std::unique_ptr<uint8_t[]>> slots_;
    std::vector<uint32_t> free_slots_;
    size_t max_slots_ = 0;
    uint64_t used_ = 0;
    uint64_t shared_used_ = 0; // sum over ports of what their queue holds beyond the reserve
    uint64_t start_ns_ = 0;
    uint64_t next_sample_ = 0;
    uint64_t last_poll_ = 0;
    uint64_t stalled_ns_ = 0;
    std::vector<Sample> samples_;
};

} // namespace ibex::sw

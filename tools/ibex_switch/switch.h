// ibex_switch: an output-queued software switch for soft RoCEv2 endpoints. Port i stands
// for endpoint i: endpoints address a peer j as port j's address, the switch takes the
// packet's destination port from the address it arrived on and its ingress port from
// its source, queues it on the destination's egress queue (the congestion point of
// congestion/switch/: shared buffer, RED/ECN marking, tail drop), and sends it from port i's address to endpoint j at the egress
// port's shaped link rate, recomputing the ICRC for the rewritten addresses. memif ports
// (transport/soft/dpdk/memif_fabric.h) instead forward whole frames by destination IP, addresses unchanged.
// See README.md for the design and its limits.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "congestion/switch/congestion_point.h"
#include "congestion/switch/queue_series.h"
#include "transport/soft/port.h"

namespace ibex::sw {

// The congestion point's settings (congestion/switch/congestion_point.h) and the switch
// thread's own.
struct SwitchConfig : cc::CongestionPointConfig {
    uint64_t sample_ns = 1'000'000; // queue/counter sampling period for the time series
    // With a port that has no wake-up descriptor (memif has no rx interrupts), keep polling
    // this long after a packet before sleeping; such a port is otherwise looked at only
    // once per sleep.
    uint64_t spin_ns = 200'000;
    // Longest sleep while such a port is open: a frame waits at most this long.
    uint64_t idle_poll_ns = 50'000;
};

// A port's counters: its egress queue's (tx, marks, drops, pauses, queue depth) and what
// its I/O received.
struct PortCounters : cc::EgressCounters {
    uint64_t rx_packets = 0, rx_bytes = 0;
    uint64_t unknown_src = 0; // arrived from an address that is no endpoint
    uint64_t icrc_errors = 0; // arrived for this port with a bad ICRC (dropped)
};

// One sample of one egress port: cumulative counters, the queue at that moment, and the
// bytes sent per ingress port (for per-flow rates).
using Sample = cc::QueueSample;

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
    uint64_t next_departure() const { return cp_.next_departure(); }
    // Runs poll() until `stop` is set or `duration_ns` passes (0: no limit), sleeping in
    // ppoll between departures.
    void run(const std::atomic<bool> &stop, uint64_t duration_ns);

    PortCounters counters(size_t port) const;
    uint64_t flow_bytes(size_t ingress, size_t egress) const { return cp_.sent_by_ingress(egress)[ingress]; }
    const std::vector<Sample> &samples() const { return series_.samples(); }
    uint64_t buffer_used() const { return cp_.buffer_used(); }
    // The most one egress queue can hold: its reserve and the whole shared pool.
    uint64_t port_limit() const { return cp_.port_limit(); }
    // Time the switch thread was not running when it should have: the sum of the gaps
    // between polls beyond 2 ms (a software switch descheduled by its host; its links
    // stop while it is).
    uint64_t stalled_ns() const { return stalled_ns_; }
    static uint64_t now_ns();

    bool write_csv(const std::string &path, std::string &err) const;
    std::string summary() const;

private:
    // What the congestion point does not see: the port's I/O and what it received.
    struct Port {
        std::unique_ptr<soft::Port> io;
        soft::NetAddr endpoint;
        uint64_t rx_packets = 0, rx_bytes = 0;
        uint64_t unknown_src = 0;
        uint64_t icrc_errors = 0;
    };
    // A queued packet's bytes; the congestion point holds its slot number.
    struct Slot {
        std::unique_ptr<uint8_t[]> bytes;
        uint8_t tos = 0;
    };

    int ingress_of(const soft::NetAddr &src) const;
    void enqueue(uint64_t now, size_t egress, size_t ingress, const soft::RxPacket &f);
    bool transmit(size_t egress, uint64_t now);

    SwitchConfig cfg_;
    cc::CongestionPoint cp_;
    cc::QueueSeries series_;
    std::vector<Port> ports_;
    roce::IcrcIpIdShift icrc_ip_id_; // ingress ICRCs made for a GSO segment's IP ID
    // Packet buffers, allocated as the queues first need them (up to max_slots_) and
    // reused after: the memory follows the deepest queue seen, not the configured buffer.
    std::vector<Slot> slots_;
    std::vector<uint32_t> free_slots_;
    size_t max_slots_ = 0;
    uint64_t last_poll_ = 0;
    uint64_t stalled_ns_ = 0;
};

} // namespace ibex::sw

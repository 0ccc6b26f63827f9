// The congestion point of an output-queued switch: one FIFO egress queue per port over a
// shared buffer with a per-port reserve (shared_buffer.h), each queue shaped to a link
// rate, RED/ECN marking (congestion/red.h), tail drop when the buffer is full, and
// PFC-style pause thresholds, with the counters of each egress port. Pure, like the rest
// of congestion/: the caller passes the time and offers packets as handles with their
// metadata; the bytes stay with the caller. ibex_switch runs it on real packets, a fabric
// simulator can run it on virtual ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "congestion/pacer.h"
#include "congestion/red.h"
#include "congestion/switch/shared_buffer.h"

namespace ibex::cc {

// Which queue length RED judges a packet by.
enum class MarkAt : uint8_t {
    // The bytes still queued behind the departing packet: the mark reaches the receiver
    // without first waiting through the queue it reports (faster feedback; marking on
    // enqueue made ibex_switch's DCQCN loop as slow as the queue was long, and it
    // oscillated).
    kDequeue,
    // The bytes queued ahead of the arriving packet, as many hardware switches do.
    kEnqueue,
};

struct CongestionPointConfig {
    double link_mbps = 2000;           // every egress port's rate (bytes as the caller counts them)
    uint64_t buffer_bytes = 2u << 20;  // all egress queues together; tail drop beyond
    uint64_t reserve_bytes = 32u << 10; // of the buffer, kept by each port (shared_buffer.h)
    bool ecn = true;                   // RED/ECN marking on egress queues
    RedParams red;
    MarkAt mark_at = MarkAt::kDequeue;
    bool pause = false; // PFC-style: stop taking packets for a port above xoff, resume below xon
    uint64_t xoff_bytes = 1u << 20;
    uint64_t xon_bytes = 512u << 10;
    // How far a late egress port may catch up at once: a software switch thread is not
    // always scheduled when a departure is due, and without catch-up the port's rate
    // would fall with every late wake-up (the queue then grows for want of CPU, not link).
    uint64_t burst_ns = 1'000'000;
    uint64_t seed = 1; // of the marking decisions, so a run is repeatable
};

// A packet as the congestion point sees it.
struct PacketMeta {
    uint32_t handle = 0; // the caller's name for the packet (ibex_switch: its buffer slot)
    uint32_t bytes = 0;
    uint16_t ingress = 0;
    bool ect = false; // ECN-capable transport: may be marked CE
};

struct Admission {
    bool accepted = false; // false: tail-dropped (and counted)
    bool ce = false;       // marked on arrival (MarkAt::kEnqueue)
    bool xoff = false;     // this packet took the queue above xoff: the port pauses now
};

struct Departure {
    PacketMeta packet;
    bool ce = false;         // leaves with CE set: this point marked it
    uint64_t sojourn_ns = 0; // how long it was queued
};

struct EgressCounters {
    uint64_t tx_packets = 0, tx_bytes = 0;
    uint64_t marked = 0;    // CE set by this egress queue
    uint64_t not_ect = 0;   // judged above Kmin but not ECN-capable, so never marked
    uint64_t dropped = 0;   // tail drops at this egress queue (and drops the caller reported)
    uint64_t tx_errors = 0; // departed, but the link could not carry it (not_sent())
    uint64_t pauses = 0;    // xoff events
    uint64_t queue_bytes = 0;
    uint64_t max_queue_bytes = 0;
};

class CongestionPoint {
public:
    explicit CongestionPoint(const CongestionPointConfig &cfg);

    // Adds an egress port (and an ingress of that number) and returns its index; its
    // shaper runs at `link_mbps` (0: the config's link_mbps, as for every port of
    // ibex_switch; a simulated fabric mixes host and uplink rates).
    size_t add_port(double link_mbps = 0);
    size_t ports() const { return ports_.size(); }

    // Whether the buffer has room for `bytes` more towards `egress`.
    bool admits(size_t egress, uint32_t bytes) const;
    // A packet arrives for `egress` at `now`: queued, or tail-dropped when the buffer has
    // no room for it. A paused port still takes what it is offered (the headroom for
    // packets already on their way when xoff triggers).
    Admission enqueue(uint64_t now, size_t egress, const PacketMeta &p);
    // A packet for `egress` that the caller dropped before offering it (it had nowhere to
    // keep its bytes): counted with the tail drops.
    void count_drop(size_t egress) { ++ports_[egress].c.dropped; }

    // The packet that leaves `egress` at `now`, if one waits and the port's shaper lets
    // it go; counted as sent. Call until it returns nothing: that call also lifts a pause
    // once the queue has drained below xon.
    std::optional<Departure> dequeue(uint64_t now, size_t egress);
    // A departed packet the link could not carry: counted as a tx error, not as sent.
    void not_sent(size_t egress, const Departure &d);
    // The earliest time a queued packet may leave (0: queues empty).
    uint64_t next_departure() const;
    // The same for one egress port: a simulator serves each port at exactly that time.
    uint64_t next_departure(size_t egress) const;
    // Above xoff and not yet below xon: take no packets for this port.
    bool paused(size_t egress) const { return ports_[egress].paused; }

    const EgressCounters &counters(size_t egress) const { return ports_[egress].c; }
    // Bytes sent by `egress` that came in at each ingress port (per-flow rates).
    const std::vector<uint64_t> &sent_by_ingress(size_t egress) const { return ports_[egress].from; }
    uint64_t buffer_used() const { return buffer_.used(); }
    // The most one egress queue can hold: its reserve and the whole shared pool.
    uint64_t port_limit() const { return buffer_.port_limit(); }
    const CongestionPointConfig &config() const { return cfg_; }

private:
    struct Queued {
        PacketMeta packet;
        uint64_t enqueued_ns;
        bool ce;
    };
    struct Port {
        std::deque<Queued> queue;
        Pacer shaper;
        EgressCounters c;
        std::vector<uint64_t> from;
        bool paused = false;
    };

    // RED's decision for a packet judged by `queue_bytes`, counted at `port`.
    bool mark(Port &port, bool ect, uint64_t queue_bytes);

    CongestionPointConfig cfg_;
    RedMarker red_;
    SharedBuffer buffer_;
    std::vector<Port> ports_;
};

} // namespace ibex::cc

// The simulator's per-object state, shared by simulator.cpp (hosts, QPs, messages) and
// switching.cpp (switches, PFC). Small PODs in flat vectors, named by index; a packet is
// a slot in a free-listed pool, so a run allocates nothing per packet.
#pragma once

#include "congestion/sim/simulator.h"

namespace ibex::sim {

struct Simulator::Link {
    uint32_t from, to;           // nodes
    uint32_t from_port, to_port;
    double ns_per_byte;
    uint64_t delay_ns;
    bool paused = false;         // the far end sent PAUSE: the sender holds its data
    uint64_t pauses_received = 0;
};

enum PacketFlags : uint8_t { kCe = 1, kCnp = 2 };

struct Simulator::Packet {
    uint32_t qp;
    uint32_t msg;      // data: the message it belongs to
    uint32_t payload;  // data bytes it carries
    uint32_t wire;     // bytes on the wire
    uint32_t next;     // in a QP's resend list or a host's CNP list
    uint32_t link;     // the directed link it is on or queued for
    uint16_t hop;      // index of the link it is on, in its path
    uint8_t flags;
};

struct Simulator::Qp {
    uint32_t src, dst;         // hosts
    uint32_t path, path_len;   // data: offsets into path_
    uint32_t rpath, rpath_len; // CNPs back to the sender
    std::unique_ptr<cc::dcqcn::Dcqcn> cc;
    cc::Pacer pacer;
    uint32_t head = kNone, tail = kNone; // released messages, in order (Message::next)
    uint64_t head_sent = 0;              // bytes of the head message already sent
    uint32_t resend_head = kNone, resend_tail = kNone; // dropped packets to send again
    uint64_t wake_ns = 0;                // a kRpWake is pending for this time
    bool active = false;                 // in its host's list of QPs with work
    uint64_t delivered = 0, first_tx = 0, last_rx = 0, cnps = 0, retransmits = 0;
    bool has_work() const { return head != kNone || resend_head != kNone; }
};

struct Simulator::Host {
    uint32_t node;
    uint32_t uplink;            // directed link out of the host
    std::vector<uint32_t> active; // QPs with work
    uint32_t rr = 0;
    uint64_t busy_until = 0;    // the NIC serialises a packet until then
    uint64_t send_at = 0;       // a kNicSend is pending for this time (0: none)
    uint32_t cnp_head = kNone, cnp_tail = kNone;
    uint64_t cnps_sent = 0;
};

struct Simulator::Switch {
    std::unique_ptr<cc::CongestionPoint> cp;
    uint32_t node;
    uint32_t first_gport;
    struct Port {
        uint32_t out_link, in_link;
        bool scheduled = false; // a kPortService is pending
        bool was_paused = false; // the congestion point's xoff state at the last look
        uint32_t pause_refs = 0; // egress queues that blame this ingress
        bool pausing = false;    // a PAUSE is in force on in_link
        uint64_t pauses_sent = 0;
        std::vector<uint32_t> blamed; // as egress: ingress ports told to pause for it
    };
    std::vector<Port> ports;
};

struct Simulator::Message {
    uint32_t qp;
    uint32_t pending;  // dependencies not yet done
    uint32_t next = kNone;
    uint64_t bytes;
    uint64_t delivered = 0;
    uint64_t start_ns;
    uint64_t ready_ns = 0, done_ns = 0;
};

} // namespace ibex::sim

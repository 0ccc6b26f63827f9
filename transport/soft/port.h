// The frame-I/O interface of the soft transport: what the RC engine and ibex_switch need
// from a packet I/O path (kernel UDP socket, DPDK ethdev, or a test double). The engine
// hands over RoCEv2 transport bytes (BTH .. ICRC) in pieces; the port adds whatever lies
// below (UDP/IP for the socket, Ethernet/IP/UDP for DPDK). A port in whole-frame mode
// (whole_frames()) carries Ethernet frames as they are instead (ibex_switch's memif ports).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <sys/uio.h>

#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/icrc_ip_id.h"

namespace ibex::soft {

// IPv4 address and UDP port, host order.
struct NetAddr {
    uint32_t ip = 0;
    uint16_t port = 0;
    bool operator==(const NetAddr &) const = default;
};

inline constexpr int kMaxTxPieces = 20; // header + up to 16 payload SGE pieces + trailer
inline constexpr size_t kMaxTxBatch = 64; // packets the engine hands to send() at most

struct TxPacket {
    NetAddr dst;
    uint32_t len = 0;     // sum of the pieces
    uint16_t npieces = 0;
    uint8_t tos = 0;      // DSCP << 2 | ECN
    int8_t pcp = -1;      // the QP's service level, the VLAN priority of a tagged frame; -1: none set
    // The last 4 bytes of the last piece are the ICRC's place, not yet filled: a port that
    // fills_icrc() computes it (IP ID 0, DF, its own address and port as the source) while
    // it copies the packet, and never writes into the pieces.
    bool icrc_pending = false;
    iovec pieces[kMaxTxPieces];
};

struct RxPacket {
    const uint8_t *data = nullptr; // BTH first, ICRC last (whole frames: the Ethernet header first)
    uint32_t len = 0;
    NetAddr src;
    NetAddr dst;
    uint16_t ip_id = 0;
    uint16_t ip_frag = 0x4000;
    uint8_t tos = 0;
    // The port could not see the IP header (a socket): ip_id is its place in the datagram
    // it came in, the ID it had if it left in the same GSO train, and the ICRC check may
    // accept any ID a train's segment can carry (kGsoIpIds).
    bool ip_id_guessed = false;
};

// A UDP GSO train's segments carry IP IDs 0, 1, ... up to this (the kernel cuts at most
// 128 segments from one datagram).
inline constexpr unsigned kGsoIpIds = 128;

// The IP/UDP fields of a received packet that its ICRC covers.
inline roce::IcrcIpv4Fields rx_icrc_fields(const RxPacket &pkt) {
    roce::IcrcIpv4Fields f;
    f.src_ip = pkt.src.ip;
    f.src_port = pkt.src.port;
    f.dst_ip = pkt.dst.ip;
    f.dst_port = pkt.dst.port;
    f.ip_id = pkt.ip_id;
    f.frag = pkt.ip_frag;
    return f;
}

// The ICRC of a received packet's first transport_len bytes (BTH .. pad), with the
// IP/UDP fields it arrived with.
inline uint32_t rx_icrc(const RxPacket &pkt, size_t transport_len) {
    const iovec whole{const_cast<uint8_t *>(pkt.data), transport_len};
    return roce::icrc_ipv4(rx_icrc_fields(pkt), std::span<const iovec>(&whole, 1), transport_len);
}

// True if `icrc`, the one a received packet carries, is `computed` (its ICRC for the IP ID
// it arrived with), or, where the port only guessed that ID, its ICRC for another ID a GSO
// train's segment can carry: a train cut and merged again on the way.
inline bool icrc_matches(const RxPacket &pkt, uint32_t computed, uint32_t icrc, size_t transport_len,
                         roce::IcrcIpIdShift &shift) {
    return computed == icrc || (pkt.ip_id_guessed && shift.find(computed ^ icrc, transport_len, kGsoIpIds) != 0);
}

class Port {
public:
    virtual ~Port() = default;
    virtual NetAddr local() const = 0;
    // Largest path MTU (IB enum 1..5) this port can carry.
    virtual uint8_t max_mtu() const = 0;
    // Transmits the packets; the pieces need to stay valid only until the call returns.
    // Packets the path cannot take are dropped and counted, as a wire would.
    virtual void send(std::span<const TxPacket> pkts) = 0;
    // Fills `out` with received packets; their bytes stay valid until the next recv().
    virtual int recv(std::span<RxPacket> out) = 0;
    // A descriptor that becomes readable when packets arrive (-1 if the port has none).
    virtual int wait_fd() const = 0;
    virtual uint64_t tx_dropped() const { return 0; }
    // Packets the engine gathers before it calls send(), at most kMaxTxBatch: a port that
    // sends runs of them as one train wants long runs.
    virtual size_t tx_batch() const { return 32; }
    // Segmentation offload at work (ibex_counters_t::tx_gso_trains, rx_gro_trains).
    virtual uint64_t tx_gso_trains() const { return 0; }
    virtual uint64_t rx_gro_trains() const { return 0; }
    // send() takes packets with icrc_pending (see TxPacket): a port that copies every
    // payload byte anyway computes the ICRC on the way, and the engine reads it once less.
    virtual bool fills_icrc() const { return false; }
    // Bytes the path can hold for this port before it drops (0: no known limit).
    virtual size_t rx_buffer_bytes() const { return 0; }
    // ibex_device_attr_t::efficient_msg_bytes: the message length from which what a message
    // costs beyond its packets stays small. Where every packet is a frame of its own (the
    // dpdk port, or udp without GSO), that is an ACK and a completion per message: about
    // one packet's worth, a sixteenth of a 64 KiB message at a 4 KiB MTU.
    virtual size_t efficient_message_bytes() const { return size_t(64) << 10; }

    // Hooks with do-nothing defaults (the udp port needs none of them); called with the
    // context lock held unless noted.
    // Registered memory, which send() may then get as payload pieces: a port that
    // transmits without copying (dpdk) attaches it to its buffers.
    virtual void memory_registered(const void * /*addr*/, size_t /*len*/) {}
    virtual void memory_deregistered(const void * /*addr*/, size_t /*len*/) {}
    // A QP was connected to `peer`: a port that resolves link addresses itself can ask
    // before the first packet.
    virtual void peer_added(NetAddr /*peer*/) {}
    // The progress thread is about to block on wait_fd(): arm what makes it readable (rx
    // interrupts, a timer). False: packets are already waiting, do not block.
    virtual bool arm_wait() { return true; }
    // The wait on wait_fd() ended (lock not held).
    virtual void wait_done() {}

    // Whole-frame mode: recv() gives and send() takes whole Ethernet frames that keep their
    // IP addresses end to end, as a router forwards them; RxPacket::src/dst are the frame's
    // IP addresses. send() writes only what a router changes: the Ethernet addresses (the
    // destination's as this port learned it) and the TxPacket's ECN bits into the IPv4
    // header, with its checksum. The ICRC masks both, so it stays valid.
    virtual bool whole_frames() const { return false; }

    // Sends one packet held in one buffer (a forwarder's path, not the engine's); false if
    // the port dropped it.
    bool send_one(const uint8_t *data, uint32_t len, NetAddr to, uint8_t tos) {
        TxPacket p;
        p.dst = to;
        p.len = len;
        p.tos = tos;
        p.npieces = 1;
        p.pieces[0] = {const_cast<uint8_t *>(data), len};
        const uint64_t dropped = tx_dropped();
        send(std::span<const TxPacket>(&p, 1));
        return tx_dropped() == dropped;
    }
};

} // namespace ibex::soft

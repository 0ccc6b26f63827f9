// Ethernet / 802.1Q / IPv4 / UDP framing of RoCEv2 packets and ARP, as ibex puts them on
// the wire itself below the engine's transport bytes. Pure functions over byte buffers,
// so they are tested without a device.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/soft/port.h"

namespace ibex::soft::dpdk {

struct Mac {
    uint8_t b[6] = {};
    bool operator==(const Mac &) const = default;
    bool is_zero() const { return !(b[0] | b[1] | b[2] | b[3] | b[4] | b[5]); }
};

inline constexpr Mac kBroadcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

struct L2Options {
    int vlan = -1; // -1: untagged
    int pcp = -1;  // -1: the DSCP's class selector (top three bits)
    int dscp = -1; // -1: the packet's own DSCP
};

inline size_t l2_header_len(const L2Options &o) { return o.vlan >= 0 ? 18 : 14; }
// Ethernet (+VLAN) + IPv4 + UDP in front of the BTH.
inline size_t roce_header_len(const L2Options &o) { return l2_header_len(o) + 20 + 8; }

// Writes the headers for `transport_len` bytes of RoCEv2 transport (BTH .. ICRC). IP ID
// 0 with DF set, as the ICRC the engine computed assumes; the header checksum is filled
// in; ECN comes from tos, DSCP from tos unless the options fix it. UDP checksum 0. A VLAN
// tag's priority is `pcp` (the QP's service level) where it is 0..7, else the options', else
// the DSCP's top three bits.
void write_roce_headers(uint8_t *out, const L2Options &o, const Mac &src_mac, const Mac &dst_mac, NetAddr src, NetAddr dst,
                        uint8_t tos, uint32_t transport_len, int pcp = -1);

// An ARP request (dst_mac broadcast, target MAC zero) or reply, padded to 60 bytes.
size_t write_arp(uint8_t *out, const L2Options &o, uint16_t op, const Mac &src_mac, uint32_t src_ip, const Mac &dst_mac,
                 uint32_t dst_ip);
inline constexpr size_t kArpFrameMax = 64;

// A memif peer about to disconnect says so first, and waits until this side has stopped
// polling: DPDK 22.11's memif unmaps a port's rings when its peer disconnects without
// synchronising with rx/tx bursts running on that port, so a burst caught mid-way crashes.
// The frame: broadcast, EtherType 0x88B5 (IEEE 802 local experimental), the magic "IBXL"
// and one byte of op, padded to 60 bytes. (The handshake itself: memif_session.h.)
inline constexpr uint16_t kLeaveEtherType = 0x88B5;
inline constexpr size_t kLeaveFrameLen = 60;
enum class LeaveOp : uint8_t { leaving = 1, stopped = 2 };
size_t write_leave(uint8_t *out, LeaveOp op, const Mac &src_mac);

// What a router changes in a frame it forwards: the Ethernet addresses and, where the
// frame is IPv4 (behind up to two VLAN tags, as parse_frame takes them), the ECN bits, from `tos`, with the header checksum
// recomputed. DSCP and everything the ICRC covers stay as they are.
void rewrite_for_hop(uint8_t *frame, size_t len, const Mac &src_mac, const Mac &dst_mac, uint8_t tos);

enum class FrameKind { kOther, kRoce, kArp, kLeave };

struct ParsedFrame {
    FrameKind kind = FrameKind::kOther;
    Mac src_mac;
    Mac dst_mac;
    // kRoce: transport bytes and the IP/UDP fields the ICRC covers.
    RxPacket pkt;
    // kArp
    uint16_t arp_op = 0;
    Mac arp_sender_mac;
    uint32_t arp_sender_ip = 0;
    uint32_t arp_target_ip = 0;
    // kLeave
    LeaveOp leave_op = LeaveOp::leaving;
};

// Classifies one contiguous frame. A RoCE frame needs IPv4 without options, a valid header
// checksum, no fragmentation, UDP to `roce_port`, and lengths that agree; anything else is
// kOther. VLAN tags are accepted and skipped.
ParsedFrame parse_frame(const uint8_t *p, size_t len, uint16_t roce_port);

} // namespace ibex::soft::dpdk

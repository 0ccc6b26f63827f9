#include "transport/soft/dpdk/frame.h"

#include <cstring>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_udp.h>

namespace ibex::soft::dpdk {
namespace {

// Ethernet header (with an 802.1Q tag when configured); returns bytes written.
size_t write_l2(uint8_t *out, const L2Options &o, const Mac &src, const Mac &dst, uint16_t ether_type, uint8_t tos,
                int qp_pcp) {
    auto *eth = reinterpret_cast<rte_ether_hdr *>(out);
    std::memcpy(eth->dst_addr.addr_bytes, dst.b, 6);
    std::memcpy(eth->src_addr.addr_bytes, src.b, 6);
    if (o.vlan < 0) {
        eth->ether_type = rte_cpu_to_be_16(ether_type);
        return sizeof(rte_ether_hdr);
    }
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
    auto *vlan = reinterpret_cast<rte_vlan_hdr *>(eth + 1);
    const unsigned pcp = qp_pcp >= 0 && qp_pcp <= 7 ? unsigned(qp_pcp) : o.pcp >= 0 ? unsigned(o.pcp) : unsigned(tos >> 5);
    vlan->vlan_tci = rte_cpu_to_be_16(static_cast<uint16_t>((pcp << 13) | unsigned(o.vlan)));
    vlan->eth_proto = rte_cpu_to_be_16(ether_type);
    return sizeof(rte_ether_hdr) + sizeof(rte_vlan_hdr);
}

// The EtherType behind up to two VLAN tags, and in *off where that header starts; 0 when
// a tag is cut short.
uint16_t inner_ether_type(const uint8_t *p, size_t len, size_t *off) {
    uint16_t type = rte_be_to_cpu_16(reinterpret_cast<const rte_ether_hdr *>(p)->ether_type);
    *off = sizeof(rte_ether_hdr);
    for (int tags = 0; (type == RTE_ETHER_TYPE_VLAN || type == RTE_ETHER_TYPE_QINQ) && tags < 2; ++tags) {
        if (len < *off + sizeof(rte_vlan_hdr)) return 0;
        type = rte_be_to_cpu_16(reinterpret_cast<const rte_vlan_hdr *>(p + *off)->eth_proto);
        *off += sizeof(rte_vlan_hdr);
    }
    return type;
}

} // namespace

void write_roce_headers(uint8_t *out, const L2Options &o, const Mac &src_mac, const Mac &dst_mac, NetAddr src, NetAddr dst,
                        uint8_t tos, uint32_t transport_len, int pcp) {
    if (o.dscp >= 0) tos = static_cast<uint8_t>((o.dscp << 2) | (tos & 3));
    const size_t l2 = write_l2(out, o, src_mac, dst_mac, RTE_ETHER_TYPE_IPV4, tos, pcp);
    auto *ip = reinterpret_cast<rte_ipv4_hdr *>(out + l2);
    ip->version_ihl = RTE_IPV4_VHL_DEF;
    ip->type_of_service = tos;
    ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr) + transport_len));
    ip->packet_id = 0;
    ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
    ip->time_to_live = 64;
    ip->next_proto_id = IPPROTO_UDP;
    ip->hdr_checksum = 0;
    ip->src_addr = rte_cpu_to_be_32(src.ip);
    ip->dst_addr = rte_cpu_to_be_32(dst.ip);
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    auto *udp = reinterpret_cast<rte_udp_hdr *>(ip + 1);
    udp->src_port = rte_cpu_to_be_16(src.port);
    udp->dst_port = rte_cpu_to_be_16(dst.port);
    udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(sizeof(rte_udp_hdr) + transport_len));
    udp->dgram_cksum = 0; // RoCEv2 senders may leave it zero; the ICRC protects the payload
}

size_t write_arp(uint8_t *out, const L2Options &o, uint16_t op, const Mac &src_mac, uint32_t src_ip, const Mac &dst_mac,
                 uint32_t dst_ip) {
    std::memset(out, 0, kArpFrameMax);
    const size_t l2 = write_l2(out, o, src_mac, dst_mac, RTE_ETHER_TYPE_ARP, 0, -1);
    auto *arp = reinterpret_cast<rte_arp_hdr *>(out + l2);
    arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
    arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    arp->arp_hlen = RTE_ETHER_ADDR_LEN;
    arp->arp_plen = 4;
    arp->arp_opcode = rte_cpu_to_be_16(op);
    std::memcpy(arp->arp_data.arp_sha.addr_bytes, src_mac.b, 6);
    arp->arp_data.arp_sip = rte_cpu_to_be_32(src_ip);
    if (op == RTE_ARP_OP_REPLY) std::memcpy(arp->arp_data.arp_tha.addr_bytes, dst_mac.b, 6);
    arp->arp_data.arp_tip = rte_cpu_to_be_32(dst_ip);
    const size_t len = l2 + sizeof(rte_arp_hdr);
    return len < 60 ? 60 : len; // minimum frame without FCS
}

namespace {
constexpr uint8_t kLeaveMagic[4] = {'I', 'B', 'X', 'L'};
}

size_t write_leave(uint8_t *out, LeaveOp op, const Mac &src_mac) {
    std::memset(out, 0, kLeaveFrameLen);
    auto *eth = reinterpret_cast<rte_ether_hdr *>(out);
    std::memcpy(eth->dst_addr.addr_bytes, kBroadcast.b, 6);
    std::memcpy(eth->src_addr.addr_bytes, src_mac.b, 6);
    eth->ether_type = rte_cpu_to_be_16(kLeaveEtherType);
    std::memcpy(out + sizeof *eth, kLeaveMagic, sizeof kLeaveMagic);
    out[sizeof *eth + sizeof kLeaveMagic] = static_cast<uint8_t>(op);
    return kLeaveFrameLen;
}

void rewrite_for_hop(uint8_t *frame, size_t len, const Mac &src_mac, const Mac &dst_mac, uint8_t tos) {
    if (len < sizeof(rte_ether_hdr)) return;
    auto *eth = reinterpret_cast<rte_ether_hdr *>(frame);
    std::memcpy(eth->dst_addr.addr_bytes, dst_mac.b, 6);
    std::memcpy(eth->src_addr.addr_bytes, src_mac.b, 6);
    size_t l3 = 0;
    if (inner_ether_type(frame, len, &l3) != RTE_ETHER_TYPE_IPV4 || len < l3 + sizeof(rte_ipv4_hdr)) return;
    auto *ip = reinterpret_cast<rte_ipv4_hdr *>(frame + l3);
    ip->type_of_service = static_cast<uint8_t>((ip->type_of_service & ~0x3) | (tos & 0x3));
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
}

ParsedFrame parse_frame(const uint8_t *p, size_t len, uint16_t roce_port) {
    ParsedFrame f;
    if (len < sizeof(rte_ether_hdr)) return f;
    const auto *eth = reinterpret_cast<const rte_ether_hdr *>(p);
    std::memcpy(f.dst_mac.b, eth->dst_addr.addr_bytes, 6);
    std::memcpy(f.src_mac.b, eth->src_addr.addr_bytes, 6);
    size_t off = 0;
    const uint16_t type = inner_ether_type(p, len, &off);
    if (type == kLeaveEtherType) {
        if (len < off + sizeof kLeaveMagic + 1 || std::memcmp(p + off, kLeaveMagic, sizeof kLeaveMagic) != 0) return f;
        const uint8_t op = p[off + sizeof kLeaveMagic];
        if (op != uint8_t(LeaveOp::leaving) && op != uint8_t(LeaveOp::stopped)) return f;
        f.kind = FrameKind::kLeave;
        f.leave_op = static_cast<LeaveOp>(op);
        return f;
    }
    if (type == RTE_ETHER_TYPE_ARP) {
        if (len < off + sizeof(rte_arp_hdr)) return f;
        const auto *arp = reinterpret_cast<const rte_arp_hdr *>(p + off);
        if (rte_be_to_cpu_16(arp->arp_hardware) != RTE_ARP_HRD_ETHER ||
            rte_be_to_cpu_16(arp->arp_protocol) != RTE_ETHER_TYPE_IPV4 || arp->arp_hlen != 6 || arp->arp_plen != 4)
            return f;
        f.kind = FrameKind::kArp;
        f.arp_op = rte_be_to_cpu_16(arp->arp_opcode);
        std::memcpy(f.arp_sender_mac.b, arp->arp_data.arp_sha.addr_bytes, 6);
        f.arp_sender_ip = rte_be_to_cpu_32(arp->arp_data.arp_sip);
        f.arp_target_ip = rte_be_to_cpu_32(arp->arp_data.arp_tip);
        return f;
    }
    if (type != RTE_ETHER_TYPE_IPV4 || len < off + sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr)) return f;
    const auto *ip = reinterpret_cast<const rte_ipv4_hdr *>(p + off);
    if (ip->version_ihl != RTE_IPV4_VHL_DEF || ip->next_proto_id != IPPROTO_UDP || rte_raw_cksum(ip, sizeof *ip) != 0xffff)
        return f;
    const uint16_t frag = rte_be_to_cpu_16(ip->fragment_offset);
    if (frag & (RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) return f;
    const size_t ip_len = rte_be_to_cpu_16(ip->total_length);
    if (ip_len < sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr) || off + ip_len > len) return f;
    const auto *udp = reinterpret_cast<const rte_udp_hdr *>(ip + 1);
    const size_t udp_len = rte_be_to_cpu_16(udp->dgram_len);
    if (rte_be_to_cpu_16(udp->dst_port) != roce_port || udp_len != ip_len - sizeof(rte_ipv4_hdr) || udp_len <= sizeof *udp)
        return f;
    f.kind = FrameKind::kRoce;
    f.pkt.data = reinterpret_cast<const uint8_t *>(udp + 1);
    f.pkt.len = static_cast<uint32_t>(udp_len - sizeof *udp);
    f.pkt.src = {rte_be_to_cpu_32(ip->src_addr), rte_be_to_cpu_16(udp->src_port)};
    f.pkt.dst = {rte_be_to_cpu_32(ip->dst_addr), rte_be_to_cpu_16(udp->dst_port)};
    f.pkt.ip_id = rte_be_to_cpu_16(ip->packet_id);
    f.pkt.ip_frag = frag;
    f.pkt.tos = ip->type_of_service;
    return f;
}

} // namespace ibex::soft::dpdk

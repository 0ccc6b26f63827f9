// The dpdk port's framing: headers ibex writes below the engine's transport bytes must be
// a valid Ethernet(/802.1Q)/IPv4/UDP frame whose IP fields agree with the ICRC the engine
// computed from addresses alone (checked against the ICRC recomputed from the real IP
// header bytes), carry DSCP/ECN/PCP as configured, and parse back to the same RxPacket.
// ARP frames, the neighbour table, the memif leave frame and its gate, and the rewrite a
// forwarding port makes (MACs, ECN with the checksum; the ICRC still holds) are checked
// here too; no device is needed.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "transport/soft/codec/icrc.h"
#include "transport/soft/dpdk/frame.h"
#include "transport/soft/dpdk/leave_gate.h"
#include "transport/soft/dpdk/neighbour_table.h"

using namespace ibex::soft;
using namespace ibex::soft::dpdk;

namespace {

const Mac kA{{0x02, 0, 0, 0, 0, 0x0a}};
const Mac kB{{0x02, 0, 0, 0, 0, 0x0b}};
const NetAddr kSrc{0x0a000001, 4791};
const NetAddr kDst{0x0a000002, 4791};

uint16_t be16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }

// One's-complement sum of the IPv4 header: 0xffff when its checksum is right.
uint16_t ip_sum(const uint8_t *ip) {
    uint32_t s = 0;
    for (int i = 0; i < 20; i += 2) s += be16(ip + i);
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return uint16_t(s);
}

// A frame as the engine and the port build it: headers, transport bytes, ICRC computed
// by the engine's rule (addresses and ports only).
std::vector<uint8_t> make_frame(const L2Options &o, uint8_t tos, size_t payload, int qp_pcp = -1) {
    std::vector<uint8_t> transport(12 + payload); // a BTH-sized header and payload
    for (size_t i = 0; i < transport.size(); ++i) transport[i] = uint8_t(i * 7 + 1);
    ibex::roce::IcrcIpv4Fields f;
    f.src_ip = kSrc.ip;
    f.src_port = kSrc.port;
    f.dst_ip = kDst.ip;
    f.dst_port = kDst.port;
    const iovec v{transport.data(), transport.size()};
    const uint32_t icrc = ibex::roce::icrc_ipv4(f, std::span<const iovec>(&v, 1), transport.size());
    const size_t hl = roce_header_len(o);
    std::vector<uint8_t> frame(hl + transport.size() + 4);
    write_roce_headers(frame.data(), o, kA, kB, kSrc, kDst, tos, uint32_t(transport.size() + 4), qp_pcp);
    std::memcpy(frame.data() + hl, transport.data(), transport.size());
    ibex::roce::store_icrc(frame.data() + hl + transport.size(), icrc);
    return frame;
}

} // namespace

TEST(DpdkFrame, UntaggedHeadersAreValidAndMatchTheIcrc) {
    L2Options o;
    const auto frame = make_frame(o, 0x68 | 2, 1000); // DSCP 26, ECT(0)
    ASSERT_EQ(frame.size(), 14u + 20 + 8 + 12 + 1000 + 4);
    EXPECT_EQ(0, std::memcmp(frame.data(), kB.b, 6));
    EXPECT_EQ(0, std::memcmp(frame.data() + 6, kA.b, 6));
    EXPECT_EQ(be16(frame.data() + 12), 0x0800);
    const uint8_t *ip = frame.data() + 14;
    EXPECT_EQ(ip[0], 0x45);
    EXPECT_EQ(ip[1], 0x6a) << "DSCP and ECN from the packet's tos";
    EXPECT_EQ(be16(ip + 2), frame.size() - 14);
    EXPECT_EQ(be16(ip + 4), 0) << "IP ID 0, as the ICRC assumes";
    EXPECT_EQ(be16(ip + 6), 0x4000) << "DF, no fragment";
    EXPECT_EQ(ip[9], 17);
    EXPECT_EQ(ip_sum(ip), 0xffff) << "IPv4 header checksum";
    const uint8_t *udp = ip + 20;
    EXPECT_EQ(be16(udp), 4791);
    EXPECT_EQ(be16(udp + 2), 4791);
    EXPECT_EQ(be16(udp + 4), frame.size() - 14 - 20);
    EXPECT_EQ(be16(udp + 6), 0);

    // The ICRC from the real header bytes equals the one the engine put in the frame.
    uint32_t icrc = 0;
    ASSERT_TRUE(ibex::roce::icrc_ipv4_packet(ip, frame.size() - 14 - 4, &icrc));
    EXPECT_EQ(icrc, ibex::roce::load_icrc(frame.data() + frame.size() - 4));

    const ParsedFrame f = parse_frame(frame.data(), frame.size(), 4791);
    ASSERT_EQ(f.kind, FrameKind::kRoce);
    EXPECT_EQ(f.src_mac, kA);
    EXPECT_EQ(f.dst_mac, kB);
    EXPECT_EQ(f.pkt.src, kSrc);
    EXPECT_EQ(f.pkt.dst, kDst);
    EXPECT_EQ(f.pkt.len, 12u + 1000 + 4);
    EXPECT_EQ(f.pkt.data, frame.data() + 42);
    EXPECT_EQ(f.pkt.tos, 0x6a);
    EXPECT_EQ(f.pkt.ip_id, 0);
    EXPECT_EQ(f.pkt.ip_frag, 0x4000);
    EXPECT_EQ(rx_icrc(f.pkt, f.pkt.len - 4), icrc) << "the receive path's ICRC agrees";
}

TEST(DpdkFrame, VlanPcpAndFixedDscp) {
    L2Options o;
    o.vlan = 100;
    o.dscp = 46; // fixed DSCP; ECN still from the packet
    auto frame = make_frame(o, 0x20 | 3, 64);
    EXPECT_EQ(be16(frame.data() + 12), 0x8100);
    EXPECT_EQ(be16(frame.data() + 14), (5u << 13) | 100) << "PCP from DSCP 46's class (5)";
    EXPECT_EQ(be16(frame.data() + 16), 0x0800);
    const uint8_t *ip = frame.data() + 18;
    EXPECT_EQ(ip[1], (46 << 2) | 3);
    EXPECT_EQ(ip_sum(ip), 0xffff);
    ParsedFrame f = parse_frame(frame.data(), frame.size(), 4791);
    ASSERT_EQ(f.kind, FrameKind::kRoce);
    EXPECT_EQ(f.pkt.len, 12u + 64 + 4);
    EXPECT_EQ(f.pkt.tos & 3, 3);
    uint32_t icrc = 0;
    ASSERT_TRUE(ibex::roce::icrc_ipv4_packet(ip, frame.size() - 18 - 4, &icrc));
    EXPECT_EQ(icrc, ibex::roce::load_icrc(frame.data() + frame.size() - 4)) << "TOS is masked out of the ICRC";

    o.pcp = 3;
    frame = make_frame(o, 0, 8);
    EXPECT_EQ(be16(frame.data() + 14), (3u << 13) | 100) << "explicit PCP";

    // A QP's service level (IBEX_QP_SL) is its frames' priority, over the port's.
    frame = make_frame(o, 0, 8, 6);
    EXPECT_EQ(be16(frame.data() + 14), (6u << 13) | 100) << "the QP's service level";
    frame = make_frame(o, 0, 8, 0);
    EXPECT_EQ(be16(frame.data() + 14), 100u) << "service level 0 is a level, not 'none'";
    o.vlan = -1;
    frame = make_frame(o, 0, 8, 6);
    EXPECT_EQ(be16(frame.data() + 12), 0x0800) << "no VLAN: the service level has no field to go in";
}

TEST(DpdkFrame, ParseRejectsWhatIsNotRoceForUs) {
    L2Options o;
    const auto good = make_frame(o, 2, 100);
    auto bad = good;
    bad[14 + 10] ^= 1; // IP checksum
    EXPECT_EQ(parse_frame(bad.data(), bad.size(), 4791).kind, FrameKind::kOther);
    bad = good;
    bad[14 + 6] = 0x20; // MF: a fragment
    bad[14 + 10] = bad[14 + 11] = 0;
    EXPECT_EQ(parse_frame(bad.data(), bad.size(), 4791).kind, FrameKind::kOther);
    EXPECT_EQ(parse_frame(good.data(), good.size(), 4792).kind, FrameKind::kOther) << "another UDP port";
    EXPECT_EQ(parse_frame(good.data(), good.size() - 10, 4791).kind, FrameKind::kOther) << "truncated";
    EXPECT_EQ(parse_frame(good.data(), 13, 4791).kind, FrameKind::kOther);
    // Ethernet padding after the IP datagram is fine: lengths come from the headers.
    auto padded = good;
    padded.resize(good.size() + 6, 0);
    const ParsedFrame f = parse_frame(padded.data(), padded.size(), 4791);
    ASSERT_EQ(f.kind, FrameKind::kRoce);
    EXPECT_EQ(f.pkt.len, 12u + 100 + 4);
}

TEST(DpdkFrame, ArpRequestAndReply) {
    uint8_t buf[kArpFrameMax];
    L2Options o;
    size_t len = write_arp(buf, o, 1, kA, kSrc.ip, kBroadcast, kDst.ip);
    EXPECT_EQ(len, 60u);
    ParsedFrame f = parse_frame(buf, len, 4791);
    ASSERT_EQ(f.kind, FrameKind::kArp);
    EXPECT_EQ(f.arp_op, 1);
    EXPECT_EQ(f.dst_mac, kBroadcast);
    EXPECT_EQ(f.arp_sender_mac, kA);
    EXPECT_EQ(f.arp_sender_ip, kSrc.ip);
    EXPECT_EQ(f.arp_target_ip, kDst.ip);
    o.vlan = 9;
    len = write_arp(buf, o, 2, kB, kDst.ip, kA, kSrc.ip);
    f = parse_frame(buf, len, 4791);
    ASSERT_EQ(f.kind, FrameKind::kArp) << "tagged ARP";
    EXPECT_EQ(f.arp_op, 2);
    EXPECT_EQ(f.dst_mac, kA);
    EXPECT_EQ(f.arp_sender_mac, kB);
}

TEST(DpdkFrame, NeighbourTableStaticWinsAndAsksAreRateLimited) {
    NeighbourTable t;
    EXPECT_EQ(t.find(1), nullptr);
    EXPECT_TRUE(t.should_ask(1, 1000, 500));
    EXPECT_FALSE(t.should_ask(1, 1200, 500)) << "one request per interval";
    EXPECT_TRUE(t.should_ask(1, 1600, 500));
    EXPECT_TRUE(t.learn(1, kA));
    ASSERT_NE(t.find(1), nullptr);
    EXPECT_EQ(*t.find(1), kA);
    EXPECT_FALSE(t.should_ask(1, 9000, 500)) << "resolved";
    t.add_static(2, kB);
    EXPECT_FALSE(t.learn(2, kA)) << "a static entry is never replaced by what is learned";
    EXPECT_EQ(*t.find(2), kB);
    EXPECT_TRUE(t.learn(1, kB)) << "a learned entry follows the network";
    EXPECT_EQ(*t.find(1), kB);
}

TEST(DpdkFrame, ForwardingRewritesMacsAndEcnAndKeepsTheIcrcValid) {
    for (const int vlan : {-1, 7}) {
        L2Options o;
        o.vlan = vlan;
        auto frame = make_frame(o, 0x68 | 2, 300); // DSCP 26, ECT(0)
        const size_t l2 = l2_header_len(o);
        const Mac kSwitch{{0x02, 0, 0, 0, 0, 0x5e}};
        rewrite_for_hop(frame.data(), frame.size(), kSwitch, kA, 0x3); // CE
        EXPECT_EQ(0, std::memcmp(frame.data(), kA.b, 6)) << "destination: the next hop";
        EXPECT_EQ(0, std::memcmp(frame.data() + 6, kSwitch.b, 6)) << "source: the forwarding port";
        const uint8_t *ip = frame.data() + l2;
        EXPECT_EQ(ip[1], 0x68 | 3) << "CE set, DSCP kept";
        EXPECT_EQ(ip_sum(ip), 0xffff) << "IPv4 header checksum recomputed";
        uint32_t icrc = 0;
        ASSERT_TRUE(ibex::roce::icrc_ipv4_packet(ip, frame.size() - l2 - 4, &icrc));
        EXPECT_EQ(icrc, ibex::roce::load_icrc(frame.data() + frame.size() - 4)) << "the ICRC masks TOS and checksum";
        const ParsedFrame f = parse_frame(frame.data(), frame.size(), 4791);
        ASSERT_EQ(f.kind, FrameKind::kRoce) << "still a valid RoCE frame";
        EXPECT_EQ(f.pkt.tos, 0x68 | 3);
        EXPECT_EQ(f.pkt.src, kSrc) << "addresses end to end";
        EXPECT_EQ(f.pkt.dst, kDst);
    }
    // Not IPv4 (an ARP frame): only the Ethernet addresses change.
    uint8_t arp[kArpFrameMax];
    const size_t n = write_arp(arp, L2Options{}, 1, kA, kSrc.ip, kBroadcast, kDst.ip);
    std::vector<uint8_t> before(arp, arp + n);
    rewrite_for_hop(arp, n, kB, kA, 0x3);
    EXPECT_EQ(0, std::memcmp(arp + 12, before.data() + 12, n - 12));
}

TEST(LeaveFrame, RoundTripsAndRejectsForeignFrames) {
    uint8_t buf[64];
    const Mac mac{{0x02, 0, 0, 0, 0, 7}};
    ASSERT_EQ(write_leave(buf, LeaveOp::leaving, mac), 60u);
    ParsedFrame f = parse_frame(buf, 60, 4791);
    EXPECT_EQ(f.kind, FrameKind::kLeave);
    EXPECT_EQ(f.leave_op, LeaveOp::leaving);
    EXPECT_EQ(f.src_mac, mac);
    EXPECT_EQ(f.dst_mac, kBroadcast);
    write_leave(buf, LeaveOp::stopped, mac);
    EXPECT_EQ(parse_frame(buf, 60, 4791).leave_op, LeaveOp::stopped);
    buf[14] = 'X'; // another protocol on the experimental EtherType
    EXPECT_EQ(parse_frame(buf, 60, 4791).kind, FrameKind::kOther);
    write_leave(buf, LeaveOp::stopped, mac);
    buf[18] = 9; // unknown op
    EXPECT_EQ(parse_frame(buf, 60, 4791).kind, FrameKind::kOther);
    EXPECT_EQ(parse_frame(buf, 17, 4791).kind, FrameKind::kOther) << "truncated";
}

TEST(LeaveGate, ClosedUntilTheLinkCyclesOrThePeerStays) {
    LeaveGate g;
    bool stayed = true;
    EXPECT_TRUE(g.open());
    g.peer_leaving(1000);
    EXPECT_FALSE(g.open());
    EXPECT_FALSE(g.reopens(true, 2000, &stayed)) << "still connected: the disconnect is coming";
    EXPECT_FALSE(g.reopens(false, 3000, &stayed)) << "down: no peer to poll";
    EXPECT_FALSE(g.reopens(false, 4000 + LeaveGate::kMaxQuietNs, &stayed)) << "down has no deadline";
    EXPECT_TRUE(g.reopens(true, 5000 + LeaveGate::kMaxQuietNs, &stayed)) << "a new peer connected";
    EXPECT_FALSE(stayed);
    EXPECT_TRUE(g.open());
    g.peer_leaving(0);
    EXPECT_FALSE(g.reopens(true, LeaveGate::kMaxQuietNs - 1, &stayed));
    EXPECT_TRUE(g.reopens(true, LeaveGate::kMaxQuietNs, &stayed)) << "said it leaves but stayed";
    EXPECT_TRUE(stayed);
}

TEST(LeaveGate, AnUnsentAnswerIsDueOnlyWhileTheLeaverStillWaits) {
    LeaveGate g;
    g.peer_leaving(1000); // answered at once
    EXPECT_FALSE(g.answer_due(1000));
    g.peer_leaving(0, false); // the ring had no room
    EXPECT_TRUE(g.answer_due(1));
    EXPECT_TRUE(g.answer_due(LeaveGate::kAnswerRetryNs));
    EXPECT_FALSE(g.answer_due(LeaveGate::kAnswerRetryNs + 1)) << "the leaver may have given up: touch nothing";
    EXPECT_LT(LeaveGate::kAnswerRetryNs, LeaveGate::kLeaverWaitNs);
    g.peer_leaving(10, false);
    g.answer_sent();
    EXPECT_FALSE(g.answer_due(11));
    EXPECT_FALSE(g.open()) << "answering does not reopen the port";
}

TEST(LeaveGate, PeerGoneOpensOnTheNextLinkUpWithoutADownInBetween) {
    LeaveGate g;
    bool stayed = true;
    g.peer_leaving(1000);
    EXPECT_FALSE(g.reopens(true, 2000, &stayed)) << "the leaver may still be connected";
    g.peer_gone(); // its shared memory is unmapped: a new peer holds the link
    EXPECT_TRUE(g.reopens(true, 3000, &stayed)) << "well before the 2 s limit";
    EXPECT_FALSE(stayed);
    g.peer_gone(); // open: nothing to do
    EXPECT_TRUE(g.open());
    g.peer_leaving(4000);
    g.peer_gone();
    EXPECT_FALSE(g.reopens(false, 5000, &stayed)) << "gone and no new peer yet: still nothing to poll";
    EXPECT_TRUE(g.reopens(true, 6000, &stayed));
}

// ibex_switch's memif ports (memif_fabric.h) at the port interface, in one process: two
// engine-side dpdk ports connect as memif clients; a RoCE packet from A to B's address
// waits for A's ARP request, which the fabric answers by proxy; it then comes out of B's
// fabric port as a whole Ethernet frame with its addresses, sorted by destination; sent on
// with CE, it reaches B with the mark in its IPv4 header and its ICRC still valid. A frame
// for an endpoint the fabric has not heard from, or for an address no port serves, is
// reported dropped. Both clients then close, each answered by the fabric (leave handshake).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <unistd.h>
#include <vector>

#include "transport/soft/codec/icrc.h"
#include "transport/soft/dpdk/dpdk_port.h"
#include "transport/soft/dpdk/memif_fabric.h"

using namespace ibex::soft;

namespace {

constexpr uint32_t kIpA = 0x0a480001; // 10.72.0.1
constexpr uint32_t kIpB = 0x0a480002; // 10.72.0.2
constexpr uint16_t kRoce = 4791;

std::string sock(int i) { return "/tmp/ibex-fabric-" + std::to_string(getpid()) + "-" + std::to_string(i) + ".sock"; }

std::unique_ptr<Port> open_client(const std::string &socket, const char *ip) {
    DpdkPortOptions o;
    o.device = "dpdk:memif:" + socket + ",role=client,ip=" + ip;
    ibex_status_t st;
    auto port = open_dpdk_port(o, &st);
    EXPECT_TRUE(port) << ibex_last_error();
    return port;
}

// Calls recv() on each port until `from` gives a packet (copied into *bytes) or 5 s pass;
// `resend` (if any) runs every 50 ms meanwhile, as RC would retransmit (a frame that waited
// for ARP longer than 200 ms is dropped, and the first prefault of the memif regions can
// take that long on a loaded host).
bool poll_one(Port &from, std::vector<Port *> others, RxPacket *out, std::vector<uint8_t> *bytes,
              const std::function<void()> &resend = {}) {
    RxPacket pkts[8];
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    auto next_send = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < end) {
        for (Port *p : others) p->recv(pkts);
        if (from.recv(pkts) > 0) {
            *out = pkts[0];
            bytes->assign(pkts[0].data, pkts[0].data + pkts[0].len);
            return true;
        }
        if (resend && std::chrono::steady_clock::now() >= next_send) {
            resend();
            next_send += std::chrono::milliseconds(50);
        }
        usleep(100);
    }
    return false;
}

} // namespace

TEST(MemifFabric, WholeFramesByDestinationWithProxyArpAndCeMarks) {
    for (int i = 0; i < 2; ++i) unlink(sock(i).c_str());
    ibex_status_t st;
    std::vector<std::unique_ptr<Port>> fabric = open_memif_fabric({{sock(0), kIpA}, {sock(1), kIpB}}, &st);
    ASSERT_EQ(fabric.size(), 2u) << ibex_last_error();
    EXPECT_TRUE(fabric[0]->whole_frames());
    EXPECT_EQ(fabric[1]->local(), (NetAddr{kIpB, 0}));
    EXPECT_EQ(fabric[1]->wait_fd(), -1) << "frames for a port arrive on any link: polled";
    auto a = open_client(sock(0), "10.72.0.1");
    auto b = open_client(sock(1), "10.72.0.2");
    ASSERT_TRUE(a && b);
    EXPECT_FALSE(a->whole_frames());

    // A RoCE packet from A to B, with the ICRC the engine would compute.
    std::vector<uint8_t> transport(12 + 700);
    for (size_t i = 0; i < transport.size(); ++i) transport[i] = uint8_t(i * 5 + 3);
    ibex::roce::IcrcIpv4Fields f;
    f.src_ip = kIpA;
    f.src_port = kRoce;
    f.dst_ip = kIpB;
    f.dst_port = kRoce;
    const iovec v{transport.data(), transport.size()};
    const uint32_t icrc = ibex::roce::icrc_ipv4(f, std::span<const iovec>(&v, 1), transport.size());
    transport.resize(transport.size() + 4);
    ibex::roce::store_icrc(transport.data() + transport.size() - 4, icrc);
    TxPacket p;
    p.dst = {kIpB, kRoce};
    p.len = uint32_t(transport.size());
    p.tos = 0x68 | 2; // DSCP 26, ECT(0)
    p.npieces = 1;
    p.pieces[0] = {transport.data(), transport.size()};
    auto send_a = [&] { a->send(std::span<const TxPacket>(&p, 1)); };
    send_a();

    // Out of B's fabric port (A's frame waits for the proxy ARP reply, which A's recv reads).
    RxPacket frame;
    std::vector<uint8_t> frame_bytes;
    ASSERT_TRUE(poll_one(*fabric[1], {fabric[0].get(), a.get()}, &frame, &frame_bytes, send_a));
    DpdkPortStats sa;
    ASSERT_TRUE(dpdk_port_stats(*a, &sa));
    EXPECT_GE(sa.arp_requests, 1u);
    EXPECT_GE(sa.tx_unresolved, 1u) << "the frame waited for the fabric's proxy ARP reply";
    EXPECT_EQ(frame.src, (NetAddr{kIpA, 0})) << "named by the endpoint it came from";
    EXPECT_EQ(frame.dst, (NetAddr{kIpB, kRoce}));
    EXPECT_EQ(frame.tos, 0x68 | 2);
    ASSERT_EQ(frame.len, 14 + 20 + 8 + transport.size()) << "a whole Ethernet frame";
    EXPECT_EQ(frame_bytes[12], 0x08);
    EXPECT_EQ(frame_bytes[13], 0x00);
    EXPECT_EQ(0, std::memcmp(frame_bytes.data() + 42, transport.data(), transport.size()));

    // B has said nothing yet, so the fabric knows no MAC for it: dropped, and said so.
    EXPECT_FALSE(fabric[0]->send_one(frame_bytes.data(), frame.len, {kIpB, 0}, 0x3));
    EXPECT_FALSE(fabric[0]->send_one(frame_bytes.data(), frame.len, {0x0a480009, 0}, 0x3)) << "no port serves it";
    b->peer_added({kIpA, kRoce}); // B asks for A: the fabric learns B's MAC from the request

    // Sent on with CE, from the ingress port as the switch does, once the fabric has read
    // B's request; B receives all along, which also gives the fabric room in B's ring.
    bool sent = false;
    RxPacket pkts[8], got;
    std::vector<uint8_t> got_bytes;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (got_bytes.empty() && std::chrono::steady_clock::now() < end) {
        for (auto &port : fabric) port->recv(pkts);
        if (!sent) sent = fabric[0]->send_one(frame_bytes.data(), frame.len, {kIpB, 0}, 0x3);
        if (b->recv(pkts) > 0) {
            got = pkts[0];
            got_bytes.assign(got.data, got.data + got.len);
        }
        usleep(100);
    }
    ASSERT_TRUE(sent) << "the fabric never learned B's MAC from its ARP request";
    ASSERT_FALSE(got_bytes.empty()) << "the frame never reached B";
    EXPECT_EQ(got.src, (NetAddr{kIpA, kRoce})) << "addresses end to end";
    EXPECT_EQ(got.tos, 0x68 | 3) << "CE marked, DSCP kept";
    ASSERT_EQ(got_bytes, transport);
    got.data = got_bytes.data();
    EXPECT_EQ(rx_icrc(got, got.len - 4), icrc) << "the ICRC holds with the header B received";

    // Each client closes while the fabric polls: the fabric answers its "leaving".
    std::atomic<bool> stop{false};
    std::thread poller([&] {
        RxPacket pkts[8];
        while (!stop.load()) {
            for (auto &port : fabric) port->recv(pkts);
            usleep(50);
        }
    });
    const auto t0 = std::chrono::steady_clock::now();
    a.reset();
    b.reset();
    const auto closing = std::chrono::steady_clock::now() - t0;
    stop = true;
    poller.join();
    std::printf("both clients closed in %.1f ms\n", std::chrono::duration<double, std::milli>(closing).count());
    fabric.clear();
}

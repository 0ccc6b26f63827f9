// The udp port across hosts: two network namespaces on a bridge (veth pairs), created and
// removed by the test, at netdev MTU 1500 and 9000. RDMA WRITE, READ and SEND with every
// byte checked between udp ports, which send UDP GSO trains on the veths:
//  - as the kernel leaves them (a veth takes a train whole to the peer's GRO socket): trains
//    sent and received whole on both sides, no ICRC error;
//  - with UDP segmentation off on both veths (ethtool), so the kernel cuts the trains in
//    software before the wire, as for a NIC without it: tshark on host A's veth must decode
//    genuine RoCEv2 with the expected opcodes, every captured frame's ICRC must be right for
//    the IP header it carries (IP IDs 0, 1, 2, ... within a train), and each host, which gets
//    the other's segments one by one and never sees their IP IDs, must accept them all.
//
// Needs root (namespaces, veth, a bridge); the second case also ethtool and tshark. Skips with
// the reason otherwise.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <set>
#include <unistd.h>

#include "tests/support/bridged_hosts.h"
#include "tests/support/endpoint.h"
#include "tests/support/netns_capture.h"
#include "tests/support/roce_pcap.h"
#include "tests/transport/soft/rc/checked_exchange.h"
#include "tests/transport/soft/rc/peer.h"
#include "transport/soft/engine/context.h"
#include "transport/soft/engine/objects.h"
#include "transport/soft/port.h"

using namespace ibex::test;

namespace {

bool sh(const std::string &cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }
bool on_path(const char *prog) { return sh(std::string("command -v ") + prog); }

constexpr size_t kBuf = 4 << 20;

class UdpNetns : public ::testing::TestWithParam<int> {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root: creates network namespaces, veth pairs and a bridge";
        if (!on_path("ip")) GTEST_SKIP() << "needs iproute2 (ip)";
        // This thread joins host A; the namespaces of the next test are made from here.
        home_ns_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        ASSERT_GE(home_ns_, 0);
        std::string why;
        ASSERT_TRUE(hosts_.create(2, &why, GetParam())) << why;
    }
    void TearDown() override {
        if (home_ns_ >= 0) {
            EXPECT_EQ(setns(home_ns_, CLONE_NEWNET), 0);
            ::close(home_ns_);
        }
    }

    // Host B serves a peer in a child; this thread joins host A. Returns both sides'
    // counters after a WRITE, a READ and a SEND, every byte checked.
    void exchange(ibex_counters_t *mine, ibex_counters_t *theirs, const std::function<void()> &before_stop = {}) {
        PeerConfig cfg;
        cfg.buf_bytes = kBuf;
        cfg.device = "udp:" + hosts_.ifname(1);
        cfg.netns = hosts_.ns(1);
        cfg.max_seconds = 90;
        RemotePeer peer;
        ASSERT_TRUE(peer.start(cfg)) << peer.error();
        ASSERT_TRUE(enter_netns(hosts_.ns(0)));
        Endpoint ep;
        ep.open(kBuf, ("udp:" + hosts_.ifname(0)).c_str());
        if (HasFatalFailure()) return;
        window_ = static_cast<ibex::soft::SoftQp *>(ep.qp)->ctx->config().max_inflight;
        ack_req_every_ = static_cast<ibex::soft::SoftQp *>(ep.qp)->ctx->config().ack_req_every;
        ASSERT_TRUE(peer.connect(ep.addr())) << peer.error();
        const ibex_ep_addr_t remote = peer.addr();
        IBEX_ASSERT_OK(ibex_qp_connect(ep.qp, &remote));

        // Trains of full packets with a short last one, each way.
        ExchangeSizes sizes;
        sizes.write = (1 << 20) - 3;
        sizes.read = 700000;
        sizes.send = 100000;
        sizes.timeout_ms = 30000;
        checked_exchange(ep, peer, kBuf, sizes);
        if (HasFatalFailure()) return;

        *mine = ep.counters();
        ASSERT_TRUE(peer.counters(*theirs)) << peer.error();
        if (before_stop) before_stop();
        EXPECT_EQ(peer.finish(), 0);
    }

    BridgedHosts hosts_;
    int home_ns_ = -1;
    uint32_t window_ = 0;        // host A's packets in flight per QP
    uint32_t ack_req_every_ = 0; // and how often it asks for an ACK
};

TEST_P(UdpNetns, GsoTrainsCrossWholeAndIntact) {
    ibex_counters_t a{}, b{};
    exchange(&a, &b);
    if (HasFatalFailure()) return;
    EXPECT_GT(a.tx_gso_trains, 0u) << "host A's WRITE and SEND left as GSO trains";
    EXPECT_GT(b.rx_gro_trains, 0u) << "host B received them as trains";
    EXPECT_GT(b.tx_gso_trains, 0u) << "host B's READ responses left as GSO trains";
    EXPECT_GT(a.rx_gro_trains, 0u) << "host A received them as trains";
    EXPECT_EQ(a.rx_icrc_errors, 0u);
    EXPECT_EQ(b.rx_icrc_errors, 0u);
    EXPECT_EQ(a.retransmitted_packets + b.retransmitted_packets, 0u) << "nothing was lost on a quiet veth";
    // The window holds 2 MiB at either MTU: 512 packets of 4 KiB, 2048 of 1 KiB; an ACK is
    // asked for every 64 KiB.
    if (!std::getenv("IBEX_MAX_INFLIGHT")) {
        EXPECT_EQ(window_, GetParam() >= 4200 ? 512u : 2048u);
    }
    if (!std::getenv("IBEX_ACK_REQ_EVERY")) {
        EXPECT_EQ(ack_req_every_, GetParam() >= 4200 ? 16u : 64u);
    }
}

TEST_P(UdpNetns, TrainsCutInSoftwareCarryIcrcsForTheirIpIds) {
    if (!on_path("ethtool")) GTEST_SKIP() << "needs ethtool (to turn UDP segmentation off on a veth)";
    if (!on_path("tshark")) GTEST_SKIP() << "needs tshark (to see what the wire carries)";
    for (int h = 0; h < 2; ++h) {
        const std::string off = "ethtool -K " + hosts_.ifname(h) + " tx-udp-segmentation off";
        ASSERT_TRUE(sh("ip netns exec " + hosts_.ns(h) + " " + off)) << off;
    }
    const std::string a_if = hosts_.ifname(0);
    const std::string pcap = "/tmp/ibex-udp-netns-" + std::to_string(getpid()) + ".pcap";
    NetnsCapture cap;
    std::string err;
    ASSERT_TRUE(cap.start(hosts_.ns(0), a_if, pcap, &err)) << err;
    ibex_counters_t a{}, b{};
    exchange(&a, &b, [&] { cap.stop(); });
    cap.stop();
    if (HasFatalFailure()) return;
    EXPECT_GT(a.tx_gso_trains, 0u) << "host A still sends trains; the kernel cuts them";
    EXPECT_GT(b.tx_gso_trains, 0u) << "and so does host B";
    EXPECT_EQ(b.rx_icrc_errors, 0u) << "host B took segments of A's trains for corrupt";
    EXPECT_EQ(a.rx_icrc_errors, 0u) << "host A took segments of B's trains for corrupt";

    // Every RoCEv2 frame on A's veth has the ICRC of the IP header it carries.
    std::vector<Frame> frames;
    ASSERT_TRUE(read_pcap(pcap, &frames, &err)) << err;
    unsigned numbered = 0, bad = 0;
    uint16_t top_id = 0;
    for (const Frame &f : frames) {
        if (!f.icrc_ok && bad++ < 5)
            ADD_FAILURE() << "frame " << f.number << " (IP ID " << f.ip_id << ", opcode " << unsigned(f.opcode)
                          << "): ICRC on the wire " << std::hex << f.icrc_wire << ", for its header " << f.icrc_computed;
        if (f.ip_id) ++numbered;
        top_id = std::max(top_id, f.ip_id);
        EXPECT_EQ(f.frag, 0x4000) << "frame " << f.number << ": DF set, not a fragment";
    }
    EXPECT_EQ(bad, 0u);
    // 1 MiB written, 700000 bytes read, 100000 sent: at least this many full packets.
    EXPECT_GE(frames.size(), size_t((1 << 20) - 3 + 700000 + 100000) / (GetParam() >= 4200 ? 4096 : 1024));
    EXPECT_GT(numbered, 0u) << "segments after a train's first carry IP IDs 1, 2, ...";
    EXPECT_LT(top_id, ibex::soft::kGsoIpIds) << "IP IDs stay within a train's";

    // And tshark decodes them as RoCEv2 with the opcodes of the exchange.
    std::vector<unsigned> decoded;
    EXPECT_TRUE(tshark_opcodes(pcap, &decoded));
    const std::set<unsigned> ops(decoded.begin(), decoded.end());
    unlink(pcap.c_str());
    unlink((pcap + ".log").c_str());
    EXPECT_EQ(decoded.size(), frames.size()) << "every captured frame decodes as InfiniBand";
    EXPECT_TRUE(ops.count(6) && ops.count(7) && ops.count(8)) << "RDMA WRITE FIRST/MIDDLE/LAST";
    EXPECT_TRUE(ops.count(12)) << "RDMA READ request";
    EXPECT_TRUE(ops.count(13) && ops.count(14) && ops.count(15)) << "READ response FIRST/MIDDLE/LAST";
    EXPECT_TRUE(ops.count(0) && ops.count(1) && ops.count(2)) << "SEND FIRST/MIDDLE/LAST";
}

INSTANTIATE_TEST_SUITE_P(Mtu, UdpNetns, ::testing::Values(1500, 9000));

} // namespace

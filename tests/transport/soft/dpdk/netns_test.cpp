// Two hosts made of network namespaces joined by a veth pair (MTU 3000, which XDP on veth
// needs), created and removed by the test: RDMA WRITE, READ and SEND with every byte
// checked between dpdk ports on af_xdp, on af_packet, and between a dpdk port and the udp
// port (same wire format). During the af_packet exchange tshark captures on the receiving
// veth and must decode RoCEv2 frames with the expected opcodes.
//
// Needs root (namespaces, veth, XDP); skips with the reason otherwise. tshark is optional.
#include <gtest/gtest.h>

#include <csignal>
#include <sys/socket.h>
#include <poll.h>
#include <netinet/in.h>
#include <functional>
#include <arpa/inet.h>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <sched.h>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "tests/support/endpoint.h"
#include "tests/support/netns_capture.h"
#include "tests/transport/soft/rc/checked_exchange.h"
#include "tests/transport/soft/rc/peer.h"

using namespace ibex::test;

namespace {

using Clock = std::chrono::steady_clock;

bool sh(const std::string &cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

bool on_path(const char *prog) { return sh(std::string("command -v ") + prog); }

// The two hosts: names unique to this process, removed in the destructor.
struct TwoHosts {
    std::string ns_a, ns_b, if_a, if_b, ip_a, ip_b;
    bool up = false;

    bool create(std::string *err, int mtu = 3000) {
        const std::string id = std::to_string(getpid());
        ns_a = "ibexA" + id;
        ns_b = "ibexB" + id;
        if_a = "vA" + id;
        if_b = "vB" + id;
        const int net = int(getpid() % 200) + 20;
        ip_a = "10.63." + std::to_string(net) + ".1";
        ip_b = "10.63." + std::to_string(net) + ".2";
        up = true;
        const std::vector<std::string> cmds = {
            "ip netns add " + ns_a,
            "ip netns add " + ns_b,
            "ip link add " + if_a + " mtu " + std::to_string(mtu) + " type veth peer name " + if_b + " mtu " +
                std::to_string(mtu),
            "ip link set " + if_a + " netns " + ns_a,
            "ip link set " + if_b + " netns " + ns_b,
            "ip -n " + ns_a + " addr add " + ip_a + "/24 dev " + if_a,
            "ip -n " + ns_b + " addr add " + ip_b + "/24 dev " + if_b,
            "ip -n " + ns_a + " link set " + if_a + " up",
            "ip -n " + ns_b + " link set " + if_b + " up",
            "ip -n " + ns_a + " link set lo up",
            "ip -n " + ns_b + " link set lo up",
        };
        for (const auto &c : cmds)
            if (!sh(c)) {
                *err = "failed: " + c;
                return false;
            }
        return true;
    }
    ~TwoHosts() {
        if (!up) return;
        sh("ip netns del " + ns_a);
        sh("ip netns del " + ns_b);
    }
};

bool join_netns(const std::string &name) { return ibex::test::peer_detail::join_netns(name); }

constexpr size_t kBuf = 1 << 20;

// One TCP round trip from this process (in host A) to a listener that a child runs in
// host B; empty on success, else what failed. Bounded: the child gives up after 5 s.
std::string tcp_round_trip(const std::string &ns_b, const std::string &ip_b) {
    const uint16_t port = static_cast<uint16_t>(20000 + getpid() % 20000);
    int ready[2];
    if (pipe(ready) != 0) return "pipe";
    const pid_t child = fork();
    if (child < 0) return "fork";
    if (child == 0) {
        close(ready[0]);
        if (!join_netns(ns_b)) _exit(2);
        const int l = socket(AF_INET, SOCK_STREAM, 0);
        const int one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        if (bind(l, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || listen(l, 1) != 0) _exit(3);
        [[maybe_unused]] ssize_t w = write(ready[1], "r", 1);
        pollfd p{l, POLLIN, 0};
        if (poll(&p, 1, 5000) != 1) _exit(4);
        const int c = accept(l, nullptr, nullptr);
        char buf[4];
        if (c < 0 || recv(c, buf, 4, MSG_WAITALL) != 4 || send(c, buf, 4, 0) != 4) _exit(5);
        _exit(0);
    }
    close(ready[1]);
    char r;
    std::string err;
    if (read(ready[0], &r, 1) != 1) err = "the listener in host B did not start";
    close(ready[0]);
    if (err.empty()) {
        const int s = socket(AF_INET, SOCK_STREAM, 0);
        timeval tv{5, 0};
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        inet_pton(AF_INET, ip_b.c_str(), &a.sin_addr);
        char buf[4];
        if (connect(s, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0)
            err = std::string("TCP connect to host B: ") + std::strerror(errno);
        else if (send(s, "ping", 4, 0) != 4 || recv(s, buf, 4, MSG_WAITALL) != 4 || std::memcmp(buf, "ping", 4) != 0)
            err = "TCP echo from host B failed";
        close(s);
    }
    int st = 0;
    if (err.empty()) {
        waitpid(child, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) err = "the listener in host B failed";
    } else {
        kill(child, SIGKILL);
        waitpid(child, &st, 0);
    }
    return err;
}

class DpdkNetns : public ::testing::Test {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root: creates network namespaces, veth pairs and XDP programs";
        if (!on_path("ip")) GTEST_SKIP() << "needs iproute2 (ip)";
        std::string err;
        ASSERT_TRUE(hosts_.create(&err, mtu())) << err;
    }
    virtual int mtu() const { return 3000; }

    // The peer (host B) serves `dev_b` in a child; this process joins host A and opens dev_a.
    // want_mtu: the RoCE path MTU the connected QP must have (0: not checked).
    // while_open: runs after the exchange, both ports still open.
    void run(const std::string &dev_a, const std::string &dev_b, bool capture, int want_mtu = 0,
             const std::function<void()> &while_open = {}) {
        PeerConfig cfg;
        cfg.buf_bytes = kBuf;
        cfg.device = dev_b;
        cfg.netns = hosts_.ns_b;
        cfg.max_seconds = 90;
        RemotePeer peer;
        ASSERT_TRUE(peer.start(cfg)) << peer.error() << " (device " << dev_b << ")";
        NetnsCapture cap;
        const std::string pcap = "/tmp/ibex-netns-" + std::to_string(getpid()) + ".pcap";
        std::string err;
        const bool capturing = capture && on_path("tshark") && cap.start(hosts_.ns_b, hosts_.if_b, pcap, &err);
        if (capture && !capturing) std::fprintf(stderr, "no capture: %s\n", err.empty() ? "tshark not installed" : err.c_str());
        ASSERT_TRUE(join_netns(hosts_.ns_a));
        Endpoint ep;
        ep.open(kBuf, dev_a.c_str());
        if (HasFatalFailure()) return;
        ASSERT_TRUE(peer.connect(ep.addr())) << peer.error();
        const ibex_ep_addr_t remote = peer.addr();
        IBEX_ASSERT_OK(ibex_qp_connect(ep.qp, &remote));
        if (want_mtu) {
            ibex_qp_attr_t attr = IBEX_QP_ATTR_INIT;
            IBEX_ASSERT_OK(ibex_query_qp(ep.qp, &attr));
            EXPECT_EQ(ibex_mtu_to_bytes(attr.path_mtu), want_mtu) << "RoCE MTU at netdev MTU " << mtu();
        }
        checked_exchange(ep, peer, kBuf);
        peer_counters_ = [&](ibex_counters_t &k) { return peer.counters(k); };
        ep_ = &ep;
        remote_va_ = peer.va();
        remote_rkey_ = peer.rkey();
        if (while_open) while_open();
        ep_ = nullptr;
        peer_counters_ = nullptr;
        dpdk_side_ = ep.counters();
        EXPECT_EQ(peer.finish(), 0);
        if (!capturing) return;
        cap.stop();
        std::vector<unsigned> decoded;
        EXPECT_TRUE(tshark_opcodes(pcap, &decoded));
        unlink(pcap.c_str());
        const std::set<unsigned> ops(decoded.begin(), decoded.end());
        const size_t frames = decoded.size();
        // The requester's frames as host B received them: WRITE FIRST/MIDDLE/LAST (6-8),
        // READ request (12), SEND FIRST/LAST or ONLY (0-4).
        EXPECT_GE(frames, 30u) << "RoCEv2 frames tshark decoded on " << hosts_.if_b;
        EXPECT_TRUE(ops.count(6) && ops.count(7) && ops.count(8)) << "RDMA WRITE FIRST/MIDDLE/LAST";
        EXPECT_TRUE(ops.count(12)) << "RDMA READ request";
        EXPECT_TRUE(ops.count(0) || ops.count(4)) << "SEND";
    }

    TwoHosts hosts_;
    std::function<bool(ibex_counters_t &)> peer_counters_; // the peer's counters, during while_open
    Endpoint *ep_ = nullptr;                               // this side, and the peer's buffer, during while_open
    uint64_t remote_va_ = 0;
    uint32_t remote_rkey_ = 0;
    ibex_counters_t dpdk_side_{};                          // this process's counters after the exchange
};

} // namespace

TEST_F(DpdkNetns, AfXdpBothEnds) {
    run("dpdk:af_xdp:" + hosts_.if_a, "dpdk:af_xdp:" + hosts_.if_b, false);
}

// The XDP program of ibex's af_xdp ports hands the kernel everything but RoCEv2: TCP
// between the hosts (the perftest tools' exchange, a bootstrap) works while both ports
// are open, and the ports resolve each other through the kernel's ARP. With the PMD's
// own program (IBEX_DPDK_XDP_PROG=default) the queue's every frame went to the socket.
TEST_F(DpdkNetns, AfXdpLeavesTcpToTheKernel) {
    run("dpdk:af_xdp:" + hosts_.if_a, "dpdk:af_xdp:" + hosts_.if_b, false, 0, [&] {
        EXPECT_EQ(tcp_round_trip(hosts_.ns_b, hosts_.ip_b), "");
    });
}

// A long stream of 64 KiB WRITEs, 64 outstanding, between af_xdp ports with a small
// transmit ring (txd=256): the PMD's fill and completion rings hold mbufs of the port's
// pool too, and a pool sized without them ran dry while the sender's window was full (no
// transmit burst, so no completion reclaimed): no ACK could be received, and the QP ended
// in RETRY_EXC_ERR within a second, every time. Then the bytes are checked as always.
TEST_F(DpdkNetns, AfXdpStreamWithASmallTransmitRing) {
    run("dpdk:af_xdp:" + hosts_.if_a + ",txd=256", "dpdk:af_xdp:" + hosts_.if_b + ",txd=256", false, 0, [&] {
        constexpr uint32_t kMsg = 64 << 10;
        constexpr int kTotal = 3000, kDepth = 64;
        int posted = 0, done = 0, errors = 0;
        ibex_wc_status_t first_error = IBEX_WC_SUCCESS;
        const auto end = Clock::now() + std::chrono::seconds(60);
        while (done < kTotal && Clock::now() < end && !errors) {
            for (; posted < kTotal && posted - done < kDepth; ++posted) {
                const size_t off = static_cast<size_t>(posted % (kBuf / kMsg)) * kMsg;
                ASSERT_EQ(ep_->post_rdma(IBEX_WR_RDMA_WRITE, posted, off, kMsg, remote_va_ + off, remote_rkey_), IBEX_OK)
                    << ibex_last_error();
            }
            for (const ibex_wc_t &wc : ep_->wait(1, 100)) {
                ++done;
                if (wc.status != IBEX_WC_SUCCESS && !errors++) first_error = wc.status;
            }
        }
        EXPECT_EQ(errors, 0) << "first error: " << ibex_wc_status_str(first_error);
        EXPECT_EQ(done, kTotal) << "WRITEs completed";
    });
}

TEST_F(DpdkNetns, AfPacketBothEndsDecodesAsRoceV2) {
    run("dpdk:af_packet:" + hosts_.if_a, "dpdk:af_packet:" + hosts_.if_b, true, 2048); // MTU 3000
}

// The udp port answers the READ with UDP GSO trains; the af_xdp peer's XDP program takes
// GSO off the udp side's veth, so the kernel cuts each train in software, segment k with
// IP ID k, and the dpdk port checks every ICRC against the IP header it really got.
TEST_F(DpdkNetns, DpdkTalksToTheUdpPort) {
    ibex_counters_t udp_side{};
    run("dpdk:af_xdp:" + hosts_.if_a, "udp:" + hosts_.if_b, true, 0, [&] { ASSERT_TRUE(peer_counters_(udp_side)); });
    EXPECT_GT(udp_side.tx_gso_trains, 0u) << "the READ responses left as GSO trains";
    EXPECT_EQ(udp_side.rx_icrc_errors, 0u);
    EXPECT_EQ(dpdk_side_.rx_icrc_errors, 0u) << "segments whose ICRC was not made for their IP ID";
    EXPECT_GT(dpdk_side_.rx_packets, 0u);
}

// af_packet at the netdev MTUs users have: 1500 (its ring's 2 KiB frames once made a block
// smaller than a page, which the kernel refuses) and 9000; the RoCE MTU is the largest the
// netdev MTU carries (1024 at 1500, 4096 at 9000).
class DpdkNetnsMtu : public DpdkNetns, public ::testing::WithParamInterface<int> {
protected:
    int mtu() const override { return GetParam(); }
};

TEST_P(DpdkNetnsMtu, AfPacketBothEnds) {
    run("dpdk:af_packet:" + hosts_.if_a, "dpdk:af_packet:" + hosts_.if_b, false, GetParam() >= 4200 ? 4096 : 1024);
}

INSTANTIATE_TEST_SUITE_P(Mtu, DpdkNetnsMtu, ::testing::Values(1500, 9000));

// af_xdp at MTU 1500 (and 2000: any MTU under the 3000 the other tests use): its UMEM chunks
// are the pool's mbufs, which at 1500 were too small for the kernel (no UMEM) and at 2000
// too small for a veth's XDP (opened, then every frame lost).
class DpdkNetnsXdpMtu : public DpdkNetns, public ::testing::WithParamInterface<int> {
protected:
    int mtu() const override { return GetParam(); }
};

TEST_P(DpdkNetnsXdpMtu, AfXdpBothEnds) {
    run("dpdk:af_xdp:" + hosts_.if_a, "dpdk:af_xdp:" + hosts_.if_b, false, 1024);
}

INSTANTIATE_TEST_SUITE_P(Mtu, DpdkNetnsXdpMtu, ::testing::Values(1500, 2000));

// At MTU 9000 XDP cannot attach to a veth (a frame must fit a page): opening says so and
// names the way out, where the PMD alone said "Invalid argument".
class DpdkNetnsXdpJumbo : public DpdkNetns {
protected:
    int mtu() const override { return 9000; }
};

TEST_F(DpdkNetnsXdpJumbo, AfXdpRefusesTheMtuByName) {
    ASSERT_TRUE(join_netns(hosts_.ns_a));
    ibex_context_t *ctx = nullptr;
    const std::string dev = "dpdk:af_xdp:" + hosts_.if_a;
    EXPECT_EQ(ibex_open_device(dev.c_str(), nullptr, &ctx), IBEX_ERR_NOT_SUPPORTED);
    const std::string why = ibex_last_error();
    EXPECT_NE(why.find("MTU 9000"), std::string::npos) << why;
    EXPECT_NE(why.find("dpdk:af_packet:" + hosts_.if_a), std::string::npos) << why;
    if (ctx) ibex_close_device(ctx);
}

// The udp port seen from outside: crafted datagrams from a plain socket reach a context,
// and what the receive path counts (CE marks, CNPs, bad ICRC, malformed, unknown QP)
// shows in ibex_query_counters. Also device naming and address selection errors, and the
// port's own interface as ibex_switch uses it: every packet leaves with its own TOS, and
// send_one() says whether the packet left.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <thread>

#include "tests/support/endpoint.h"
#include "tests/support/threads.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/codec/roce.h"
#include "transport/soft/udp/udp_port.h"

using namespace ibex::test;
using namespace ibex::roce;

namespace {

struct RawSender {
    int fd = -1;
    uint32_t ip = 0;
    uint16_t port = 0;
    explicit RawSender(uint8_t tos) {
        fd = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(0x7f0000fe); // 127.0.0.254, clear of the contexts' picks
        bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa);
        socklen_t len = sizeof sa;
        getsockname(fd, reinterpret_cast<sockaddr *>(&sa), &len);
        ip = ntohl(sa.sin_addr.s_addr);
        port = ntohs(sa.sin_port);
        int pmtu = IP_PMTUDISC_DO;
        setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
        int t = tos;
        setsockopt(fd, IPPROTO_IP, IP_TOS, &t, sizeof t);
    }
    ~RawSender() { close(fd); }

    // Sends BTH..payload with a correct (or deliberately wrong) ICRC to `to`.
    void send(std::vector<uint8_t> pkt, const ibex_ep_addr_t &to, bool good_icrc = true) {
        IcrcIpv4Fields f;
        f.src_ip = ip;
        f.src_port = port;
        f.dst_ip = get32(to.gid + 12);
        f.dst_port = to.udp_port;
        iovec v{pkt.data(), pkt.size()};
        uint32_t icrc = icrc_ipv4(f, std::span<const iovec>(&v, 1), pkt.size());
        if (!good_icrc) icrc ^= 1;
        pkt.resize(pkt.size() + 4);
        store_icrc(pkt.data() + pkt.size() - 4, icrc);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(to.udp_port);
        sa.sin_addr.s_addr = htonl(f.dst_ip);
        ASSERT_EQ(sendto(fd, pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr *>(&sa), sizeof sa),
                  static_cast<ssize_t>(pkt.size()));
    }
};

std::vector<uint8_t> cnp(uint32_t qpn) {
    std::vector<uint8_t> p(kBthLen + kCnpPayloadLen, 0);
    Bth b;
    b.opcode = kCnp;
    b.becn = true;
    b.dest_qp = qpn;
    encode_bth(p.data(), b);
    return p;
}

ibex_counters_t counters_after(ibex_context_t *ctx, uint64_t ibex_counters_t::*field, uint64_t want) {
    ibex_counters_t c{};
    c.size = sizeof c;
    for (int i = 0; i < 200; ++i) {
        ibex_progress(ctx);
        ibex_query_counters(ctx, &c);
        if (c.*field >= want) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return c;
}

TEST(UdpPort, CountsCeMarksAndCnps) {
    Endpoint e;
    e.open(4096);
    RawSender ce(0x3); // ECN = CE
    ce.send(cnp(ibex_qp_num(e.qp)), e.addr());
    auto c = counters_after(e.ctx, &ibex_counters_t::rp_cnp_handled, 1);
    EXPECT_EQ(c.rp_cnp_handled, 1u);
    EXPECT_EQ(c.np_ecn_marked_roce_packets, 1u);
    RawSender ect(0x2); // ECT(0): not a congestion mark
    ect.send(cnp(ibex_qp_num(e.qp)), e.addr());
    c = counters_after(e.ctx, &ibex_counters_t::rp_cnp_handled, 2);
    EXPECT_EQ(c.rp_cnp_handled, 2u);
    EXPECT_EQ(c.np_ecn_marked_roce_packets, 1u);
}

TEST(UdpPort, DropsAndCountsBadPackets) {
    Endpoint e;
    e.open(4096);
    RawSender s(0x2);
    s.send(cnp(ibex_qp_num(e.qp)), e.addr(), /*good_icrc=*/false);
    auto c = counters_after(e.ctx, &ibex_counters_t::rx_icrc_errors, 1);
    EXPECT_EQ(c.rx_icrc_errors, 1u);
    EXPECT_EQ(c.rp_cnp_handled, 0u);

    std::vector<uint8_t> junk(7, 0xee); // shorter than a BTH + ICRC
    s.send(junk, e.addr());
    c = counters_after(e.ctx, &ibex_counters_t::rx_dropped_malformed, 1);
    EXPECT_EQ(c.rx_dropped_malformed, 1u);

    std::vector<uint8_t> unknown_op(kBthLen, 0);
    Bth b;
    b.opcode = 0x1f; // not an RC opcode ibex speaks
    b.dest_qp = ibex_qp_num(e.qp);
    encode_bth(unknown_op.data(), b);
    s.send(unknown_op, e.addr());
    c = counters_after(e.ctx, &ibex_counters_t::rx_dropped_malformed, 2);
    EXPECT_EQ(c.rx_dropped_malformed, 2u);

    // A well-formed SEND to a QP number nobody owns.
    std::vector<uint8_t> send(kBthLen + 4, 0);
    b = {};
    b.opcode = kSendOnly;
    b.dest_qp = 0xabcdef;
    encode_bth(send.data(), b);
    s.send(send, e.addr());
    c = counters_after(e.ctx, &ibex_counters_t::rx_unknown_qp, 1);
    EXPECT_EQ(c.rx_unknown_qp, 1u);
}

// What a test needs of a received packet, kept past the next recv().
struct Received {
    uint32_t len;
    uint8_t first_byte;
    uint8_t tos;
    ibex::soft::NetAddr src, dst;
};

// Up to `want` packets from `port` within a second.
std::vector<Received> receive(ibex::soft::Port &port, size_t want) {
    std::vector<Received> got;
    ibex::soft::RxPacket pkts[8];
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (got.size() < want && std::chrono::steady_clock::now() < end) {
        const int n = port.recv(pkts);
        for (int i = 0; i < n; ++i) got.push_back({pkts[i].len, pkts[i].data[0], pkts[i].tos, pkts[i].src, pkts[i].dst});
        if (!n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return got;
}

// Two udp ports on loopback, each on a free UDP port: tx sends, rx receives.
class UdpPortPair : public ::testing::Test {
protected:
    void SetUp() override {
        ibex::soft::UdpPortOptions o;
        o.device = "udp:127.0.0.1:0"; // any free port
        o.local_addr = "127.0.0.1";
        ibex_status_t st;
        rx = ibex::soft::open_udp_port(o, &st);
        ASSERT_TRUE(rx) << ibex_last_error();
        tx = ibex::soft::open_udp_port(o, &st);
        ASSERT_TRUE(tx) << ibex_last_error();
    }
    std::unique_ptr<ibex::soft::Port> rx, tx;
};

TEST_F(UdpPortPair, EachPacketLeavesWithItsOwnTos) {
    using namespace ibex::soft;

    // One send() of ECN-capable data around a CNP (its DSCP, not ECN-capable) and a CE
    // mark, as the engine and the switch send them: the TOS is the socket's, so the port
    // must not let one packet's TOS leave with another.
    const uint8_t tos[] = {0x02, 0xb8, 0x03, 0x02, 0x02};
    constexpr size_t kCount = sizeof tos;
    std::array<std::array<uint8_t, 64>, kCount> bytes{};
    TxPacket pkts[kCount];
    for (size_t i = 0; i < kCount; ++i) {
        bytes[i].fill(uint8_t(i));
        pkts[i].dst = rx->local();
        pkts[i].len = 64;
        pkts[i].tos = tos[i];
        pkts[i].npieces = 1;
        pkts[i].pieces[0] = {bytes[i].data(), 64};
    }
    tx->send(pkts);
    EXPECT_EQ(tx->tx_dropped(), 0u);
    const auto got = receive(*rx, kCount);
    ASSERT_EQ(got.size(), kCount);
    for (const Received &p : got) {
        ASSERT_EQ(p.len, 64u);
        ASSERT_LT(p.first_byte, kCount);
        EXPECT_EQ(p.tos, tos[p.first_byte]) << "packet " << int(p.first_byte);
        EXPECT_EQ(p.src, tx->local());
        EXPECT_EQ(p.dst, rx->local());
    }

    // send_one: true when the packet left, false when the port dropped it.
    EXPECT_TRUE(tx->send_one(bytes[1].data(), 64, rx->local(), 0x03));
    const auto one = receive(*rx, 1);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].tos, 0x03);
    std::vector<uint8_t> too_big(70000);
    EXPECT_FALSE(tx->send_one(too_big.data(), uint32_t(too_big.size()), rx->local(), 0x02)) << "no datagram is this big";
    EXPECT_EQ(tx->tx_dropped(), 1u);
    EXPECT_FALSE(tx->whole_frames());
}

// GSO trains follow a RoCE message's packet lengths (a FIRST is the longest, its RETH; a
// MIDDLE carries the MTU; a LAST with an immediate is 4 bytes longer than a MIDDLE): a
// two-packet message leaves as one train when its LAST is shorter than its FIRST; a longer
// message's FIRST leaves alone so that its MIDDLEs make a train, which a shorter LAST may
// end but a LAST with an immediate may not. Every packet arrives, in order, its length kept.
TEST_F(UdpPortPair, GsoTrainsFollowTheMessagesPacketLengths) {
    using namespace ibex::soft;
    const std::array<uint32_t, 10> lens = {4128, 4116, 4128, 4112, 4112, 4116, 4128, 4112, 4112, 4100};
    std::vector<std::vector<uint8_t>> bytes;
    TxPacket pkts[lens.size()];
    for (size_t i = 0; i < lens.size(); ++i) {
        bytes.emplace_back(lens[i], static_cast<uint8_t>(i));
        pkts[i].dst = rx->local();
        pkts[i].len = lens[i];
        pkts[i].tos = 0x02;
        pkts[i].npieces = 1;
        pkts[i].pieces[0] = {bytes[i].data(), lens[i]};
    }
    const uint64_t trains0 = tx->tx_gso_trains();
    tx->send(pkts);
    EXPECT_EQ(tx->tx_dropped(), 0u);
    // [FIRST LAST] [FIRST] [MIDDLE MIDDLE] [LAST+imm] [FIRST] [MIDDLE MIDDLE LAST]
    EXPECT_EQ(tx->tx_gso_trains() - trains0, 3u);
    const auto got = receive(*rx, lens.size());
    ASSERT_EQ(got.size(), lens.size());
    for (size_t i = 0; i < lens.size(); ++i) {
        EXPECT_EQ(got[i].first_byte, i) << "packet " << i << " out of order";
        EXPECT_EQ(got[i].len, lens[got[i].first_byte]) << "packet " << i;
    }
}

// A packet's service level (a QP's IBEX_QP_SL) is the socket priority it leaves with, which
// a VLAN device's egress-qos-map makes the tag's PCP; without one, the priority the kernel
// gives its TOS. (This kernel has neither 802.1Q devices nor the prio qdisc, so the
// priority is read back from the port's socket rather than seen on a wire.)
TEST_F(UdpPortPair, EachBatchLeavesWithItsServiceLevelAsTheSocketPriority) {
    using namespace ibex::soft;
    auto priority = [](int fd) {
        int v = -1;
        socklen_t len = sizeof v;
        EXPECT_EQ(getsockopt(fd, SOL_SOCKET, SO_PRIORITY, &v, &len), 0);
        return v;
    };
    auto kernels_for_tos = [&](int tos) {
        const int fd = socket(AF_INET, SOCK_DGRAM, 0);
        EXPECT_EQ(setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos), 0);
        const int v = priority(fd);
        close(fd);
        return v;
    };
    std::array<std::array<uint8_t, 64>, 4> bytes{};
    auto send = [&](std::initializer_list<std::pair<uint8_t, int8_t>> tos_pcp) {
        std::vector<TxPacket> pkts(tos_pcp.size());
        size_t i = 0;
        for (auto [tos, pcp] : tos_pcp) {
            bytes[i].fill(uint8_t(i));
            pkts[i].dst = rx->local();
            pkts[i].len = 64;
            pkts[i].tos = tos;
            pkts[i].pcp = pcp;
            pkts[i].npieces = 1;
            pkts[i].pieces[0] = {bytes[i].data(), 64};
            ++i;
        }
        tx->send(pkts);
        return receive(*rx, pkts.size()).size();
    };
    ASSERT_EQ(send({{0x02, 5}}), 1u);
    EXPECT_EQ(priority(tx->wait_fd()), 5);
    ASSERT_EQ(send({{0x02, -1}}), 1u);
    EXPECT_EQ(priority(tx->wait_fd()), kernels_for_tos(0x02)) << "no service level: the kernel's for the TOS";
    ASSERT_EQ(send({{0x6a, 5}}), 1u);
    EXPECT_EQ(priority(tx->wait_fd()), 5) << "a new TOS resets the priority; the level is set again";
    ASSERT_EQ(send({{0x6a, -1}}), 1u);
    EXPECT_EQ(priority(tx->wait_fd()), kernels_for_tos(0x6a));
    // Packets of different levels in one send() leave in separate batches, all of them.
    EXPECT_EQ(send({{0x02, 5}, {0x02, 5}, {0x02, -1}, {0x02, 6}}), 4u);
    EXPECT_EQ(priority(tx->wait_fd()), 6) << "the last batch's level";
    EXPECT_EQ(tx->tx_dropped(), 0u);
}

TEST(UdpPort, LoopbackContextsTakeDistinctAddresses) {
    Endpoint a, b;
    a.open(64);
    b.open(64);
    ibex_ep_addr_t x = a.addr(), y = b.addr();
    EXPECT_EQ(x.udp_port, 4791);
    EXPECT_EQ(y.udp_port, 4791);
    EXPECT_NE(0, std::memcmp(x.gid, y.gid, 16));
    EXPECT_EQ(x.gid[12], 127);
}

// What ibex_query_device says of the udp port: the MTU its QPs announce, and messages of
// 512 KiB where GSO makes each message's own datagrams the dear part (64 KiB without).
TEST(UdpPort, TheDeviceQueryNamesTheMtuAndTheMessageLengthThatPays) {
    for (const bool gso : {true, false}) {
        ::setenv("IBEX_UDP_GSO", gso ? "1" : "0", 1);
        Endpoint a;
        a.open(64, "udp:lo");
        ::unsetenv("IBEX_UDP_GSO");
        ibex_device_attr_t d{};
        d.size = sizeof d;
        IBEX_ASSERT_OK(ibex_query_device(a.ctx, &d));
        EXPECT_EQ(d.max_mtu, a.addr().mtu);
        EXPECT_EQ(d.max_msg_size, uint64_t(1) << 31);
        EXPECT_EQ(d.efficient_msg_bytes, gso ? size_t(512) << 10 : size_t(64) << 10) << "gso " << gso;
    }
}

TEST(UdpPort, ExplicitAddressInUseIsAnError) {
    ibex_context_attr_t attr = IBEX_CONTEXT_ATTR_INIT;
    attr.local_addr = "127.0.0.200";
    ibex_context_t *a = nullptr, *b = nullptr;
    IBEX_ASSERT_OK(ibex_open_device("udp:lo", &attr, &a));
    EXPECT_EQ(ibex_open_device("udp:lo", &attr, &b), IBEX_ERR_ADDRESS_IN_USE);
    EXPECT_NE(std::string(ibex_last_error()).find("127.0.0.200"), std::string::npos) << ibex_last_error();
    EXPECT_EQ(b, nullptr);
    ibex_close_device(a);
}

TEST(UdpPort, UnknownInterfaceOrAddressIsNoDevice) {
    ibex_context_t *c = nullptr;
    EXPECT_EQ(ibex_open_device("udp:nosuchif0", nullptr, &c), IBEX_ERR_NO_DEVICE);
    EXPECT_NE(std::string(ibex_last_error()).find("nosuchif0"), std::string::npos);
    EXPECT_EQ(ibex_open_device("udp:192.0.2.77", nullptr, &c), IBEX_ERR_NO_DEVICE);
    EXPECT_EQ(ibex_open_device("rocket:0", nullptr, &c), IBEX_ERR_NO_DEVICE);
    EXPECT_NE(std::string(ibex_last_error()).find("udp:lo"), std::string::npos) << "should list what exists";
}

} // namespace

namespace {

// The CPUs each thread of this process may run on.
std::vector<std::string> thread_cpu_lists() {
    std::vector<std::string> out;
    for (int tid : ibex::test::process_threads()) out.push_back(ibex::test::thread_status(tid, "Cpus_allowed_list"));
    return out;
}

TEST(UdpPort, ProgressThreadRunsOnTheChosenCpus) {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs to tell a pinned thread apart";
    const auto before = thread_cpu_lists();
    ibex_context_attr_t attr = IBEX_CONTEXT_ATTR_INIT;
    attr.progress_cpus = "1";
    ibex_context_t *ctx = nullptr;
    IBEX_ASSERT_OK(ibex_open_device("udp:lo", &attr, &ctx));
    const auto after = thread_cpu_lists();
    ibex_close_device(ctx);
    EXPECT_EQ(after.size(), before.size() + 1) << "one progress thread per context";
    EXPECT_EQ(std::count(after.begin(), after.end(), "1") - std::count(before.begin(), before.end(), "1"), 1)
        << "the new progress thread, and only it, is pinned to CPU 1";
}

TEST(UdpPort, MalformedProgressCpusAreRefused) {
    ibex_context_attr_t attr = IBEX_CONTEXT_ATTR_INIT;
    attr.progress_cpus = "1-x";
    ibex_context_t *ctx = nullptr;
    EXPECT_EQ(ibex_open_device("udp:lo", &attr, &ctx), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("1-x"), std::string::npos) << ibex_last_error();
    EXPECT_EQ(ctx, nullptr);
}

} // namespace

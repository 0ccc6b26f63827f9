// The ibex tools facing stock perftest 6.x over TCP. This file plays the stock tool's side
// of the out-of-band exchange from a transcript written down from perftest's source
// (perftest_communication.c and the ib_* mains), not from ibex's code: each message's
// size, format and order, who writes first, and perftest's answers. No RDMA device here
// runs a real ib_write_bw, so the data path is kept inside the ibex tool: as a stock
// server the script answers each key record with the tool's own, which connects every ibex
// QP to itself over udp:lo; as a stock client it offers a made-up QP (the ibex server of
// these tests never sends to it).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cstring>
#include <netinet/in.h>
#include <poll.h>
#include <regex>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/tools/perftest/tool_process.h"

namespace ibex::test::perftest {
namespace {

constexpr int kStepTimeoutMs = 20000;

// ---- The transcript: what perftest 6.x puts on the wire ----------------------------------

// The version field: char[16], strncpy'd, so NUL padded. 6.x refuses peers below 5.70.
constexpr size_t kVersionLen = 16;
const std::string kStockVersion = std::string("6.06") + std::string(12, '\0');
// What ibex sends: its claimed version, then (after the NUL, unseen by perftest) its tag.
const std::string kIbexVersion = std::string("6.06") + '\0' + "ibex1" + std::string(6, '\0');
// KEY_PRINT_FMT_GID with its NUL: lid:out_reads:qpn:psn:rkey:vaddr: 16 GID bytes: srqn:
constexpr size_t kKeyLen = 108;
const std::regex kKeyRe("[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{6}:[0-9a-f]{6}:[0-9a-f]{8}:[0-9a-f]{16}:"
                        "([0-9a-f]{2}:){16}[0-9a-f]{8}:");
// A stock client's own record (QPN 0xab, GID ::ffff:127.0.0.99).
const std::string kStockKey = std::string("0000:0010:0000ab:00c0de:00001234:00007f0000001000:"
                                          "00:00:00:00:00:00:00:00:00:00:ff:ff:7f:00:00:63:00000000:") +
                              '\0';
const std::string kDone("done", 5); // with its NUL

std::string be32(uint32_t v) {
    const uint32_t n = htonl(v);
    return std::string(reinterpret_cast<const char *>(&n), 4);
}

std::string be64(uint64_t v) {
    std::string s(8, '\0');
    for (int i = 7; i >= 0; --i, v >>= 8) s[size_t(i)] = char(v & 0xff);
    return s;
}

uint64_t from_be64(const std::string &s) {
    uint64_t v = 0;
    for (unsigned char c : s) v = v << 8 | c;
    return v;
}

std::string be_double(double d) {
    uint64_t b;
    std::memcpy(&b, &d, 8);
    return be64(b);
}

double from_be_double(const std::string &s) {
    const uint64_t b = from_be64(s);
    double d;
    std::memcpy(&d, &b, 8);
    return d;
}

// One bw_report_data as xchg_bw_reports sends it: five 8-byte fields, each its own swap.
struct Report {
    uint64_t size, iters;
    double peak, avg, rate;
};

// ---- The scripted stock peer -------------------------------------------------------------

class StockPeer {
public:
    // Stock server: listen; the ibex client is started on port().
    StockPeer() : server_(true) {
        listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bind(listen_fd_, reinterpret_cast<sockaddr *>(&a), sizeof a);
        listen(listen_fd_, 1);
        socklen_t len = sizeof a;
        getsockname(listen_fd_, reinterpret_cast<sockaddr *>(&a), &len);
        port_ = ntohs(a.sin_port);
    }
    // Stock client: connect to an ibex server on port, retrying while it starts.
    explicit StockPeer(uint16_t port) : server_(false), port_(port) {}
    ~StockPeer() {
        if (fd_ >= 0) close(fd_);
        if (listen_fd_ >= 0) close(listen_fd_);
    }

    uint16_t port() const { return port_; }

    bool start() {
        if (server_) {
            pollfd p{listen_fd_, POLLIN, 0};
            if (poll(&p, 1, kStepTimeoutMs) != 1) return false;
            fd_ = accept(listen_fd_, nullptr, nullptr);
            return fd_ >= 0;
        }
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port_);
        for (int i = 0; i < 200; ++i) {
            fd_ = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd_, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0) return true;
            close(fd_);
            fd_ = -1;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }

    // Exactly n bytes from the ibex tool (empty on EOF or timeout).
    std::string read(size_t n, int timeout_ms = kStepTimeoutMs) {
        std::string s;
        const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
        while (s.size() < n) {
            const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
            pollfd p{fd_, POLLIN, 0};
            if (left <= 0 || poll(&p, 1, left) != 1) return {};
            char buf[512];
            const ssize_t r = recv(fd_, buf, std::min(sizeof buf, n - s.size()), 0);
            if (r <= 0) return {};
            s.append(buf, size_t(r));
        }
        return s;
    }
    void write(const std::string &s) { ASSERT_EQ(send(fd_, s.data(), s.size(), MSG_NOSIGNAL), ssize_t(s.size())); }

    // The tool closed the connection with nothing more to say.
    bool sees_eof(int timeout_ms = kStepTimeoutMs) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) != 1) return false;
        char c;
        return recv(fd_, &c, 1, 0) == 0;
    }

    // ctx_xchg_data: the client writes first, the server answers. Returns the tool's bytes.
    std::string xchg(const std::string &mine, size_t n) {
        if (!server_) write(mine);
        std::string got = read(n);
        if (server_) write(mine);
        return got;
    }

    // ctx_hand_shake with one key record; as a server, perftest's answer is the tool's own
    // record (its QPs then talk to themselves).
    void hand_shake(const char *what) {
        SCOPED_TRACE(what);
        if (!server_) write(kStockKey);
        const std::string got = read(kKeyLen);
        ASSERT_EQ(got.size(), kKeyLen) << "no key record";
        EXPECT_EQ(got[kKeyLen - 1], '\0');
        EXPECT_TRUE(std::regex_match(got.substr(0, kKeyLen - 1), kKeyRe)) << got;
        if (server_) write(got);
    }

    // exchange_versions, check_sys_data, check_mtu, then the key records of ib_*: the
    // WRITE/READ/atomic latency tests' extra swap up front, all QPs before connecting and
    // again after, and the barrier after RTR.
    void opening(bool extra_swap, int qps) {
        ASSERT_TRUE(start()) << "no connection";
        EXPECT_EQ(xchg(kStockVersion, kVersionLen), kIbexVersion);
        const long line = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
        EXPECT_EQ(xchg(be32(4096), 4), be32(uint32_t(sysconf(_SC_PAGESIZE)))) << "cycle buffer";
        EXPECT_EQ(xchg(be32(64), 4), be32(line > 0 ? uint32_t(line) : 64)) << "cache line";
        const std::string mtu = xchg(std::string("3", 2), 2); // "%d" of IBV_MTU_1024, NUL
        ASSERT_EQ(mtu.size(), 2u);
        EXPECT_TRUE(mtu[0] >= '1' && mtu[0] <= '5' && mtu[1] == '\0') << "MTU field";
        if (extra_swap) hand_shake("latency tests' first swap");
        for (int i = 0; i < qps; ++i) hand_shake("keys before connecting");
        for (int i = 0; i < qps; ++i) hand_shake("keys after connecting");
        hand_shake("barrier after RTR");
    }

    Report reports(const Report &mine) {
        Report r{};
        r.size = from_be64(xchg(be64(mine.size), 8));
        r.iters = from_be64(xchg(be64(mine.iters), 8));
        r.peak = from_be_double(xchg(be_double(mine.peak), 8));
        r.avg = from_be_double(xchg(be_double(mine.avg), 8));
        r.rate = from_be_double(xchg(be_double(mine.rate), 8));
        return r;
    }

    // ctx_close_connection: a hand shake, then "done" from both (perftest never reads the
    // peer's; the tool must send it, and then close).
    void closing() {
        hand_shake("closing");
        if (!server_) write(kDone);
        EXPECT_EQ(read(kDone.size()), kDone);
        if (server_) write(kDone);
        EXPECT_TRUE(sees_eof()) << "the tool kept talking after \"done\"";
    }

private:
    bool server_;
    uint16_t port_ = 0;
    int listen_fd_ = -1;
    int fd_ = -1;
};

std::vector<std::string> client_cmd(const std::string &name, uint16_t port, std::vector<std::string> flags) {
    flags.insert(flags.end(), {"-d", "udp:lo", "-p", std::to_string(port), "127.0.0.1"});
    return cmd(name, flags);
}

std::vector<std::string> server_cmd(const std::string &name, uint16_t port, std::vector<std::string> flags) {
    flags.insert(flags.end(), {"-d", "udp:lo", "-p", std::to_string(port)});
    return cmd(name, flags);
}

// ib_write_bw server, one way: after the barrier after RTR it waits in one more hand
// shake while the client measures, takes the client's report and closes.
TEST(StockPeer, WriteBwClientWalksTheStockServersSequence) {
    StockPeer peer;
    Proc tool(client_cmd("ibex_write_bw", peer.port(), {"-s", "4096", "-n", "20", "-q", "2"}));
    peer.opening(false, 2);
    peer.hand_shake("client finished");
    const Report r = peer.reports(Report{0, 0, 0, 0, 0});
    peer.closing();
    const Result res = tool.wait(60);
    ASSERT_EQ(res.status, 0) << res.err;
    // The report is the row the client printed, in perftest's units and field order.
    const auto rows = table(res.out, kBwHeaderMiB, 5);
    ASSERT_EQ(rows.size(), 1u) << res.out;
    EXPECT_EQ(r.size, 4096u);
    EXPECT_EQ(r.iters, 40u); // all QPs' messages, as the row counts them
    EXPECT_NEAR(r.peak, rows[0][2], 0.006);
    EXPECT_NEAR(r.avg, rows[0][3], 0.006);
    EXPECT_NEAR(r.rate, rows[0][4], 0.0000006);
    EXPECT_GT(r.avg, 0);
}

// ib_write_bw client, one way: the ibex server must print what the stock client reports.
TEST(StockPeer, WriteBwServerPrintsTheStockClientsReport) {
    const uint16_t port = free_port();
    Proc tool(server_cmd("ibex_write_bw", port, {"-s", "65536", "-n", "1000"}));
    StockPeer peer(port);
    peer.opening(false, 1);
    peer.hand_shake("client finished");
    const Report mine{65536, 1000, 1234.5, 1000.25, 0.016};
    const Report theirs = peer.reports(mine);
    EXPECT_EQ(theirs.size, 0u); // a one-way server has measured nothing
    peer.closing();
    const Result res = tool.wait(60);
    ASSERT_EQ(res.status, 0) << res.err;
    const auto rows = table(res.out, kBwHeaderMiB, 5);
    ASSERT_EQ(rows.size(), 1u) << res.out;
    EXPECT_EQ(rows[0][0], 65536);
    EXPECT_EQ(rows[0][1], 1000);
    EXPECT_DOUBLE_EQ(rows[0][2], 1234.5);
    EXPECT_DOUBLE_EQ(rows[0][3], 1000.25);
    EXPECT_DOUBLE_EQ(rows[0][4], 0.016);
}

// -b with one size: a hand shake before the run, then the two reports; the row is their
// sum and --report-both shows each side's.
TEST(StockPeer, BidirectionalSwapsReportsAfterEachSize) {
    StockPeer peer;
    Proc tool(client_cmd("ibex_write_bw", peer.port(), {"-b", "--report-both", "-s", "8192", "-n", "20"}));
    peer.opening(false, 1);
    peer.hand_shake("before the size");
    const Report mine{8192, 20, 500.5, 400.25, 0.05};
    const Report local = peer.reports(mine);
    peer.closing();
    const Result res = tool.wait(60);
    ASSERT_EQ(res.status, 0) << res.err;
    const size_t at_local = res.out.find("Local results"), at_remote = res.out.find("Remote results");
    ASSERT_NE(at_local, std::string::npos) << res.out;
    ASSERT_NE(at_remote, std::string::npos) << res.out;
    const auto sum = table(res.out, kBwHeaderMiB, 5);
    const auto own = table(res.out.substr(at_local), kBwHeaderMiB, 5);
    const auto remote = table(res.out.substr(at_remote), kBwHeaderMiB, 5);
    ASSERT_EQ(sum.size(), 1u) << res.out;
    ASSERT_EQ(own.size(), 1u) << res.out;
    ASSERT_EQ(remote.size(), 1u) << res.out;
    EXPECT_EQ(local.size, 8192u);
    EXPECT_EQ(local.iters, 20u);
    EXPECT_NEAR(own[0][3], local.avg, 0.006);
    EXPECT_NEAR(sum[0][3], local.avg + mine.avg, 0.011);
    EXPECT_EQ(remote[0][1], 20);
    EXPECT_DOUBLE_EQ(remote[0][2], 500.5);
    EXPECT_DOUBLE_EQ(remote[0][3], 400.25);
}

// ib_send_bw -a -b: per size a hand shake, the run, the two reports, a hand shake.
TEST(StockPeer, SendBwMeetsAroundEverySize) {
    StockPeer peer;
    Proc tool(client_cmd("ibex_send_bw", peer.port(), {"-b", "-a", "-n", "5"}));
    peer.opening(false, 1);
    std::vector<Report> local;
    for (uint64_t size = 2; size <= (8u << 20); size *= 2) {
        const std::string at = " size " + std::to_string(size);
        peer.hand_shake(("before" + at).c_str());
        local.push_back(peer.reports(Report{size, 5, 10, 10, 0.01}));
        peer.hand_shake(("after" + at).c_str());
    }
    peer.closing();
    const Result res = tool.wait(60);
    ASSERT_EQ(res.status, 0) << res.err;
    const auto rows = table(res.out, kBwHeaderMiB, 5);
    ASSERT_EQ(rows.size(), 23u) << res.out;
    ASSERT_EQ(local.size(), 23u);
    for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(local[i].size, uint64_t(rows[i][0]));
        EXPECT_EQ(local[i].iters, 5u);
        EXPECT_NEAR(rows[i][3], local[i].avg + 10, 0.011);
    }
}

// ib_write_lat says nothing more after the barrier after RTR, not even "done".
TEST(StockPeer, WriteLatClientIsSilentAfterTheOpening) {
    StockPeer peer;
    Proc tool(client_cmd("ibex_write_lat", peer.port(), {"-s", "2", "-n", "50"}));
    peer.opening(true, 1);
    EXPECT_TRUE(peer.sees_eof()) << "the tool sent something after the opening";
    const Result res = tool.wait(60);
    ASSERT_EQ(res.status, 0) << res.err;
    EXPECT_EQ(table(res.out, kLatHeader, 9).size(), 1u) << res.out;
}

// ib_read_lat server: straight into the closing exchange, where it waits for the client;
// it prints no rows.
TEST(StockPeer, ReadLatServerWaitsInTheClosingExchange) {
    const uint16_t port = free_port();
    Proc tool(server_cmd("ibex_read_lat", port, {"-s", "64", "-n", "100"}));
    StockPeer peer(port);
    peer.opening(true, 1);
    peer.closing();
    const Result res = tool.wait(60);
    ASSERT_EQ(res.status, 0) << res.err;
    EXPECT_TRUE(table(res.out, kLatHeader, 9).empty()) << res.out;
}

// ib_send_lat: a hand shake before every size (receives posted first), then the closing.
TEST(StockPeer, SendLatClientMeetsBeforeEverySize) {
    StockPeer peer;
    Proc tool(client_cmd("ibex_send_lat", peer.port(), {"-a", "-n", "5"}));
    peer.opening(false, 1); // ib_send_lat has no extra swap up front
    for (int size = 2; size <= (8 << 20); size *= 2) peer.hand_shake(("before size " + std::to_string(size)).c_str());
    peer.closing();
    const Result res = tool.wait(60);
    ASSERT_EQ(res.status, 0) << res.err;
    EXPECT_EQ(table(res.out, kLatHeader, 9).size(), 23u) << res.out;
}

} // namespace
} // namespace ibex::test::perftest

// The dpdk port itself, between two processes over memif (no RC engine): frames reach the
// peer with the fields the ICRC needs, ARP resolves a peer that is not configured (frames
// wait for the reply instead of being lost), a static neighbour table needs no ARP at all,
// payload from registered memory leaves as a chained external buffer (zero-copy) while
// other payload is copied, and VLAN tags and a fixed DSCP survive the trip. A bad
// IBEX_DPDK_ARGS gives a clear error.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstring>
#include <fstream>
#include <memory>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <utility>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/transport/soft/dpdk/small_frame.h"
#include "transport/soft/codec/icrc.h"
#include "transport/soft/dpdk/dpdk_port.h"
#include "transport/soft/dpdk/eal.h"

#include <rte_bus_vdev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

using namespace ibex::soft;
using namespace ibex::soft::dpdk;
using namespace ibex::test;

namespace {

constexpr uint32_t kChildIp = 0x0a3d0001;  // 10.61.0.1
constexpr uint32_t kParentIp = 0x0a3d0002; // 10.61.0.2
constexpr size_t kPayload = 2048;
constexpr int kPackets = 64;

struct RxRecord {
    uint32_t len;
    uint32_t src_ip;
    uint16_t src_port;
    uint16_t ip_id;
    uint16_t ip_frag;
    uint8_t tos;
    uint8_t icrc_ok; // the last 4 bytes are the ICRC of the rest
    uint64_t hash;
};

uint64_t fnv(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

std::string socket_path() { return "/tmp/ibex-dpdk-port-" + std::to_string(getpid()) + ".sock"; }

// Server and client of one in-process memif pair on socket_path() + suffix, each with the
// other as a static neighbour (no ARP).
struct PairDevices {
    std::string server, client;
};
PairDevices pair_devices(const std::string &suffix) {
    const std::string base = "dpdk:memif:" + socket_path() + suffix;
    return {base + ",role=server,ip=10.61.0.1,mac=02:00:00:3d:00:01,neigh=10.61.0.2@02:00:00:3d:00:02",
            base + ",role=client,ip=10.61.0.2,mac=02:00:00:3d:00:02,neigh=10.61.0.1@02:00:00:3d:00:01"};
}

// Opens both ends of the in-process pair on socket_path() + suffix; false, with the error
// added as a failure, when either does not open.
bool open_pair(const std::string &suffix, std::unique_ptr<Port> *server, std::unique_ptr<Port> *client) {
    const auto [server_dev, client_dev] = pair_devices(suffix);
    ibex_status_t st;
    DpdkPortOptions so, co;
    so.device = server_dev;
    co.device = client_dev;
    *server = open_dpdk_port(so, &st);
    if (!*server) {
        ADD_FAILURE() << server_dev << ": " << ibex_last_error();
        return false;
    }
    *client = open_dpdk_port(co, &st);
    if (!*client) {
        ADD_FAILURE() << client_dev << ": " << ibex_last_error();
        return false;
    }
    return true;
}

// The server end of an in-process pair, polled by a thread of its own that counts what
// arrives (and so answers a leaving client at once).
struct PolledServer {
    std::unique_ptr<Port> port;
    std::atomic<bool> stop{false};
    std::atomic<int> received{0};
    std::thread poller;
    explicit PolledServer(const std::string &device) {
        ibex_status_t st;
        DpdkPortOptions o;
        o.device = device;
        port = open_dpdk_port(o, &st);
        if (port)
            poller = std::thread([this] {
                RxPacket pkts[32];
                while (!stop.load()) received += port->recv(pkts);
            });
    }
    ~PolledServer() { halt(); }
    void halt() {
        stop = true;
        if (poller.joinable()) poller.join();
    }
    // Sends small frames from `client` every `gap_us` until one arrives (10 s at most).
    bool reached_by(Port &client, int gap_us) {
        uint8_t bytes[64] = {};
        const TxPacket p = small_frame(bytes, kChildIp);
        const int before = received.load();
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (received.load() == before && std::chrono::steady_clock::now() < end) {
            client.send(std::span<const TxPacket>(&p, 1));
            usleep(gap_us);
        }
        return received.load() > before;
    }
};

// Child: serve the memif socket, report ready, record `expect` packets (answering ARP
// while it waits), send the records.
int child_receiver(int fd, const std::string &device, int expect) {
    ibex_status_t st;
    DpdkPortOptions o;
    o.device = device;
    auto port = open_dpdk_port(o, &st);
    int32_t ready = port ? 0 : int32_t(st);
    if (!send_all(fd, &ready, sizeof ready) || !port) return 2;
    std::vector<RxRecord> recs;
    RxPacket pkts[32];
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (int(recs.size()) < expect && std::chrono::steady_clock::now() < end) {
        const int n = port->recv(pkts);
        for (int i = 0; i < n; ++i)
            recs.push_back({pkts[i].len, pkts[i].src.ip, pkts[i].src.port, pkts[i].ip_id, pkts[i].ip_frag, pkts[i].tos,
                            uint8_t(pkts[i].len >= 4 && rx_icrc(pkts[i], pkts[i].len - 4) ==
                                                            ibex::roce::load_icrc(pkts[i].data + pkts[i].len - 4)),
                            fnv(pkts[i].data, pkts[i].len)});
        if (!n) usleep(50);
    }
    // Keep answering (ARP) until the parent has read the records.
    const uint32_t count = uint32_t(recs.size());
    if (!send_all(fd, &count, sizeof count) || (count && !send_all(fd, recs.data(), count * sizeof(RxRecord)))) return 3;
    uint32_t done;
    recv_all(fd, &done, sizeof done, 10000);
    return 0;
}

struct Sent {
    std::vector<uint64_t> hashes;
    DpdkPortStats stats;
};

// Parent: `registered` payloads come from memory registered with the port. pending_icrc:
// the port is to compute each ICRC (TxPacket::icrc_pending) and must not write the trailer.
bool send_packets(Port &port, bool registered, uint8_t tos, Sent *out, std::vector<uint8_t> &reg_buf,
                  std::vector<uint8_t> &plain_buf, bool pending_icrc) {
    uint8_t hdr[12];
    uint8_t trailer[4] = {1, 2, 3, 4};
    for (int k = 0; k < kPackets; ++k) {
        uint8_t *payload = (registered ? reg_buf.data() : plain_buf.data()) + size_t(k) * kPayload;
        for (size_t i = 0; i < kPayload; ++i) payload[i] = uint8_t(k * 31 + i * 7);
        std::memset(hdr, k, sizeof hdr);
        TxPacket p;
        p.dst = {kChildIp, 4791};
        p.tos = tos;
        p.pieces[0] = {hdr, sizeof hdr};
        p.pieces[1] = {payload, kPayload};
        p.pieces[2] = {trailer, sizeof trailer};
        p.npieces = 3;
        p.len = uint32_t(sizeof hdr + kPayload + sizeof trailer);
        p.icrc_pending = pending_icrc;
        std::vector<uint8_t> whole(hdr, hdr + sizeof hdr);
        whole.insert(whole.end(), payload, payload + kPayload);
        whole.insert(whole.end(), trailer, trailer + sizeof trailer);
        if (pending_icrc) {
            ibex::roce::IcrcIpv4Fields f;
            f.src_ip = kParentIp;
            f.src_port = 4791;
            f.dst_ip = kChildIp;
            const iovec covered{whole.data(), whole.size() - 4};
            ibex::roce::store_icrc(whole.data() + whole.size() - 4,
                                   ibex::roce::icrc_ipv4(f, std::span<const iovec>(&covered, 1), covered.iov_len));
        }
        out->hashes.push_back(fnv(whole.data(), whole.size()));
        port.send(std::span<const TxPacket>(&p, 1));
        if (trailer[0] != 1 || trailer[1] != 2 || trailer[2] != 3 || trailer[3] != 4) return false;
    }
    return true;
}

// Runs one exchange: child serves `child_dev`, the parent opens `parent_dev` and sends.
void exchange(const std::string &child_dev, const std::string &parent_dev, bool registered, uint8_t tos,
              std::vector<RxRecord> *recs, DpdkPortStats *stats, bool pending_icrc = false) {
    ChildProcess child;
    ASSERT_TRUE(child.start([&](int fd) { return child_receiver(fd, child_dev, kPackets); }, 40));
    int32_t ready = -1;
    ASSERT_TRUE(recv_all(child.fd(), &ready, sizeof ready, 20000));
    ASSERT_EQ(ready, 0) << "child could not open " << child_dev;
    ibex_status_t st;
    DpdkPortOptions o;
    o.device = parent_dev;
    auto port = open_dpdk_port(o, &st);
    ASSERT_TRUE(port) << ibex_last_error();
    std::vector<uint8_t> reg_buf(kPackets * kPayload), plain_buf(kPackets * kPayload);
    port->memory_registered(reg_buf.data(), reg_buf.size());
    Sent sent;
    EXPECT_TRUE(send_packets(*port, registered, tos, &sent, reg_buf, plain_buf, pending_icrc))
        << "the port wrote into a piece it was given";
    // Receive (ARP replies) until the child reports.
    uint32_t count = 0;
    RxPacket pkts[32];
    bool got = false;
    for (int i = 0; i < 20000 && !got; ++i) {
        port->recv(pkts);
        pollfd p{child.fd(), POLLIN, 0};
        got = poll(&p, 1, 1) > 0;
    }
    ASSERT_TRUE(got && recv_all(child.fd(), &count, sizeof count));
    recs->resize(count);
    ASSERT_TRUE(!count || recv_all(child.fd(), recs->data(), count * sizeof(RxRecord)));
    ASSERT_TRUE(dpdk_port_stats(*port, stats));
    port->memory_deregistered(reg_buf.data(), reg_buf.size());
    const uint32_t done = 1;
    send_all(child.fd(), &done, sizeof done);
    EXPECT_EQ(child.wait_exit(20000), 0);
    ASSERT_EQ(recs->size(), size_t(kPackets)) << "every frame arrives, in order";
    for (int k = 0; k < kPackets; ++k) {
        const RxRecord &r = (*recs)[k];
        EXPECT_EQ(r.len, 12 + kPayload + 4);
        EXPECT_EQ(r.hash, sent.hashes[k]) << "packet " << k << " bytes differ";
        EXPECT_EQ(r.src_ip, kParentIp);
        EXPECT_EQ(r.src_port, 4791);
        EXPECT_EQ(r.ip_id, 0);
        EXPECT_EQ(r.ip_frag, 0x4000);
    }
}

} // namespace

TEST(DpdkMemifPort, ArpResolvesAndRegisteredPayloadGoesZeroCopy) {
    const std::string sock = socket_path();
    std::vector<RxRecord> recs;
    DpdkPortStats s;
    exchange("dpdk:memif:" + sock + ",role=server,ip=10.61.0.1", "dpdk:memif:" + sock + ",role=client,ip=10.61.0.2",
             true, 2, &recs, &s);
    if (HasFatalFailure()) return;
    EXPECT_GE(s.arp_requests, 1u) << "the peer was unknown";
    EXPECT_GE(s.tx_unresolved, 1u) << "frames waited for the reply";
    EXPECT_EQ(s.tx_dropped, 0u) << "and none was lost to resolution";
    ASSERT_TRUE(s.multi_seg) << "memif takes chained mbufs";
    EXPECT_EQ(s.tx_zero_copy, uint64_t(kPackets));
    EXPECT_EQ(s.tx_copied, 0u);
    for (auto &r : recs) EXPECT_EQ(r.tos, 2) << "ECT(0) as sent";
}

// A packet whose ICRC the port is to compute (the engine's way on a vdev: fills_icrc) leaves
// as one copied frame with its ICRC right, registered payload or not.
TEST(DpdkMemifPort, PendingIcrcIsComputedWhileThePayloadIsCopied) {
    const std::string sock = socket_path();
    std::vector<RxRecord> recs;
    DpdkPortStats s;
    exchange("dpdk:memif:" + sock + ",role=server,ip=10.61.0.1", "dpdk:memif:" + sock + ",role=client,ip=10.61.0.2",
             true, 2, &recs, &s, true);
    if (HasFatalFailure()) return;
    EXPECT_EQ(s.tx_icrc_filled, uint64_t(kPackets));
    EXPECT_EQ(s.tx_zero_copy, 0u);
    EXPECT_EQ(s.tx_dropped, 0u);
    for (size_t k = 0; k < recs.size(); ++k) EXPECT_TRUE(recs[k].icrc_ok) << "packet " << k;
}

TEST(DpdkMemifPort, StaticNeighboursNeedNoArpAndPlainMemoryIsCopied) {
    const std::string sock = socket_path();
    std::vector<RxRecord> recs;
    DpdkPortStats s;
    exchange("dpdk:memif:" + sock + ",role=server,ip=10.61.0.1,mac=02:00:00:3d:00:01,neigh=10.61.0.2@02:00:00:3d:00:02",
             "dpdk:memif:" + sock + ",role=client,ip=10.61.0.2,mac=02:00:00:3d:00:02,neigh=10.61.0.1@02:00:00:3d:00:01",
             false, 0, &recs, &s);
    if (HasFatalFailure()) return;
    EXPECT_EQ(s.arp_requests, 0u);
    EXPECT_EQ(s.tx_unresolved, 0u);
    EXPECT_EQ(s.tx_zero_copy, 0u) << "payload outside registered memory is copied";
    EXPECT_EQ(s.tx_copied, 0u) << "a copy for want of registration is not a PMD fallback";
}

TEST(DpdkMemifPort, VlanTagAndFixedDscp) {
    const std::string sock = socket_path();
    std::vector<RxRecord> recs;
    DpdkPortStats s;
    exchange("dpdk:memif:" + sock + ",role=server,ip=10.61.0.1,vlan=5",
             "dpdk:memif:" + sock + ",role=client,ip=10.61.0.2,vlan=5,pcp=3,dscp=46", true, 1, &recs, &s);
    if (HasFatalFailure()) return;
    for (auto &r : recs) EXPECT_EQ(r.tos, (46 << 2) | 1) << "DSCP fixed by the port, ECN from the packet";
}

// A port that closes while its peer busy-polls: the peer hears that it is leaving, stops
// polling until the link has cycled, and survives the disconnect (DPDK 22.11's memif
// unmaps the rings under a running burst otherwise); a new peer on the same socket is
// then served as before.
TEST(DpdkMemifPort, ClosingPortWaitsForItsPeerToStopPolling) {
    const auto [server, client] = pair_devices(".leave");
    ibex_status_t st;
    PolledServer survivor(server);
    ASSERT_TRUE(survivor.port) << ibex_last_error();
    constexpr int kRounds = 8;
    int reached = 0;
    for (int round = 0; round < kRounds; ++round) {
        DpdkPortOptions co;
        co.device = client;
        auto leaver = open_dpdk_port(co, &st);
        if (!leaver) {
            ADD_FAILURE() << "round " << round << ": " << ibex_last_error();
            break;
        }
        // Traffic until a frame arrives: the link is up both ways before the close.
        if (survivor.reached_by(*leaver, 1000)) ++reached;
        leaver.reset(); // says it is leaving, waits for the answer, disconnects
    }
    survivor.halt();
    DpdkPortStats s;
    ASSERT_TRUE(dpdk_port_stats(*survivor.port, &s));
    EXPECT_EQ(reached, kRounds) << "every new peer was served";
    EXPECT_EQ(s.peer_leaves, uint64_t(kRounds)) << "each departure was announced and answered";
}

// Both ends closing at once: each says it is leaving while the other does; the server
// yields (answers, then touches nothing) and the client disconnects first. Before, each
// answered the other and both disconnected, and one could still be writing its answer
// into rings the other's disconnect had unmapped (a SIGSEGV inside memif).
TEST(DpdkMemifPort, BothEndsClosingAtOnceSurvive) {
    const auto [server, client] = pair_devices(".both");
    constexpr int kRounds = 8;
    int linked = 0;
    for (int round = 0; round < kRounds; ++round) {
        ibex_status_t st;
        DpdkPortOptions so, co;
        so.device = server;
        co.device = client;
        std::unique_ptr<Port> ends[2];
        ends[0] = open_dpdk_port(so, &st);
        ASSERT_TRUE(ends[0]) << "round " << round << ": " << ibex_last_error();
        ends[1] = open_dpdk_port(co, &st);
        ASSERT_TRUE(ends[1]) << "round " << round << ": " << ibex_last_error();
        std::atomic<int> heard{0};
        std::atomic<bool> go{false};
        std::thread sides[2];
        for (int e = 0; e < 2; ++e) {
            sides[e] = std::thread([&, e] {
                uint8_t bytes[64] = {};
                const TxPacket p = small_frame(bytes, e == 0 ? kParentIp : kChildIp);
                RxPacket pkts[32];
                bool got = false;
                const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
                // Traffic both ways until told to close, so both are mid-poll when they do.
                while (!go.load() && std::chrono::steady_clock::now() < end) {
                    ends[e]->send(std::span<const TxPacket>(&p, 1));
                    if (ends[e]->recv(pkts) > 0 && !got) {
                        got = true;
                        ++heard;
                    }
                }
                ends[e].reset();
            });
        }
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (heard.load() < 2 && std::chrono::steady_clock::now() < end) usleep(200);
        if (heard.load() == 2) ++linked;
        go = true;
        sides[0].join();
        sides[1].join();
    }
    EXPECT_EQ(linked, kRounds) << "both ends heard each other before every close";
}

// The bare server's start and teardown run on EAL's interrupt thread, where memif runs its
// control channel and where the port restarts and closes its own device: started from a
// plain thread, the server once raced the client's reconnect inside the PMD (a segfault,
// one CI run in many, under load).
namespace {
void start_bare_server(void *id) { rte_eth_dev_start(static_cast<uint16_t>(reinterpret_cast<uintptr_t>(id))); }
struct BareServer {
    uint16_t id;
    std::string vdev;
};
void remove_bare_server(void *arg) {
    std::unique_ptr<BareServer> s(static_cast<BareServer *>(arg));
    rte_eth_dev_stop(s->id);
    rte_eth_dev_close(s->id);
    rte_vdev_uninit(s->vdev.c_str());
}
} // namespace

// A client that connects after the server's probe created the socket but before the
// server started: DPDK 22.11's server refuses it ("ID not found") and its client never
// tries again, so the link stayed down and every packet was lost. The port reconnects.
TEST(DpdkMemifPort, ClientRefusedByAnUnstartedServerReconnects) {
    ASSERT_EQ(ensure_eal(), IBEX_OK) << ibex_last_error();
    const std::string sock = socket_path() + ".early";
    unlink(sock.c_str());
    const std::string vdev = "net_memif_early" + std::to_string(getpid());
    ASSERT_EQ(rte_vdev_init(vdev.c_str(), ("role=server,socket=" + sock + ",socket-abstract=no").c_str()), 0);
    uint16_t server_id = 0;
    ASSERT_EQ(rte_eth_dev_get_port_by_name(vdev.c_str(), &server_id), 0);
    rte_mempool *pool = rte_pktmbuf_pool_create(("early" + std::to_string(getpid())).c_str(), 1023, 0, 0,
                                                RTE_MBUF_DEFAULT_BUF_SIZE, static_cast<int>(rte_socket_id()));
    ASSERT_NE(pool, nullptr);
    rte_eth_conf conf{};
    ASSERT_EQ(rte_eth_dev_configure(server_id, 1, 1, &conf), 0);
    ASSERT_EQ(rte_eth_rx_queue_setup(server_id, 0, 256, rte_eth_dev_socket_id(server_id), nullptr, pool), 0);
    ASSERT_EQ(rte_eth_tx_queue_setup(server_id, 0, 256, rte_eth_dev_socket_id(server_id), nullptr), 0);

    // The socket exists, the server is not started: the client's first handshake fails.
    std::thread late_start([&] {
        usleep(100000);
        EXPECT_TRUE(run_on_interrupt_thread(&start_bare_server, reinterpret_cast<void *>(uintptr_t(server_id))));
    });
    ibex_status_t st;
    DpdkPortOptions co;
    co.device = "dpdk:memif:" + sock + ",role=client,ip=10.61.0.2,neigh=10.61.0.1@02:00:00:3d:00:01";
    auto client = open_dpdk_port(co, &st);
    late_start.join();
    ASSERT_TRUE(client) << ibex_last_error();

    uint8_t bytes[64] = {};
    const TxPacket p = small_frame(bytes, kChildIp);
    int received = 0;
    rte_mbuf *burst[32];
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!received && std::chrono::steady_clock::now() < end) {
        client->send(std::span<const TxPacket>(&p, 1));
        usleep(1000);
        const uint16_t n = rte_eth_rx_burst(server_id, 0, burst, 32);
        received += n;
        if (n) rte_pktmbuf_free_bulk(burst, n);
    }
    EXPECT_GT(received, 0) << "the client's frames reach the server once it has started";
    client.reset();
    EXPECT_TRUE(run_on_interrupt_thread(&remove_bare_server, new BareServer{server_id, vdev}));
    rte_mempool_free(pool);
}

// memif joins two ports: a third process's client on the same socket is refused by the
// server, and its open says so instead of succeeding with a link that never comes up.
TEST(DpdkMemifPort, ThirdPortOnASocketGetsAClearError) {
    const std::string base = "dpdk:memif:" + socket_path() + ".three";
    ChildProcess third;
    ASSERT_TRUE(third.start(
        [&](int fd) {
            char go = 0;
            if (!recv_all(fd, &go, 1, 20000)) return 2;
            ibex_status_t st;
            DpdkPortOptions o;
            o.device = base + ",role=client,ip=10.61.0.3";
            auto port = open_dpdk_port(o, &st);
            char msg[512] = {};
            std::snprintf(msg, sizeof msg, "%d|%s", port ? 0 : int(st), port ? "" : ibex_last_error());
            return send_all(fd, msg, sizeof msg) ? 0 : 1;
        },
        40));
    ibex_status_t st;
    DpdkPortOptions so, co;
    so.device = base + ",role=server,ip=10.61.0.1";
    co.device = base + ",role=client,ip=10.61.0.2";
    auto server = open_dpdk_port(so, &st);
    ASSERT_TRUE(server) << ibex_last_error();
    auto client = open_dpdk_port(co, &st);
    ASSERT_TRUE(client) << ibex_last_error();
    const char go = 1;
    ASSERT_TRUE(send_all(third.fd(), &go, 1));
    char msg[512] = {};
    ASSERT_TRUE(recv_all(third.fd(), msg, sizeof msg, 30000));
    const std::string m(msg);
    EXPECT_EQ(m.substr(0, m.find('|')), std::to_string(int(IBEX_ERR_REMOTE))) << m;
    EXPECT_NE(m.find("did not accept this client"), std::string::npos) << m;
    EXPECT_NE(m.find("exactly two ports"), std::string::npos) << m;
    EXPECT_EQ(third.wait_exit(10000), 0);
}

// Size and resident bytes of this process's memif region mappings (/proc/self/smaps).
std::pair<size_t, size_t> memif_region_size_and_rss() {
    FILE *f = std::fopen("/proc/self/smaps", "re");
    if (!f) return {0, 0};
    size_t size = 0, rss = 0;
    bool in_region = false;
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
        size_t kb = 0;
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) // a mapping's first line
            in_region = std::strstr(line, "/memfd:memif_region_") != nullptr;
        else if (in_region && std::sscanf(line, "Size: %zu kB", &kb) == 1)
            size += kb * 1024;
        else if (in_region && std::sscanf(line, "Rss: %zu kB", &kb) == 1)
            rss += kb * 1024;
    }
    std::fclose(f);
    return {size, rss};
}

// Once the link is up, the memif rings are mapped in whole (prefault.h): without that, the
// first pass over a ring page-faults per buffer and a ping-pong ran ~10x slower for its
// first ~2000 round trips.
TEST(DpdkMemifPort, LinkedRingsArePrefaulted) {
    std::unique_ptr<Port> server, client;
    ASSERT_TRUE(open_pair(".warm", &server, &client));
    uint8_t bytes[64] = {};
    const TxPacket p = small_frame(bytes, kChildIp);
    RxPacket pkts[32];
    int got = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!got && std::chrono::steady_clock::now() < end) {
        client->recv(pkts); // the first receive after link-up warms the client's side
        client->send(std::span<const TxPacket>(&p, 1));
        got = server->recv(pkts);
    }
    ASSERT_GT(got, 0) << "no frame crossed the link";
    const auto [size, rss] = memif_region_size_and_rss();
    ASSERT_GT(size, 0u) << "no memif region mapped";
    // Both ends of this process map the client's regions; each mapping is resident in whole.
    EXPECT_EQ(rss, size) << "memif regions resident: " << rss / 1024 << " of " << size / 1024 << " KiB";
}

// The server's transmit ring (server to client) has room only for what the client has
// handed back, and a client hands slots back when it receives. A client that had not yet
// received once left the server no room at all: under load, its progress thread could
// start late, the server's first frames waited out the full-ring bound and were dropped,
// and RC took a go-back-N (seen as a PSN-sequence NAK in dpdk.PsnWrap.* once in 50 runs
// on a loaded host). A client port now receives once as it opens.
TEST(DpdkMemifPort, ServerSendsBeforeTheClientFirstReceives) {
    std::unique_ptr<Port> server, client;
    ASSERT_TRUE(open_pair(".first", &server, &client));
    constexpr int kFrames = 256;
    uint8_t bytes[64] = {};
    for (int i = 0; i < kFrames; ++i) {
        bytes[0] = uint8_t(i);
        const TxPacket p = small_frame(bytes, kParentIp);
        server->send(std::span<const TxPacket>(&p, 1));
    }
    DpdkPortStats s;
    ASSERT_TRUE(dpdk_port_stats(*server, &s));
    EXPECT_EQ(s.tx_dropped, 0u) << "frames sent before the client's first receive were dropped";
    RxPacket pkts[32];
    int got = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got < kFrames && std::chrono::steady_clock::now() < end) {
        const int n = client->recv(pkts);
        for (int i = 0; i < n; ++i, ++got) ASSERT_EQ(pkts[i].data[0], uint8_t(got)) << "frame " << got << " out of order";
        if (!n) usleep(100);
    }
    EXPECT_EQ(got, kFrames);
}

// A server and a client opened at the same moment, each in a process of its own (two
// ranks started together). DPDK 22.11's server listens from its probe on but answers only
// once started, and refused for good a client that connected in between: about one such
// pair in three, before ibex's server listened under a name of its own until started (the
// client waits for the socket's file). The client here never restarts, so a refusal would
// leave it down: every round must link.
TEST(DpdkMemifPort, AClientOpenedWithItsServerIsNotRefused) {
    constexpr int kRounds = 6;
    int linked = 0;
    for (int round = 0; round < kRounds; ++round) {
        const std::string device = "dpdk:memif:" + socket_path() + ".together" + std::to_string(round);
        ChildProcess server, client;
        ASSERT_TRUE(server.start(
            [&](int fd) {
                char go;
                if (!recv_all(fd, &go, 1, 20000)) return 2;
                ibex_status_t st;
                DpdkPortOptions o;
                o.device = device + ",role=server";
                auto port = open_dpdk_port(o, &st);
                if (!port) return 3;
                RxPacket pkts[32];
                for (int i = 0; i < 20000; ++i) { // serve (answer the client's leaving) until told
                    port->recv(pkts);
                    pollfd p{fd, POLLIN, 0};
                    if (poll(&p, 1, 1) > 0) break;
                }
                return 0;
            },
            40));
        ASSERT_TRUE(client.start(
            [&](int fd) {
                char go;
                if (!recv_all(fd, &go, 1, 20000)) return 2;
                setenv("IBEX_DPDK_MEMIF_RETRY_MS", "5000", 1); // no restart within the link wait
                ibex_status_t st;
                DpdkPortOptions o;
                o.device = device + ",role=client";
                auto port = open_dpdk_port(o, &st);
                const int32_t ok = port ? 1 : 0;
                if (!send_all(fd, &ok, sizeof ok)) return 3;
                recv_all(fd, &go, 1, 20000);
                return 0;
            },
            40));
        const char go = 1;
        ASSERT_TRUE(send_all(server.fd(), &go, 1) && send_all(client.fd(), &go, 1));
        int32_t ok = 0;
        ASSERT_TRUE(recv_all(client.fd(), &ok, sizeof ok, 20000));
        linked += ok;
        send_all(client.fd(), &go, 1);
        EXPECT_EQ(client.wait_exit(20000), 0);
        send_all(server.fd(), &go, 1);
        EXPECT_EQ(server.wait_exit(20000), 0);
    }
    EXPECT_EQ(linked, kRounds) << "clients refused by a server that had not started yet";
}

// A server killed between its probe and its start leaves the name it listened under; the
// next server of that socket removes such names whose process is gone, and nothing else.
TEST(DpdkMemifPort, AServerRemovesTheNamesOfServersKilledWhileStarting) {
    const std::string sock = socket_path() + ".litter";
    const pid_t dead = fork();
    ASSERT_GE(dead, 0);
    if (dead == 0) _exit(0);
    ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
    const std::string stale = sock + "." + std::to_string(dead) + ".0.starting";
    const std::vector<std::string> kept = {
        sock + "." + std::to_string(getpid()) + ".77.starting", // a live process's
        sock + ".x.0.starting", sock + ".1.2.3.starting",       // not names a server makes
        sock + "x." + std::to_string(dead) + ".0.starting",     // another socket's
    };
    for (const std::string &f : kept) ASSERT_TRUE(std::ofstream(f).good()) << f;
    ASSERT_TRUE(std::ofstream(stale).good());
    ibex_status_t st;
    DpdkPortOptions o;
    o.device = "dpdk:memif:" + sock + ",role=server";
    auto server = open_dpdk_port(o, &st);
    ASSERT_TRUE(server) << ibex_last_error();
    EXPECT_NE(access(stale.c_str(), F_OK), 0) << stale << " was left";
    for (const std::string &f : kept) {
        EXPECT_EQ(access(f.c_str(), F_OK), 0) << f << " was removed";
        unlink(f.c_str());
    }
    struct stat sst {};
    EXPECT_TRUE(stat(sock.c_str(), &sst) == 0 && S_ISSOCK(sst.st_mode)) << "the server's socket has its name";
}

// A client whose link is slow to come up restarts its device on EAL's interrupt thread
// (see ClientRefusedByAnUnstartedServerReconnects). Here it restarts after 1 ms, so some
// rounds restart while the server's handshake runs, and the client must still link up
// each round. Stop and start used to run as one request on that thread: the stop closed
// the control socket, the start opened the next under the same descriptor number, and a
// readiness of the old socket still in the thread's batch ran the new socket's handler,
// whose blocking receive waited for a server only that thread could run. With six of
// these processes at once on 2 cores, that hung the interrupt thread in 30 runs of 30.
TEST(DpdkMemifPort, ClientThatRestartsWhileLinkingStillLinks) {
    const auto [server_dev, client_dev] = pair_devices(".restart");
    ibex_status_t st;
    PolledServer server(server_dev);
    ASSERT_TRUE(server.port) << ibex_last_error();
    setenv("IBEX_DPDK_MEMIF_RETRY_MS", "1", 1);
    uint64_t restarts = 0;
    int rounds = 0;
    constexpr int kMaxRounds = 40, kEnoughRestarts = 4;
    for (; rounds < kMaxRounds && restarts < kEnoughRestarts; ++rounds) {
        DpdkPortOptions co;
        co.device = client_dev;
        auto client = open_dpdk_port(co, &st);
        if (!client) {
            ADD_FAILURE() << "round " << rounds << ": " << ibex_last_error();
            break;
        }
        DpdkPortStats cs;
        ASSERT_TRUE(dpdk_port_stats(*client, &cs));
        restarts += cs.memif_reconnects;
        EXPECT_TRUE(server.reached_by(*client, 500))
            << "round " << rounds << ": no frame crossed after " << cs.memif_reconnects << " restarts";
    }
    unsetenv("IBEX_DPDK_MEMIF_RETRY_MS");
    server.halt();
    std::printf("%llu restarts in %d rounds\n", (unsigned long long)restarts, rounds);
    if (!restarts) GTEST_SKIP() << "every link came up within 1 ms in " << rounds << " rounds: no restart was exercised";
}

// A server by name replaces a stale socket file left by a server that died, and refuses
// a socket that a live server holds.
TEST(DpdkMemifPort, NamedServerTakesOverAStaleSocketAndRefusesALiveOne) {
    const std::string sock = socket_path() + ".stale";
    {
        // A socket file nobody listens on: what a killed server leaves behind.
        const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        ASSERT_GE(fd, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
        unlink(sock.c_str());
        ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
        close(fd);
    }
    ibex_status_t st;
    DpdkPortOptions so;
    so.device = "dpdk:memif:" + sock + ",role=server,ip=10.61.0.1";
    auto server = open_dpdk_port(so, &st);
    ASSERT_TRUE(server) << ibex_last_error();
    auto second = open_dpdk_port(so, &st);
    EXPECT_FALSE(second);
    EXPECT_EQ(st, IBEX_ERR_ADDRESS_IN_USE);
    EXPECT_NE(std::string(ibex_last_error()).find("another process serves"), std::string::npos) << ibex_last_error();
}

TEST(DpdkMemifPort, BadEalArgumentsGiveAClearError) {
    ChildProcess child;
    ASSERT_TRUE(child.start(
        [](int fd) {
            setenv("IBEX_DPDK_ARGS", "--no-such-eal-option", 1);
            ibex_context_t *ctx = nullptr;
            const ibex_status_t st = ibex_open_device("dpdk:memif:/tmp/ibex-never.sock", nullptr, &ctx);
            char msg[512] = {};
            std::snprintf(msg, sizeof msg, "%d|%s", int(st), ibex_last_error());
            return send_all(fd, msg, sizeof msg) ? 0 : 1;
        },
        30));
    char msg[512];
    ASSERT_TRUE(recv_all(child.fd(), msg, sizeof msg, 20000));
    EXPECT_EQ(child.wait_exit(10000), 0);
    const std::string m(msg);
    EXPECT_EQ(m.substr(0, m.find('|')), std::to_string(IBEX_ERR_SYSTEM)) << m;
    EXPECT_NE(m.find("EAL did not start"), std::string::npos) << m;
    EXPECT_NE(m.find("IBEX_DPDK_ARGS"), std::string::npos) << m;
}

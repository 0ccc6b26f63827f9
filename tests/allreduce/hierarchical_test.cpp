// Hierarchical collectives on real ranks across "hosts": each host is a network namespace
// joined to the others by a veth on one bridge, so its ranks share shm and reach the
// other hosts over udp on their veth. For layouts 2x2, 2x3, 3x2, 4x1 (hosts x ranks) and
// an uneven 3+1 (where hierarchical falls back to the flat algorithms): the whole
// correctness matrix (every collective, type and op, in and out of place, same bits on
// every rank) with IBEX_ALGO=hierarchical, a multi-slice allreduce, and the transport each
// peer used (by ibex_comm_peer_device and each context's byte counters). Then IBEX_SHM=0,
// and a rank killed mid-allreduce on another host and on the same host.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "tests/allreduce/killed_rank.h"
#include "tests/allreduce/matrix/matrix.h"
#include "tests/support/bridged_hosts.h"

namespace {

using ibex::test::BridgedHosts;
using ibex::test::RankCtx;

struct Layout {
    std::vector<int> per_host; // ranks on each host; ranks are numbered host by host
    const char *name;
};

std::vector<int> hosts_of(const Layout &l) {
    std::vector<int> h;
    for (size_t i = 0; i < l.per_host.size(); ++i) h.insert(h.end(), static_cast<size_t>(l.per_host[i]), static_cast<int>(i));
    return h;
}

// Moves the rank into its host and creates its communicator on that host's veth.
ibex_status_t init_on_host(RankCtx &ctx, const BridgedHosts &hosts, const std::vector<int> &host_of, const char *algo,
                           int timeout_ms, ibex_comm_t **comm) {
    const int h = host_of[static_cast<size_t>(ctx.rank)];
    if (!ibex::test::enter_netns(hosts.ns(h))) {
        ctx.say("rank %d: cannot enter %s", ctx.rank, hosts.ns(h).c_str());
        return IBEX_ERR_SYSTEM;
    }
    // Ranks of one host share its veth address: each takes its own UDP port.
    const std::string device = "udp:" + hosts.ifname(h) + ":" + std::to_string(4791 + ctx.rank);
    ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
    cfg.device = device.c_str();
    cfg.algo = algo;
    cfg.timeout_ms = timeout_ms;
    return ibex_comm_init_rank(comm, ctx.nranks, &ctx.id, ctx.rank, &cfg);
}

// Which transport each connected peer uses: shm exactly for the ranks of this host.
int check_transports(RankCtx &ctx, ibex_comm_t *comm, const std::vector<int> &host_of, bool shm_on, int *shm_peers) {
    const int me = ctx.rank;
    *shm_peers = 0;
    for (int p = 0; p < ctx.nranks; ++p) {
        const char *dev = ibex_comm_peer_device(comm, p);
        if (p == me || !dev) continue;
        const bool same = host_of[static_cast<size_t>(p)] == host_of[static_cast<size_t>(me)];
        const bool shm = std::strcmp(dev, "shm") == 0;
        RANK_CHECK(ctx, shm == (same && shm_on), "rank %d reaches rank %d (%s host) over %s", me, p,
                   same ? "same" : "other", dev);
        RANK_CHECK(ctx, shm || std::strncmp(dev, "udp:", 4) == 0, "rank %d reaches rank %d over %s", me, p, dev);
        *shm_peers += shm;
    }
    return 0;
}

// A multi-slice allreduce (exact integer sums) after the matrix's small counts.
int check_large(RankCtx &ctx, ibex_comm_t *comm) {
    const size_t count = 300001;
    std::vector<int32_t> x(count);
    for (size_t i = 0; i < count; ++i) x[i] = ctx.rank * 7 + static_cast<int32_t>(i % 13);
    RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), x.data(), count, IBEX_I32, IBEX_SUM, comm, nullptr));
    const int n = ctx.nranks;
    for (size_t i = 0; i < count; ++i) {
        const int32_t want = 7 * n * (n - 1) / 2 + n * static_cast<int32_t>(i % 13);
        RANK_CHECK(ctx, x[i] == want, "rank %d: element %zu is %d, want %d", ctx.rank, i, x[i], want);
    }
    return 0;
}

int layout_body(RankCtx &ctx, const BridgedHosts &hosts, const Layout &l) {
    const std::vector<int> host_of = hosts_of(l);
    const int h = host_of[static_cast<size_t>(ctx.rank)];
    const bool even = std::all_of(l.per_host.begin(), l.per_host.end(), [&](int k) { return k == l.per_host[0]; });
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_on_host(ctx, hosts, host_of, "hierarchical", 60000, &comm));
    ibex_comm_topology_t t{};
    t.size = sizeof t;
    RANK_CHECK_OK(ctx, ibex_comm_query_topology(comm, &t));
    RANK_CHECK(ctx, t.hosts == hosts.hosts(), "rank %d sees %d hosts", ctx.rank, t.hosts);
    RANK_CHECK(ctx, t.local_ranks == l.per_host[static_cast<size_t>(h)], "rank %d sees %d local ranks", ctx.rank,
               t.local_ranks);
    RANK_CHECK(ctx, t.ranks_per_host == (even ? l.per_host[0] : 0), "rank %d: ranks_per_host %d", ctx.rank,
               t.ranks_per_host);
    // Hierarchical and rhd are timed where a hierarchical allreduce has phase boundaries
    // (even hosts of two ranks or more), and nowhere else: their fits stay within bounds
    // there and untouched elsewhere.
    const bool timed = even && hosts.hosts() > 1 && l.per_host[0] > 1;
    for (double join : {t.hier_join_us, t.rhd_join_us})
        RANK_CHECK(ctx, std::isfinite(join) && join >= 0 && (timed || join == 0), "rank %d: join %g us", ctx.rank, join);
    for (double scale : {t.hier_scale, t.rhd_scale})
        RANK_CHECK(ctx, timed ? scale >= 0.5 && scale <= 2.0 : scale == 1.0, "rank %d: scale %g", ctx.rank, scale);
    ctx.say("rank %d: hierarchical x%.2f + %.1f us per boundary, rhd x%.2f + %.1f us per change", ctx.rank,
            t.hier_scale, t.hier_join_us, t.rhd_scale, t.rhd_join_us);
    const std::string algo = ibex_comm_allreduce_algo(comm, 1 << 20);
    RANK_CHECK(ctx, (algo == "hierarchical") == even, "rank %d: forced hierarchical gives %s", ctx.rank, algo.c_str());
    int shm_peers = 0;
    if (int rc = check_transports(ctx, comm, host_of, true, &shm_peers); rc) return rc;
    RANK_CHECK(ctx, shm_peers == t.shm_peers && (shm_peers > 0) == (t.local_ranks > 1), "rank %d: %d shm peers", ctx.rank,
               shm_peers);
    if (ibex::test::matrix::run_matrix(ctx, comm) != 0) {
        ibex_comm_abort(comm);
        return 12;
    }
    if (int rc = check_large(ctx, comm); rc) return rc;
    // Bytes moved over each transport: shm only inside a host, the network only across.
    RANK_CHECK_OK(ctx, ibex_comm_query_topology(comm, &t));
    ctx.say("rank %d: %llu bytes over shm, %llu over udp", ctx.rank, static_cast<unsigned long long>(t.shm_tx_bytes),
            static_cast<unsigned long long>(t.net_tx_bytes));
    RANK_CHECK(ctx, (t.shm_tx_bytes > 0) == (t.local_ranks > 1), "rank %d: %llu bytes over shm", ctx.rank,
               static_cast<unsigned long long>(t.shm_tx_bytes));
    RANK_CHECK(ctx, t.net_tx_bytes > 0, "rank %d sent nothing over udp", ctx.rank);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

class HierarchicalHosts : public ::testing::TestWithParam<Layout> {};

TEST_P(HierarchicalHosts, MatrixAndTransports) {
    const Layout &l = GetParam();
    BridgedHosts hosts;
    std::string why;
    if (!hosts.create(static_cast<int>(l.per_host.size()), &why)) GTEST_SKIP() << why;
    ::setenv("IBEX_BOOTSTRAP_ADDR", hosts.bridge_ip().c_str(), 1);
    const int n = std::accumulate(l.per_host.begin(), l.per_host.end(), 0);
    const auto out = ibex::test::run_ranks(n, [&](RankCtx &ctx) { return layout_body(ctx, hosts, l); }, 240);
    ::unsetenv("IBEX_BOOTSTRAP_ADDR");
    ibex::test::expect_all_passed(out);
    for (const auto &o : out) // the transport lines, not the result hashes
        for (size_t at = o.text.find("bytes over"); at != std::string::npos; at = o.text.find("bytes over", at + 1))
            std::printf("%s\n", o.text.substr(o.text.rfind('\n', at) + 1, o.text.find('\n', at) - o.text.rfind('\n', at) - 1).c_str());
    ibex::test::matrix::expect_same_bits(out, n);
}

INSTANTIATE_TEST_SUITE_P(Layouts, HierarchicalHosts,
                         ::testing::Values(Layout{{2, 2}, "2x2"}, Layout{{3, 3}, "2x3"}, Layout{{2, 2, 2}, "3x2"},
                                           Layout{{1, 1, 1, 1}, "4x1"}, Layout{{3, 1}, "uneven_3_1"}),
                         [](const auto &info) { return std::string(info.param.name); });

// Without namespaces (no root needed): IBEX_HOST_ID names each rank's host, every rank on
// udp:lo; the same matrix and transport checks.
TEST(HierarchicalHostId, MatrixOnNamedHosts) {
    for (const Layout &l : {Layout{{2, 2}, "2x2"}, Layout{{2, 2, 2}, "3x2"}, Layout{{3, 1}, "uneven"}}) {
        SCOPED_TRACE(l.name);
        const std::vector<int> host_of = hosts_of(l);
        const int n = static_cast<int>(host_of.size());
        const auto out = ibex::test::run_ranks(n, [&](RankCtx &ctx) {
            ::setenv("IBEX_HOST_ID", ("host" + std::to_string(host_of[static_cast<size_t>(ctx.rank)])).c_str(), 1);
            ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
            cfg.device = "udp:lo";
            cfg.algo = "hierarchical";
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, &cfg));
            int shm_peers = 0;
            if (int rc = check_transports(ctx, comm, host_of, true, &shm_peers); rc) return rc;
            if (ibex::test::matrix::run_matrix(ctx, comm) != 0) {
                ibex_comm_abort(comm);
                return 12;
            }
            if (int rc = check_large(ctx, comm); rc) return rc;
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        }, 120);
        ibex::test::expect_all_passed(out);
        ibex::test::matrix::expect_same_bits(out, n);
    }
}

// No device named (no config->device, no IBEX_DEVICE): the first listed is udp:lo, which
// cannot reach another host, so a communicator across hosts takes the first listed device
// that can (here each host's veth). Two ranks of a host on one udp device (found so, or
// named without a port) each take their own UDP port. Naming udp:lo across real hosts is
// refused with a message that says what to name instead.
TEST(HierarchicalHosts, DefaultDeviceAcrossHostsLeavesLoopback) {
    BridgedHosts hosts;
    std::string why;
    if (!hosts.create(2, &why)) GTEST_SKIP() << why;
    ::setenv("IBEX_BOOTSTRAP_ADDR", hosts.bridge_ip().c_str(), 1);
    const std::vector<int> host_of = {0, 0, 1, 1};
    for (const char *mode : {"default", "veth", "loopback"}) {
        SCOPED_TRACE(mode);
        const auto out = ibex::test::run_ranks(4, [&](RankCtx &ctx) {
            ::unsetenv("IBEX_DEVICE");
            ::unsetenv("IBEX_HOST_ID");
            const int h = host_of[static_cast<size_t>(ctx.rank)];
            RANK_CHECK(ctx, ibex::test::enter_netns(hosts.ns(h)), "rank %d: cannot enter %s", ctx.rank,
                       hosts.ns(h).c_str());
            const std::string want = "udp:" + hosts.ifname(h);
            const std::string m = mode;
            ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
            cfg.device = m == "default" ? nullptr : m == "veth" ? want.c_str() : "udp:lo";
            cfg.timeout_ms = 30000;
            ibex_comm_t *comm = nullptr;
            const ibex_status_t st = ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, &cfg);
            if (m == "loopback") {
                const std::string msg = ibex_last_error();
                RANK_CHECK(ctx, st == IBEX_ERR_INVALID_ARGUMENT && msg.find("reaches only this machine") != std::string::npos &&
                                    msg.find("2 hosts") != std::string::npos,
                           "rank %d: udp:lo across hosts gave %s: %s", ctx.rank, ibex_strerror(st), msg.c_str());
                return 0;
            }
            RANK_CHECK_OK(ctx, st);
            for (int p = 0; p < ctx.nranks; ++p) {
                const char *dev = ibex_comm_peer_device(comm, p);
                if (p == ctx.rank || !dev) continue;
                const bool same = host_of[static_cast<size_t>(p)] == h;
                RANK_CHECK(ctx, same ? std::strcmp(dev, "shm") == 0 : std::string(dev).rfind(want, 0) == 0,
                           "rank %d reaches rank %d over %s (want %s)", ctx.rank, p, dev, same ? "shm" : want.c_str());
            }
            if (int rc = check_large(ctx, comm); rc) return rc;
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        }, 120);
        ibex::test::expect_all_passed(out);
    }
    ::unsetenv("IBEX_BOOTSTRAP_ADDR");
}

// IBEX_SHM=0: every peer over udp, nothing over shm, results still right.
TEST(HierarchicalHostsNoShm, EveryPeerOverTheNetwork) {
    BridgedHosts hosts;
    std::string why;
    if (!hosts.create(2, &why)) GTEST_SKIP() << why;
    ::setenv("IBEX_BOOTSTRAP_ADDR", hosts.bridge_ip().c_str(), 1);
    const std::vector<int> host_of = {0, 0, 1, 1};
    const auto out = ibex::test::run_ranks(4, [&](RankCtx &ctx) {
        ::setenv("IBEX_SHM", "0", 1);
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, init_on_host(ctx, hosts, host_of, "hierarchical", 60000, &comm));
        int shm_peers = 0;
        if (int rc = check_transports(ctx, comm, host_of, false, &shm_peers); rc) return rc;
        if (int rc = check_large(ctx, comm); rc) return rc;
        ibex_comm_topology_t t{};
        t.size = sizeof t;
        RANK_CHECK_OK(ctx, ibex_comm_query_topology(comm, &t));
        RANK_CHECK(ctx, t.shm_peers == 0 && t.shm_tx_bytes == 0 && t.net_tx_bytes > 0,
                   "rank %d: %d shm peers, %llu bytes over shm", ctx.rank, t.shm_peers,
                   static_cast<unsigned long long>(t.shm_tx_bytes));
        RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
        return 0;
    }, 120);
    ::unsetenv("IBEX_BOOTSTRAP_ADDR");
    ibex::test::expect_all_passed(out);
}

// IBEX_DEVICE=rail: each local rank opens the NIC ibex_topo_bind gives it. Every host has
// the two NICs of a topology fixture (numa_unknown.xml: local rank 0 binds NIC0,
// enp4s0np0; local rank 1 NIC1, enp130s0np0) as veths on the bridge, so each rail crosses
// on its own interface: the peer devices name it, and the allreduce is right.
TEST(HierarchicalRails, EachLocalRankCrossesOnItsOwnNic) {
    BridgedHosts hosts;
    std::string why;
    if (!hosts.create(2, &why)) GTEST_SKIP() << why;
    const char *nic[2] = {"enp4s0np0", "enp130s0np0"};
    for (int h = 0; h < 2; ++h)
        for (const char *name : nic)
            if (!hosts.add_nic(h, name, &why)) GTEST_SKIP() << why;
    ::setenv("IBEX_BOOTSTRAP_ADDR", hosts.bridge_ip().c_str(), 1);
    const std::string fixture = std::string(IBEX_TEST_DATA_DIR) + "/topology/numa_unknown.xml";
    const std::vector<int> host_of = {0, 0, 1, 1};
    const auto out = ibex::test::run_ranks(4, [&](RankCtx &ctx) {
        const int h = host_of[static_cast<size_t>(ctx.rank)], local = ctx.rank % 2;
        RANK_CHECK(ctx, ibex::test::enter_netns(hosts.ns(h)), "rank %d: cannot enter %s", ctx.rank, hosts.ns(h).c_str());
        ::setenv("IBEX_TOPO_FILE", fixture.c_str(), 1);
        ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
        cfg.device = "rail";
        cfg.algo = "hierarchical";
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, &cfg));
        const std::string want = std::string("udp:") + nic[local] + ":" + std::to_string(4791 + local);
        for (int p = 0; p < ctx.nranks; ++p) {
            const char *dev = ibex_comm_peer_device(comm, p);
            if (p == ctx.rank || !dev || host_of[static_cast<size_t>(p)] == h) continue;
            RANK_CHECK(ctx, want == dev, "rank %d (local %d) reaches rank %d over %s, want %s", ctx.rank, local, p, dev,
                       want.c_str());
        }
        if (int rc = check_large(ctx, comm); rc) return rc;
        RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
        return 0;
    }, 120);
    ::unsetenv("IBEX_BOOTSTRAP_ADDR");
    ibex::test::expect_all_passed(out);
}

// A rail spec that is not one, or a topology without a NIC (no_nic.xml), is refused with
// the reason, on every rank.
TEST(HierarchicalRails, BadSpecOrNoNicIsAClearError) {
    const std::string fixture = std::string(IBEX_TEST_DATA_DIR) + "/topology/no_nic.xml";
    struct Case {
        const char *device;
        ibex_status_t want;
        const char *says;
    };
    for (const Case &k : {Case{"rail:ib", IBEX_ERR_INVALID_ARGUMENT, "rail:udp"},
                          Case{"rail", IBEX_ERR_NO_DEVICE, "no_nic.xml) has no NIC"}}) {
        SCOPED_TRACE(k.device);
        const auto out = ibex::test::run_ranks(2, [&](RankCtx &ctx) {
            ::setenv("IBEX_TOPO_FILE", fixture.c_str(), 1);
            ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
            cfg.device = k.device;
            ibex_comm_t *comm = nullptr;
            const ibex_status_t st = ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, &cfg);
            RANK_CHECK(ctx, st == k.want, "rank %d: %s gave %s: %s", ctx.rank, k.device, ibex_strerror(st),
                       ibex_last_error());
            RANK_CHECK(ctx, std::strstr(ibex_last_error(), k.says) != nullptr, "rank %d: \"%s\"", ctx.rank,
                       ibex_last_error());
            return 0;
        }, 60);
        ibex::test::expect_all_passed(out);
    }
}

// A rank killed in the middle of a hierarchical allreduce: the others get an error well
// within the timeout, whether the victim was their shm peer or on another host.
void killed_across_hosts(int victim) {
    BridgedHosts hosts;
    std::string why;
    if (!hosts.create(2, &why)) GTEST_SKIP() << why;
    ::setenv("IBEX_BOOTSTRAP_ADDR", hosts.bridge_ip().c_str(), 1);
    const std::vector<int> host_of = {0, 0, 1, 1};
    ibex::test::check_killed(4, victim, [&](RankCtx &ctx, ibex_comm_t **comm, int timeout_ms) {
        return init_on_host(ctx, hosts, host_of, "hierarchical", timeout_ms, comm);
    });
    ::unsetenv("IBEX_BOOTSTRAP_ADDR");
}

TEST(HierarchicalHostsFailure, RankOnAnotherHostKilled) { killed_across_hosts(3); }
TEST(HierarchicalHostsFailure, RankOnTheSameHostKilled) { killed_across_hosts(1); }

} // namespace

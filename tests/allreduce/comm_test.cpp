// The communicator on real ranks: the other collectives (with roots and in place),
// several operations queued at once and finished through requests, registration, split,
// and argument errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sys/resource.h>
#include <thread>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/ranks.h"

namespace {

using ibex::test::RankCtx;

int32_t val(int rank, size_t i) { return static_cast<int32_t>(rank * 1000 + static_cast<int>(i % 997)); }

int collectives_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    int rank = -1, size = -1;
    RANK_CHECK_OK(ctx, ibex_comm_rank(comm, &rank));
    RANK_CHECK_OK(ctx, ibex_comm_size(comm, &size));
    RANK_CHECK(ctx, rank == ctx.rank && size == ctx.nranks, "rank/size %d/%d", rank, size);
    const int n = ctx.nranks, r = ctx.rank;
    const size_t m = 1001;
    int64_t sum_ranks = 0;
    for (int q = 0; q < n; ++q) sum_ranks += q;

    // reduce_scatter, out of place and in place (recvbuf = sendbuf + rank * m).
    for (bool in_place : {false, true}) {
        std::vector<int32_t> send(m * n), recv(m);
        for (size_t i = 0; i < send.size(); ++i) send[i] = val(r, i);
        int32_t *out = in_place ? send.data() + static_cast<size_t>(r) * m : recv.data();
        RANK_CHECK_OK(ctx, ibex_reduce_scatter(send.data(), out, m, IBEX_I32, IBEX_SUM, comm, nullptr));
        for (size_t i = 0; i < m; ++i) {
            const size_t g = static_cast<size_t>(r) * m + i;
            const int64_t want = 1000 * sum_ranks + static_cast<int64_t>(n) * static_cast<int64_t>(g % 997);
            RANK_CHECK(ctx, out[i] == want, "reduce_scatter %d [%zu] = %d want %lld", in_place, i, out[i],
                       static_cast<long long>(want));
        }
    }
    // allgather, out of place and in place (sendbuf = recvbuf + rank * m).
    for (bool in_place : {false, true}) {
        std::vector<int32_t> send(m), recv(m * n, -7);
        for (size_t i = 0; i < m; ++i) send[i] = val(r, i);
        const int32_t *src = send.data();
        if (in_place) {
            std::memcpy(recv.data() + static_cast<size_t>(r) * m, send.data(), m * 4);
            src = recv.data() + static_cast<size_t>(r) * m;
        }
        RANK_CHECK_OK(ctx, ibex_allgather(src, recv.data(), m, IBEX_I32, comm, nullptr));
        for (int q = 0; q < n; ++q)
            for (size_t i = 0; i < m; ++i)
                RANK_CHECK(ctx, recv[static_cast<size_t>(q) * m + i] == val(q, i), "allgather %d [%d][%zu]", in_place, q, i);
    }
    // broadcast and reduce from every root.
    for (int root = 0; root < n; ++root) {
        std::vector<int32_t> buf(m, -1), src(m);
        for (size_t i = 0; i < m; ++i) src[i] = val(root, i);
        RANK_CHECK_OK(ctx, ibex_broadcast(r == root ? src.data() : nullptr, buf.data(), m, IBEX_I32, root, comm, nullptr));
        for (size_t i = 0; i < m; ++i) RANK_CHECK(ctx, buf[i] == val(root, i), "broadcast root %d [%zu]", root, i);
        std::vector<int32_t> mine(m), got(m, -1);
        for (size_t i = 0; i < m; ++i) mine[i] = val(r, i);
        RANK_CHECK_OK(ctx, ibex_reduce(mine.data(), r == root ? got.data() : nullptr, m, IBEX_I32, IBEX_MAX, root,
                                       comm, nullptr));
        if (r == root)
            for (size_t i = 0; i < m; ++i) RANK_CHECK(ctx, got[i] == val(n - 1, i), "reduce root %d [%zu]", root, i);
    }
    RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));

    // Many operations in flight at once: they run in order; test() then wait().
    constexpr int kOps = 6;
    std::vector<std::vector<float>> bufs(kOps, std::vector<float>(333));
    ibex_request_t *reqs[kOps];
    for (int k = 0; k < kOps; ++k) {
        for (size_t i = 0; i < bufs[k].size(); ++i) bufs[k][i] = static_cast<float>(k + r);
        RANK_CHECK_OK(ctx, ibex_allreduce(bufs[k].data(), bufs[k].data(), bufs[k].size(), IBEX_F32, IBEX_AVG, comm, &reqs[k]));
    }
    int done = 0;
    for (int spins = 0; spins < 100000 && !done; ++spins) RANK_CHECK_OK(ctx, ibex_test(reqs[kOps - 1], &done));
    for (int k = 0; k < kOps - 1; ++k) RANK_CHECK_OK(ctx, ibex_wait(reqs[k]));
    if (!done) RANK_CHECK_OK(ctx, ibex_wait(reqs[kOps - 1]));
    for (int k = 0; k < kOps; ++k) {
        const float want = static_cast<float>(k) + static_cast<float>(sum_ranks) / static_cast<float>(n);
        RANK_CHECK(ctx, bufs[k][0] == want && bufs[k][332] == want, "avg op %d = %g want %g", k, bufs[k][0], want);
    }

    // Registered ahead of time, then deregistered; the collective still works after.
    std::vector<double> d(4096, 1.0 + r);
    RANK_CHECK_OK(ctx, ibex_comm_register(comm, d.data(), d.size() * 8));
    RANK_CHECK_OK(ctx, ibex_allreduce(d.data(), d.data(), d.size(), IBEX_F64, IBEX_SUM, comm, nullptr));
    RANK_CHECK_OK(ctx, ibex_comm_deregister(comm, d.data()));
    RANK_CHECK(ctx, ibex_comm_deregister(comm, d.data()) == IBEX_ERR_INVALID_ARGUMENT, "double deregister accepted");
    RANK_CHECK(ctx, d[0] == static_cast<double>(n + sum_ranks), "f64 sum %g", d[0]);

    // Bad arguments fail before anything is queued, and the communicator stays usable.
    RANK_CHECK(ctx, ibex_allreduce(d.data(), d.data(), 1, IBEX_DATATYPE_COUNT, IBEX_SUM, comm, nullptr) ==
                        IBEX_ERR_INVALID_ARGUMENT, "bad type accepted");
    RANK_CHECK(ctx, ibex_broadcast(d.data(), d.data(), 1, IBEX_F64, n, comm, nullptr) == IBEX_ERR_INVALID_ARGUMENT,
               "bad root accepted");
    RANK_CHECK(ctx, std::strstr(ibex_last_error(), "root") != nullptr, "detail: %s", ibex_last_error());
    RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
    ibex_status_t async = IBEX_ERR_INTERNAL;
    RANK_CHECK_OK(ctx, ibex_comm_get_async_error(comm, &async));
    RANK_CHECK(ctx, async == IBEX_OK, "async error %d", async);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Comm, CollectivesAndRequests) {
    for (int n : {1, 3, 4}) {
        SCOPED_TRACE("n=" + std::to_string(n));
        ibex::test::expect_all_passed(ibex::test::run_ranks(n, collectives_body, 60));
    }
}

// Six ranks split by parity, ordered by descending key; one rank opts out.
int split_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    const int color = ctx.rank == 5 ? -1 : ctx.rank % 2;
    ibex_comm_t *sub = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_split(comm, color, -ctx.rank, &sub));
    if (color < 0) {
        RANK_CHECK(ctx, sub == nullptr, "opted-out rank got a communicator");
    } else {
        // Members of this colour in descending old rank.
        std::vector<int> members;
        for (int q = ctx.nranks - 1; q >= 0; --q)
            if (q != 5 && q % 2 == color) members.push_back(q);
        int rank = -1, size = -1;
        RANK_CHECK_OK(ctx, ibex_comm_rank(sub, &rank));
        RANK_CHECK_OK(ctx, ibex_comm_size(sub, &size));
        RANK_CHECK(ctx, size == static_cast<int>(members.size()), "size %d", size);
        RANK_CHECK(ctx, members[static_cast<size_t>(rank)] == ctx.rank, "old rank %d got new rank %d", ctx.rank, rank);
        int64_t x = ctx.rank, want = 0;
        for (int q : members) want += q;
        RANK_CHECK_OK(ctx, ibex_allreduce(&x, &x, 1, IBEX_I64, IBEX_SUM, sub, nullptr));
        RANK_CHECK(ctx, x == want, "sub allreduce %lld want %lld", static_cast<long long>(x), static_cast<long long>(want));
    }
    // The parent still works alongside.
    int32_t y = 1;
    RANK_CHECK_OK(ctx, ibex_allreduce(&y, &y, 1, IBEX_I32, IBEX_SUM, comm, nullptr));
    RANK_CHECK(ctx, y == ctx.nranks, "parent allreduce %d", y);
    if (sub) RANK_CHECK_OK(ctx, ibex_comm_destroy(sub));
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Comm, Split) { ibex::test::expect_all_passed(ibex::test::run_ranks(6, split_body, 60)); }

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// A rank waiting 1 s for a late peer, and an idle communicator, sleep instead of spinning
// (the machine running the tests has two cores for all ranks).
int sleepy_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
    const double c0 = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(1000)); // idle, both ranks
    const double idle = cpu_seconds() - c0;
    if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const double c1 = cpu_seconds();
    int32_t x = 1;
    RANK_CHECK_OK(ctx, ibex_allreduce(&x, &x, 1, IBEX_I32, IBEX_SUM, comm, nullptr));
    const double waiting = cpu_seconds() - c1;
    ctx.say("rank %d: idle 1 s cost %.3f CPU-s, waiting cost %.3f CPU-s", ctx.rank, idle, waiting);
    RANK_CHECK(ctx, idle < 0.1, "idle communicator used %.3f CPU-s in 1 s", idle);
    if (ctx.rank == 0) RANK_CHECK(ctx, waiting < 0.3, "waiting 1 s on a peer used %.3f CPU-s", waiting);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Comm, IdleAndWaitingRanksSleep) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(2, sleepy_body, 60), true);
}

// The same wait with ops queued behind the one that waits: rank 0 issues four allreduces
// without waiting and then waits for them, rank 1 joins 1 s late. The ops queued behind
// the running one must not keep rank 0's driver awake (they wait for it either way): it
// sleeps as with one op. Over the network device (IBEX_SHM=0), the path of ranks on
// different hosts, so that the scheduled path waits, not the fast boxes.
int queued_waiter_body(RankCtx &ctx) {
    ::setenv("IBEX_SHM", "0", 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
    if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    constexpr size_t kOps = 4, kCount = 1 << 14;
    std::vector<std::vector<float>> bufs(kOps, std::vector<float>(kCount, 1.0f));
    std::vector<ibex_request_t *> reqs(kOps, nullptr);
    const double c1 = cpu_seconds();
    for (size_t i = 0; i < kOps; ++i)
        RANK_CHECK_OK(ctx, ibex_allreduce(bufs[i].data(), bufs[i].data(), kCount, IBEX_F32, IBEX_SUM, comm, &reqs[i]));
    for (size_t i = 0; i < kOps; ++i) RANK_CHECK_OK(ctx, ibex_wait(reqs[i]));
    const double waiting = cpu_seconds() - c1;
    for (size_t i = 0; i < kOps; ++i)
        RANK_CHECK(ctx, bufs[i][kCount - 1] == float(ctx.nranks), "rank %d: op %zu gave %g", ctx.rank, i,
                   static_cast<double>(bufs[i][kCount - 1]));
    ctx.say("rank %d: waiting 1 s with %zu ops queued cost %.3f CPU-s", ctx.rank, kOps, waiting);
    if (ctx.rank == 0) RANK_CHECK(ctx, waiting < 0.3, "waiting 1 s with ops queued used %.3f CPU-s", waiting);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Comm, WaitingWithOpsQueuedSleeps) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(2, queued_waiter_body, 60), true);
}

// Two hosts of two ranks (IBEX_HOST_ID): where the ranks of a host share cores (this
// machine has two for all four), a waiting caller yields for 2 ms before it sleeps, as an
// oversubscribed MPI does, since across hosts its wake-up goes through the transport's
// progress thread; on one host it sleeps after IBEX_COMM_SPIN_US; with a core per rank it
// spins 10 ms. Either way a rank waiting 1 s for a late peer mostly sleeps.
int spread_waiters_body(RankCtx &ctx) {
    const int hosts = ctx.nranks == 4 ? 2 : 1;
    if (hosts == 2) ::setenv("IBEX_HOST_ID", ctx.rank < 2 ? "hostA" : "hostB", 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm));
    const ibex::coll::CommOptions &o = comm->opt;
    const int want = o.own_core ? 10000 : hosts == 2 ? std::max(o.spin_us, 2000) : o.spin_us;
    RANK_CHECK(ctx, o.wait_spin_us == want, "rank %d (%d hosts, own core %d): waits spin %d us, want %d", ctx.rank,
               hosts, o.own_core ? 1 : 0, o.wait_spin_us, want);
    RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
    if (ctx.rank == ctx.nranks - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const double c1 = cpu_seconds();
    int32_t x = 1;
    RANK_CHECK_OK(ctx, ibex_allreduce(&x, &x, 1, IBEX_I32, IBEX_SUM, comm, nullptr));
    const double waiting = cpu_seconds() - c1;
    RANK_CHECK(ctx, x == ctx.nranks, "rank %d: sum %d", ctx.rank, x);
    if (ctx.rank == 0) RANK_CHECK(ctx, waiting < 0.3, "waiting 1 s on a peer used %.3f CPU-s", waiting);
    ctx.say("rank %d: %d hosts, own core %d, waits spin %d us; waiting 1 s cost %.3f CPU-s", ctx.rank, hosts,
            o.own_core ? 1 : 0, o.wait_spin_us, waiting);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Comm, WaitersAcrossHostsYieldLongerWhenCoresAreShared) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(4, spread_waiters_body, 60), true);
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, spread_waiters_body, 60), true);
}

// Copies of several MiB inside one rank (an out-of-place allgather's own block, a broadcast
// root's buffer) go a MiB per executor pass, so that credits and completions keep moving
// meanwhile: every byte still lands, across the piece boundaries and the odd tail. The
// shm direct path is off so that the executor runs them.
int large_copies_body(RankCtx &ctx) {
    ::setenv("IBEX_SHM_DIRECT_MIN", "0", 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    const int n = ctx.nranks, r = ctx.rank;
    const size_t m = (size_t(1) << 19) + 7; // 2 MiB and 28 bytes of int32 per rank
    std::vector<int32_t> mine(m), all(m * static_cast<size_t>(n), -1);
    for (size_t i = 0; i < m; ++i) mine[i] = val(r, i);
    RANK_CHECK_OK(ctx, ibex_allgather(mine.data(), all.data(), m, IBEX_I32, comm, nullptr));
    for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < m; ++i)
            RANK_CHECK(ctx, all[static_cast<size_t>(q) * m + i] == val(q, i), "allgather [%d][%zu] = %d", q, i,
                       all[static_cast<size_t>(q) * m + i]);
    const size_t b = (size_t(3) << 18) + 5; // 3 MiB and 20 bytes
    std::vector<int32_t> src(b), dst(b, -1);
    for (size_t i = 0; i < b; ++i) src[i] = val(r, i);
    const int root = 1 % n;
    RANK_CHECK_OK(ctx, ibex_broadcast(src.data(), dst.data(), b, IBEX_I32, root, comm, nullptr));
    for (size_t i = 0; i < b; ++i) RANK_CHECK(ctx, dst[i] == val(root, i), "broadcast [%zu] = %d", i, dst[i]);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Comm, LargeLocalCopiesLandWhole) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, large_copies_body, 120));
}

// What the communicator measured at creation, asked for with the struct of this release and
// with those of 0.4-0.5.0 (which ends at gamma), 0.5.1-0.6.0 (at the big collectives'
// costs), 0.6.1 (at the hierarchical join) and 0.6.2 (at the timed scales): an older caller
// gets its fields, and not a byte past them; any other size is refused with the sizes it
// accepts.
int topology_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    ibex_comm_topology_t t{};
    t.size = sizeof t;
    RANK_CHECK_OK(ctx, ibex_comm_query_topology(comm, &t));
    RANK_CHECK(ctx, t.hosts == 1 && t.local_ranks == ctx.nranks, "%d hosts, %d local ranks", t.hosts, t.local_ranks);
    // Both probe sizes ran on the one host's links; between hosts is the same link here.
    RANK_CHECK(ctx, t.big_bytes > t.small_bytes && t.small_bytes > 0, "probe sizes %llu, %llu",
               static_cast<unsigned long long>(t.small_bytes), static_cast<unsigned long long>(t.big_bytes));
    RANK_CHECK(ctx, t.local_beta_ns_per_byte > 0 && t.big_local_beta_ns_per_byte > 0 && t.big_gamma_ns_per_byte > 0,
               "beta %g, big beta %g, big gamma %g", t.local_beta_ns_per_byte, t.big_local_beta_ns_per_byte,
               t.big_gamma_ns_per_byte);
    RANK_CHECK(ctx, t.big_beta_ns_per_byte == t.big_local_beta_ns_per_byte, "one host: big beta %g and %g",
               t.big_beta_ns_per_byte, t.big_local_beta_ns_per_byte);
    // One host: no hierarchical phases, so nothing timed.
    RANK_CHECK(ctx, t.hier_join_us == 0 && t.rhd_join_us == 0 && t.hier_scale == 1 && t.rhd_scale == 1,
               "one host: joins %g and %g us, scales %g and %g", t.hier_join_us, t.rhd_join_us, t.hier_scale,
               t.rhd_scale);

    constexpr size_t kOld = offsetof(ibex_comm_topology_t, gamma_ns_per_byte) + sizeof(double);
    constexpr size_t kBig = offsetof(ibex_comm_topology_t, hier_join_us);
    constexpr size_t kHierJoin = offsetof(ibex_comm_topology_t, rhd_join_us);
    constexpr size_t kScales = offsetof(ibex_comm_topology_t, slice_bytes);
    // The slice the ranks agreed on, and this rank's staging slots of it: one host's ranks
    // on shm keep the communicator's 128 KiB, eight slots (1 MiB) per peer.
    RANK_CHECK(ctx, t.slice_bytes == (size_t(128) << 10) && t.staging_slots == 8, "slice %llu, %d slots",
               static_cast<unsigned long long>(t.slice_bytes), t.staging_slots);
    for (size_t size : {kOld, kBig, kHierJoin, kScales}) {
        alignas(ibex_comm_topology_t) unsigned char raw[sizeof(ibex_comm_topology_t)];
        std::memset(raw, 0xab, sizeof raw);
        auto *old = reinterpret_cast<ibex_comm_topology_t *>(raw);
        old->size = static_cast<uint32_t>(size);
        RANK_CHECK_OK(ctx, ibex_comm_query_topology(comm, old));
        RANK_CHECK(ctx, old->size == size && old->hosts == 1 && old->gamma_ns_per_byte == t.gamma_ns_per_byte,
                   "old struct: size %u, %d hosts, gamma %g", old->size, old->hosts, old->gamma_ns_per_byte);
        if (size >= kBig)
            RANK_CHECK(ctx, old->big_gamma_ns_per_byte == t.big_gamma_ns_per_byte, "%zu-byte struct: big gamma %g",
                       size, old->big_gamma_ns_per_byte);
        if (size >= kHierJoin)
            RANK_CHECK(ctx, old->hier_join_us == t.hier_join_us, "%zu-byte struct: join %g", size, old->hier_join_us);
        if (size == kScales)
            RANK_CHECK(ctx, old->rhd_scale == t.rhd_scale, "0.6.2 struct: rhd scale %g", old->rhd_scale);
        for (size_t i = size; i < sizeof raw; ++i)
            RANK_CHECK(ctx, raw[i] == 0xab, "byte %zu past a %zu-byte caller's struct was written", i, size);
    }

    ibex_comm_topology_t odd{};
    odd.size = static_cast<uint32_t>(kOld + 8);
    RANK_CHECK(ctx, ibex_comm_query_topology(comm, &odd) == IBEX_ERR_INVALID_ARGUMENT, "size %u accepted", odd.size);
    RANK_CHECK(ctx, std::strstr(ibex_last_error(), "expected") != nullptr, "error: %s", ibex_last_error());
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Comm, TopologyQueryServesThisAndTheEarlierStructs) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(2, topology_body, 60));
}

TEST(Comm, InitArgumentErrors) {
    ibex_comm_t *comm = reinterpret_cast<ibex_comm_t *>(1);
    ibex_unique_id_t id{};
    std::strcpy(id.text, "127.0.0.1:1/x");
    EXPECT_EQ(ibex_comm_init_rank(&comm, 2, &id, 2, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(comm, nullptr);
    EXPECT_EQ(ibex_comm_init_rank(&comm, 0, &id, 0, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    std::strcpy(id.text, "no-port/x");
    EXPECT_EQ(ibex_comm_init_rank(&comm, 2, &id, 1, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(ibex_last_error(), "host:port"), nullptr) << ibex_last_error();
    ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
    cfg.algo = "butterfly";
    std::strcpy(id.text, "127.0.0.1:1/x");
    EXPECT_EQ(ibex_comm_init_rank(&comm, 1, &id, 0, &cfg), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(ibex_last_error(), "butterfly"), nullptr) << ibex_last_error();
    cfg.magic = 0;
    cfg.algo = nullptr;
    EXPECT_EQ(ibex_comm_init_rank(&comm, 1, &id, 0, &cfg), IBEX_ERR_INVALID_ARGUMENT);
}

} // namespace

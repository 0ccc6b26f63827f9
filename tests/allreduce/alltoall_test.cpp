// ibex_alltoall on real ranks: every rank's block for every other lands where it belongs,
// over the udp port and over shm, for counts of one element to many slices; the first call
// connects the pairs the other collectives left apart, and later collectives (queued
// behind it too) still give the right results; bad arguments and a lost rank are errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/killed_rank.h"
#include "tests/allreduce/one_rank.h"
#include "tests/allreduce/ranks.h"

namespace {

using ibex::test::RankCtx;

// Element i of rank r's block for rank p: distinct for every (r, p, i).
template <typename T>
T value(int r, int p, size_t i) {
    return static_cast<T>((static_cast<size_t>(r) * 131 + static_cast<size_t>(p) * 17 + i * 3) % 251);
}

template <typename T>
int exchange(RankCtx &ctx, ibex_comm_t *comm, ibex_datatype_t type, size_t count) {
    const int n = ctx.nranks;
    std::vector<T> send(count * static_cast<size_t>(n)), recv(send.size() + 1, T(77));
    for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i) send[static_cast<size_t>(p) * count + i] = value<T>(ctx.rank, p, i);
    RANK_CHECK_OK(ctx, ibex_alltoall(send.data(), recv.data(), count, type, comm, nullptr));
    for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i)
            RANK_CHECK(ctx, recv[static_cast<size_t>(q) * count + i] == value<T>(q, ctx.rank, i),
                       "rank %d, %s, count %zu: element %zu of rank %d's block is wrong", ctx.rank,
                       ibex_datatype_name(type), count, i, q);
    RANK_CHECK(ctx, recv.back() == T(77), "rank %d: written past the end", ctx.rank);
    return 0;
}

int exchange_body(RankCtx &ctx, bool over_shm) {
    ::setenv("IBEX_SHM", over_shm ? "1" : "0", 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm));
    const size_t before = comm->exec.channels();
    for (size_t count : {size_t(1), size_t(7), size_t(300007)})
        if (int rc = exchange<float>(ctx, comm, IBEX_F32, count)) return rc;
    if (int rc = exchange<int64_t>(ctx, comm, IBEX_I64, 4099)) return rc;
    if (int rc = exchange<uint8_t>(ctx, comm, IBEX_U8, 65537)) return rc;
    for (int p = 0; p < ctx.nranks; ++p)
        RANK_CHECK(ctx, p == ctx.rank || comm->exec.connected_to(p), "rank %d: no QP to rank %d", ctx.rank, p);
    RANK_CHECK(ctx, comm->exec.channels() == static_cast<size_t>(ctx.nranks - 1), "rank %d: %zu channels", ctx.rank,
               comm->exec.channels());
    // The other collectives still run, over old channels and new.
    std::vector<double> x(100003, ctx.rank + 1.0);
    RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), x.data(), x.size(), IBEX_F64, IBEX_SUM, comm, nullptr));
    const double want = ctx.nranks * (ctx.nranks + 1) / 2.0;
    RANK_CHECK(ctx, x[0] == want && x.back() == want, "rank %d: allreduce after alltoall gave %g", ctx.rank, x[0]);
    ctx.say("rank %d: %zu channels before the first alltoall, %zu after", ctx.rank, before, comm->exec.channels());
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Alltoall, EveryBlockLandsOverTheUdpPort) {
    for (int n : {2, 3, 5}) {
        SCOPED_TRACE(std::to_string(n) + " ranks");
        ibex::test::expect_all_passed(ibex::test::run_ranks(n, [](RankCtx &ctx) { return exchange_body(ctx, false); }),
                                      n == 5);
    }
}

TEST(Alltoall, EveryBlockLandsOverShm) {
    for (int n : {2, 5}) {
        SCOPED_TRACE(std::to_string(n) + " ranks");
        ibex::test::expect_all_passed(ibex::test::run_ranks(n, [](RankCtx &ctx) { return exchange_body(ctx, true); }));
    }
}

// Ranks of one host read their blocks straight out of the peers' send buffers
// (allreduce/shm_direct.h): through the peers' staging by default, with process_vm_readv
// without it (and for two ranks), and in place from buffers the peers map
// (ibex_comm_mem_alloc); below IBEX_SHM_DIRECT_MIN the scheduled path over shm QPs.
TEST(Alltoall, OneHostReadsBlocksStraightFromThePeers) {
    for (int n : {2, 3}) {
        SCOPED_TRACE(std::to_string(n) + " ranks");
        ibex::test::expect_all_passed(ibex::test::run_ranks(n, [](RankCtx &ctx) {
            ibex_comm_t *staged = nullptr, *attach = nullptr;
            RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &staged));
            ::setenv("IBEX_SHM_STAGE_BYTES", "0", 1);
            RANK_CHECK_OK(ctx, ibex_comm_split(staged, 0, ctx.rank, &attach));
            ::unsetenv("IBEX_SHM_STAGE_BYTES");
            RANK_CHECK(ctx, staged->direct.enabled() && attach->direct.enabled(), "rank %d: no direct path", ctx.rank);
            for (ibex_comm_t *comm : {staged, attach}) {
                const uint64_t taken = comm->direct.taken(), was_staged = comm->direct.staged();
                if (int rc = exchange<float>(ctx, comm, IBEX_F32, 100003)) return rc; // direct
                if (int rc = exchange<uint8_t>(ctx, comm, IBEX_U8, 7)) return rc;     // below: scheduled
                if (int rc = exchange<int64_t>(ctx, comm, IBEX_I64, 4099)) return rc; // direct
                RANK_CHECK(ctx, comm->direct.taken() == taken + 2, "rank %d: %llu alltoalls taken directly, want 2",
                           ctx.rank, static_cast<unsigned long long>(comm->direct.taken() - taken));
                const uint64_t want_staged = comm == staged && ctx.nranks > 2 ? 2 : 0;
                RANK_CHECK(ctx, comm->direct.staged() - was_staged == want_staged,
                           "rank %d: %llu staged, want %llu (staging %zu bytes)", ctx.rank,
                           static_cast<unsigned long long>(comm->direct.staged() - was_staged),
                           static_cast<unsigned long long>(want_staged), comm->direct.stage_bytes());
            }
            // Buffers the peers map: read in place.
            const size_t count = 30011, n = static_cast<size_t>(ctx.nranks);
            void *sp = nullptr, *rp = nullptr;
            RANK_CHECK_OK(ctx, ibex_comm_mem_alloc(staged, count * n * sizeof(int32_t), &sp));
            RANK_CHECK_OK(ctx, ibex_comm_mem_alloc(staged, count * n * sizeof(int32_t), &rp));
            auto *s = static_cast<int32_t *>(sp), *r = static_cast<int32_t *>(rp);
            for (size_t p = 0; p < n; ++p)
                for (size_t i = 0; i < count; ++i) s[p * count + i] = value<int32_t>(ctx.rank, static_cast<int>(p), i);
            RANK_CHECK_OK(ctx, ibex_alltoall(s, r, count, IBEX_I32, staged, nullptr));
            for (size_t q = 0; q < n; ++q)
                for (size_t i = 0; i < count; ++i)
                    RANK_CHECK(ctx, r[q * count + i] == value<int32_t>(static_cast<int>(q), ctx.rank, i),
                               "rank %d: shared buffers, element %zu of rank %zu's block", ctx.rank, i, q);
            RANK_CHECK_OK(ctx, ibex_comm_mem_free(staged, sp));
            RANK_CHECK_OK(ctx, ibex_comm_mem_free(staged, rp));
            RANK_CHECK_OK(ctx, ibex_comm_destroy(attach));
            RANK_CHECK_OK(ctx, ibex_comm_destroy(staged));
            return 0;
        }));
    }
}

// Queued without waiting: an alltoall, an allreduce of its output and another alltoall run
// in the order issued, as on a stream.
TEST(Alltoall, QueuedBehindAndAheadOfOtherCollectives) {
    const auto out = ibex::test::run_ranks(6, [](RankCtx &ctx) {
        ::setenv("IBEX_SHM", "0", 1);
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm));
        const int n = ctx.nranks;
        const size_t count = 50001;
        std::vector<float> warm(8, 1.0f), send(count * n), recv(count * n), again(count * n);
        ibex_request_t *r0 = nullptr, *r1 = nullptr, *r2 = nullptr, *r3 = nullptr;
        RANK_CHECK_OK(ctx, ibex_allreduce(warm.data(), warm.data(), warm.size(), IBEX_F32, IBEX_SUM, comm, &r0));
        for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < count; ++i) send[p * count + i] = static_cast<float>(ctx.rank * 10 + p);
        RANK_CHECK_OK(ctx, ibex_alltoall(send.data(), recv.data(), count, IBEX_F32, comm, &r1));
        RANK_CHECK_OK(ctx, ibex_allreduce(recv.data(), recv.data(), recv.size(), IBEX_F32, IBEX_SUM, comm, &r2));
        RANK_CHECK_OK(ctx, ibex_alltoall(recv.data(), again.data(), count, IBEX_F32, comm, &r3));
        for (ibex_request_t *r : {r3, r2, r1, r0}) RANK_CHECK_OK(ctx, ibex_wait(r));
        RANK_CHECK(ctx, warm[0] == static_cast<float>(n), "rank %d: warm-up sum %g", ctx.rank, warm[0]);
        // recv block q on rank r was q*10 + r; summed over the ranks r: n*10*q + n(n-1)/2.
        for (int q = 0; q < n; ++q) {
            const float want = static_cast<float>(n * 10 * q + n * (n - 1) / 2);
            RANK_CHECK(ctx, recv[q * count] == want && recv[q * count + count - 1] == want,
                       "rank %d: summed block %d is %g, want %g", ctx.rank, q, recv[q * count], want);
            // again block q = rank q's recv block for this rank, the sum for block ctx.rank
            const float want2 = static_cast<float>(n * 10 * ctx.rank + n * (n - 1) / 2);
            RANK_CHECK(ctx, again[q * count] == want2, "rank %d: second alltoall block %d is %g, want %g", ctx.rank,
                       q, again[q * count], want2);
        }
        RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
        return 0;
    });
    ibex::test::expect_all_passed(out);
}

class AlltoallOneRank : public ibex::test::OneRankComm {};

TEST_F(AlltoallOneRank, CopiesItsOwnBlockAndRefusesBadArguments) {
    std::vector<int32_t> send(1000), recv(1000, -1);
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int32_t>(i * 7);
    ASSERT_EQ(ibex_alltoall(send.data(), recv.data(), send.size(), IBEX_I32, comm, nullptr), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(recv, send);
    EXPECT_EQ(ibex_alltoall(send.data(), send.data() + 10, 100, IBEX_I32, comm, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("not in place"), std::string::npos) << ibex_last_error();
    EXPECT_EQ(ibex_alltoall(nullptr, recv.data(), 4, IBEX_I32, comm, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_alltoall(send.data(), recv.data(), 4, static_cast<ibex_datatype_t>(99), comm, nullptr),
              IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_alltoall(send.data(), recv.data(), 4, IBEX_I32, nullptr, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_alltoall(nullptr, nullptr, 0, IBEX_I32, comm, nullptr), IBEX_OK) << "nothing to move";
}

// alltoallv: rank r sends uneven(r, p) elements to p (some none at all; the last rank
// sends and receives nothing, so it runs no schedule), its send blocks in reverse rank
// order and its receive blocks with gaps between them, which stay untouched.
size_t uneven(int r, int p, int n) { return r == n - 1 || p == n - 1 ? 0 : static_cast<size_t>((r * 3 + p * 5) % 7) * 1500; }

int uneven_body(RankCtx &ctx, bool over_shm) {
    ::setenv("IBEX_SHM", over_shm ? "1" : "0", 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm));
    const int n = ctx.nranks;
    std::vector<size_t> sendcounts(n), sdispls(n), recvcounts(n), rdispls(n);
    size_t at = 0;
    for (int p = n - 1; p >= 0; --p) { // reverse order
        sendcounts[p] = uneven(ctx.rank, p, n);
        sdispls[p] = at;
        at += sendcounts[p];
    }
    std::vector<int32_t> send(at + 1);
    at = 3; // a gap before the first block and between any two
    for (int q = 0; q < n; ++q) {
        recvcounts[q] = uneven(q, ctx.rank, n);
        rdispls[q] = at;
        at += recvcounts[q] + 5;
    }
    std::vector<int32_t> recv(at, -7);
    for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < sendcounts[p]; ++i) send[sdispls[p] + i] = value<int32_t>(ctx.rank, p, i);
    for (int round = 0; round < 2; ++round) { // the second with nothing memoized from the first
        RANK_CHECK_OK(ctx, ibex_alltoallv(send.data(), sendcounts.data(), sdispls.data(), recv.data(),
                                          recvcounts.data(), rdispls.data(), IBEX_I32, comm, nullptr));
        std::vector<bool> written(recv.size(), false);
        for (int q = 0; q < n; ++q)
            for (size_t i = 0; i < recvcounts[q]; ++i) {
                RANK_CHECK(ctx, recv[rdispls[q] + i] == value<int32_t>(q, ctx.rank, i),
                           "rank %d: element %zu of rank %d's block is %d", ctx.rank, i, q, recv[rdispls[q] + i]);
                written[rdispls[q] + i] = true;
            }
        for (size_t i = 0; i < recv.size(); ++i)
            RANK_CHECK(ctx, written[i] || recv[i] == -7, "rank %d: the gap at %zu was written", ctx.rank, i);
    }
    // An equal alltoall after it, and the counts' arrays were copied: change them now.
    std::fill(sendcounts.begin(), sendcounts.end(), size_t(999999));
    if (int rc = exchange<float>(ctx, comm, IBEX_F32, 777)) return rc;
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Alltoall, UnevenBlocksOverTheUdpPortAndShm) {
    for (bool shm : {false, true}) {
        SCOPED_TRACE(shm ? "shm" : "udp");
        ibex::test::expect_all_passed(ibex::test::run_ranks(4, [shm](RankCtx &ctx) { return uneven_body(ctx, shm); }));
    }
}

// Rank 0 sends rank 1 ten elements where rank 1 expects twelve: rank 1's alltoallv fails,
// and rank 0's too or, where its own part was done first, its next collective; neither
// hangs, and nothing lands past what either announced.
TEST(Alltoall, UnevenCountsThatDisagreeFailBothRanks) {
    const auto out = ibex::test::run_ranks(2, [](RankCtx &ctx) {
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm, 5000));
        const size_t to_peer = ctx.rank == 0 ? 10 : 3, from_peer = ctx.rank == 1 ? 12 : 3;
        const std::vector<size_t> sendcounts = ctx.rank == 0 ? std::vector<size_t>{2, to_peer} : std::vector<size_t>{to_peer, 2},
                                  recvcounts = ctx.rank == 0 ? std::vector<size_t>{2, from_peer}
                                                             : std::vector<size_t>{from_peer, 2},
                                  sdispls{0, 100}, rdispls{0, 100};
        std::vector<float> send(200, 1.0f), recv(200, -1.0f);
        const auto t0 = std::chrono::steady_clock::now();
        ibex_status_t st = ibex_alltoallv(send.data(), sendcounts.data(), sdispls.data(), recv.data(),
                                          recvcounts.data(), rdispls.data(), IBEX_F32, comm, nullptr);
        RANK_CHECK(ctx, st != IBEX_OK || ctx.rank == 0, "rank 1: twelve elements expected, ten came, no error");
        if (st == IBEX_OK) st = ibex_barrier(comm, nullptr);
        ctx.say("rank %d: %s after %ld ms: %s", ctx.rank, ibex_strerror(st), ibex::test::ms_since(t0), ibex_last_error());
        RANK_CHECK(ctx, st != IBEX_OK, "rank %d: disagreeing counts went unnoticed", ctx.rank);
        RANK_CHECK(ctx, ibex::test::ms_since(t0) < 4500, "rank %d: error only after %ld ms", ctx.rank,
                   ibex::test::ms_since(t0));
        for (size_t i = 100 + from_peer; i < recv.size(); ++i)
            RANK_CHECK(ctx, recv[i] == -1.0f, "rank %d: element %zu past the block was written", ctx.rank, i);
        RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
        return 0;
    });
    ibex::test::expect_all_passed(out, true);
}

TEST_F(AlltoallOneRank, UnevenBlocksAndBadArguments) {
    std::vector<int32_t> send(100), recv(100, -1);
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int32_t>(i);
    size_t c40 = 40, d10 = 10, d50 = 50, c30 = 30, zero = 0;
    // One rank: its block to itself, from displacement 10 to 50.
    ASSERT_EQ(ibex_alltoallv(send.data(), &c40, &d10, recv.data(), &c40, &d50, IBEX_I32, comm, nullptr), IBEX_OK)
        << ibex_last_error();
    EXPECT_EQ(recv[50], 10);
    EXPECT_EQ(recv[89], 49);
    EXPECT_EQ(recv[49], -1);
    EXPECT_EQ(recv[90], -1);
    const auto refused = [&](const void *s, const size_t *sc, const size_t *sd, void *r, const size_t *rc,
                             const size_t *rd, const char *says) {
        EXPECT_EQ(ibex_alltoallv(s, sc, sd, r, rc, rd, IBEX_I32, comm, nullptr), IBEX_ERR_INVALID_ARGUMENT) << says;
        EXPECT_NE(std::string(ibex_last_error()).find(says), std::string::npos) << ibex_last_error();
    };
    refused(send.data(), nullptr, &d10, recv.data(), &c40, &d50, "NULL count or displacement array");
    refused(send.data(), &c40, &d10, recv.data(), &c30, &d50, "sends itself 40 elements but receives 30");
    EXPECT_EQ(ibex_alltoallv(send.data(), &c40, &d10, send.data(), &c40, &d50, IBEX_I32, comm, nullptr), IBEX_OK)
        << "one buffer, disjoint blocks: " << ibex_last_error();
    EXPECT_EQ(send[50], 10);
    size_t d30 = 30;
    refused(send.data(), &c40, &d10, send.data(), &c40, &d30, "not in place");
    refused(nullptr, &c40, &d10, recv.data(), &c40, &d50, "NULL buffer");
    size_t huge = size_t(1) << 60;
    refused(send.data(), &c40, &huge, recv.data(), &c40, &d50, "out of range");
    // Nothing to move: fine, with NULL buffers too.
    EXPECT_EQ(ibex_alltoallv(nullptr, &zero, &zero, nullptr, &zero, &zero, IBEX_I32, comm, nullptr), IBEX_OK)
        << ibex_last_error();
}

// Two receive blocks of one rank may not overlap (two peers would write the same place).
TEST(Alltoall, OverlappingReceiveBlocksAreRefused) {
    const auto out = ibex::test::run_ranks(2, [](RankCtx &ctx) {
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm));
        const std::vector<size_t> counts{10, 10}, sdispls{0, 10}, rdispls{0, 5};
        std::vector<float> send(20), recv(20);
        const ibex_status_t st = ibex_alltoallv(send.data(), counts.data(), sdispls.data(), recv.data(), counts.data(),
                                                rdispls.data(), IBEX_F32, comm, nullptr);
        RANK_CHECK(ctx, st == IBEX_ERR_INVALID_ARGUMENT && std::strstr(ibex_last_error(), "two receive blocks overlap"),
                   "rank %d: %s: %s", ctx.rank, ibex_strerror(st), ibex_last_error());
        RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
        return 0;
    });
    ibex::test::expect_all_passed(out);
}

// A survivor's end of a lost-rank test: its alltoall failed (st), within 9 s of t0 (the
// timeout is 10 s), and the communicator aborts cleanly.
int failed_in_time(RankCtx &ctx, ibex_comm_t *comm, ibex_status_t st, std::chrono::steady_clock::time_point t0) {
    RANK_CHECK(ctx, st != IBEX_OK, "rank %d: alltoall without the lost rank succeeded", ctx.rank);
    ctx.say("rank %d: %s after %ld ms: %s", ctx.rank, ibex_strerror(st), ibex::test::ms_since(t0), ibex_last_error());
    RANK_CHECK(ctx, ibex::test::ms_since(t0) < 9000, "rank %d: error only after %ld ms", ctx.rank,
               ibex::test::ms_since(t0));
    RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
    return 0;
}

// A rank that is gone when the others connect every pair: they fail, none hangs.
TEST(Alltoall, ARankGoneBeforeTheFirstAlltoallFailsTheOthers) {
    const auto out = ibex::test::run_ranks(4, [](RankCtx &ctx) {
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm, 10000));
        if (ctx.rank == 2) ::_exit(0);
        std::vector<float> send(4 * 1000, 1.0f), recv(send.size());
        const auto t0 = std::chrono::steady_clock::now();
        return failed_in_time(ctx, comm, ibex_alltoall(send.data(), recv.data(), 1000, IBEX_F32, comm, nullptr), t0);
    });
    ibex::test::expect_all_passed(out, true);
}

// A rank killed in the middle of a long alltoall (after the pairs are connected).
TEST(Alltoall, ARankKilledMidAlltoallFailsTheOthers) {
    ibex::test::run_with_victim(4, 1, [](RankCtx &ctx, std::atomic<int> *ready) {
        ::setenv("IBEX_SHM", "0", 1);
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm, 10000));
        const size_t count = size_t(4) << 20; // 16 MiB to each rank
        std::vector<float> send(count * 4, 1.0f), recv(send.size());
        RANK_CHECK_OK(ctx, ibex_alltoall(send.data(), recv.data(), 1, IBEX_F32, comm, nullptr)); // connects
        ready->fetch_add(1);
        if (ctx.rank == 1) ibex::test::die_when_all_ready(ctx, ready, 20);
        const auto t0 = std::chrono::steady_clock::now();
        ibex_status_t st = IBEX_OK;
        for (int i = 0; i < 20 && st == IBEX_OK; ++i)
            st = ibex_alltoall(send.data(), recv.data(), count, IBEX_F32, comm, nullptr);
        return failed_in_time(ctx, comm, st, t0);
    }, "alltoall: ");
}

} // namespace

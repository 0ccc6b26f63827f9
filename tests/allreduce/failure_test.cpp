// Failures reach every rank as an error, never a hang: a rank killed in the middle of an
// allreduce (a worker, and the bootstrap root), a rank that never joins the collective
// (timeout), ibex_comm_abort() freeing a communicator stuck waiting on a peer, and a rank
// killed while another has ops queued behind a running one.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>
#include <vector>

#include "tests/allreduce/killed_rank.h"

namespace {

using Clock = std::chrono::steady_clock;
using ibex::test::ms_since;
using ibex::test::RankCtx;

ibex_status_t init(RankCtx &ctx, ibex_comm_t **comm, int timeout_ms) {
    return ibex::test::init_comm(ctx, comm, timeout_ms);
}

TEST(Failure, RankKilledMidAllreduce) { ibex::test::check_killed(4, 2); }
TEST(Failure, BootstrapRootKilledMidAllreduce) { ibex::test::check_killed(3, 0); }

// The same with the seed systems' algorithms forced: GDRAA (zones large enough that the
// 16 MiB allreduce runs as GDRAA, not around the ring) and BiGraph's placement (4 ranks,
// one host per switch).
ibex::test::InitComm forced(const char *algo, const char *var, const char *value) {
    return [=](RankCtx &ctx, ibex_comm_t **comm, int timeout_ms) {
        ::setenv("IBEX_ALGO", algo, 1);
        ::setenv(var, value, 1);
        return ibex::test::init_comm(ctx, comm, timeout_ms);
    };
}
TEST(Failure, RankKilledMidGdraa) { ibex::test::check_killed(4, 2, forced("gdraa", "IBEX_GDRAA_ZONE", "8388608")); }
TEST(Failure, RankKilledMidBiGraph) {
    ibex::test::check_killed(4, 1, forced("bigraph", "IBEX_BIGRAPH_HOSTS_PER_SWITCH", "1"));
}

// Rank 1 never calls the collective: the others time out and rank 1 learns of it too.
int silent_body(RankCtx &ctx) {
    constexpr int kTimeoutMs = 1500;
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init(ctx, &comm, kTimeoutMs));
    if (ctx.rank == 1) {
        ibex_status_t async = IBEX_OK;
        const auto t0 = Clock::now();
        while (async == IBEX_OK && ms_since(t0) < 8 * kTimeoutMs) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            RANK_CHECK_OK(ctx, ibex_comm_get_async_error(comm, &async));
        }
        RANK_CHECK(ctx, async != IBEX_OK, "silent rank never heard of the failure");
        ctx.say("rank 1 learned after %ld ms: %s", ms_since(t0), ibex_last_error());
        RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
        return 0;
    }
    int32_t x = 1;
    const auto t0 = Clock::now();
    const ibex_status_t st = ibex_allreduce(&x, &x, 1, IBEX_I32, IBEX_SUM, comm, nullptr);
    const long took = ms_since(t0);
    RANK_CHECK(ctx, st == IBEX_ERR_TIMEOUT || st == IBEX_ERR_REMOTE, "rank %d: %s", ctx.rank, ibex_strerror(st));
    ctx.say("rank %d: %s after %ld ms: %s", ctx.rank, ibex_strerror(st), took, ibex_last_error());
    RANK_CHECK(ctx, took >= kTimeoutMs - 100 && took < 4 * kTimeoutMs, "took %ld ms", took);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Failure, SilentRankTimesOut) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, silent_body, 60), true);
}

// Ranks that call the same collective with different counts: a clear error everywhere,
// found from the credit lengths, not a hang or a timeout.
TEST(Failure, MismatchedCountsFailEverywhere) {
    ibex::test::expect_mismatch_named(
        ibex::test::run_ranks(3, [](RankCtx &ctx) { return ibex::test::mismatched_count_body(ctx, 4096, 3000); }, 60));
}

// Rank 0 is stuck in an allreduce that rank 1 never joins; abort frees it at once (the
// timeout is 30 s), fails the pending request, and tells rank 1.
int abort_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init(ctx, &comm, 30000));
    if (ctx.rank == 0) {
        int32_t x = 1;
        ibex_request_t *req = nullptr;
        RANK_CHECK_OK(ctx, ibex_allreduce(&x, &x, 1, IBEX_I32, IBEX_SUM, comm, &req));
        ibex_request_t *req2 = nullptr;
        RANK_CHECK_OK(ctx, ibex_barrier(comm, &req2));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        int done = 1;
        RANK_CHECK_OK(ctx, ibex_test(req, &done));
        RANK_CHECK(ctx, done == 0, "allreduce finished without rank 1");
        const auto t0 = Clock::now();
        RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
        RANK_CHECK(ctx, ms_since(t0) < 2000, "abort took %ld ms", ms_since(t0));
        RANK_CHECK(ctx, ibex_wait(req) != IBEX_OK, "aborted allreduce reported success");
        RANK_CHECK(ctx, ibex_wait(req2) != IBEX_OK, "aborted barrier reported success");
        return 0;
    }
    ibex_status_t async = IBEX_OK;
    const auto t0 = Clock::now();
    while (async == IBEX_OK && ms_since(t0) < 10000) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        RANK_CHECK_OK(ctx, ibex_comm_get_async_error(comm, &async));
    }
    RANK_CHECK(ctx, async == IBEX_ERR_REMOTE, "rank 1: async error %s", ibex_strerror(async));
    RANK_CHECK(ctx, ms_since(t0) < 5000, "rank 1 learned of the abort after %ld ms", ms_since(t0));
    RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
    return 0;
}

TEST(Failure, AbortFreesStuckCommunicator) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(2, abort_body, 60));
}

// A rank dies while the other has allreduces queued behind a running one, and nothing of
// the running one's is outstanding to the dead rank (the victim dies 200 ms after the
// first op, so the survivor's sends for the second have long been acknowledged): only the
// bootstrap connection can tell. The survivor must learn it from there well before the
// timeout, and fail the running op and those queued behind it, in order.
int killed_behind_queued_body(RankCtx &ctx, int victim, std::atomic<int> *issued) {
    constexpr int kTimeoutMs = 20000;
    constexpr size_t kCount = 1 << 16, kOps = 4;
    ::setenv("IBEX_SHM", "0", 1); // the ranks of different hosts' path: no shared memory
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init(ctx, &comm, kTimeoutMs));
    std::vector<std::vector<float>> bufs(kOps, std::vector<float>(kCount, 1.0f));
    std::vector<ibex_request_t *> reqs;
    const size_t count = ctx.rank == victim ? 1 : kOps;
    const auto t0 = Clock::now();
    for (size_t i = 0; i < count; ++i) {
        ibex_request_t *r = nullptr;
        RANK_CHECK_OK(ctx, ibex_allreduce(bufs[i].data(), bufs[i].data(), kCount, IBEX_F32, IBEX_SUM, comm, &r));
        reqs.push_back(r);
    }
    issued->fetch_add(1);
    RANK_CHECK_OK(ctx, ibex_wait(reqs[0]));
    RANK_CHECK(ctx, bufs[0][kCount - 1] == float(ctx.nranks), "rank %d: the first op gave %g", ctx.rank,
               bufs[0][kCount - 1]);
    if (ctx.rank == victim) ibex::test::die_when_all_ready(ctx, issued, 200);
    for (size_t i = 1; i < kOps; ++i) {
        const ibex_status_t st = ibex_wait(reqs[i]);
        RANK_CHECK(ctx, st == IBEX_ERR_REMOTE || st == IBEX_ERR_TIMEOUT, "rank %d: op %zu returned %s", ctx.rank, i,
                   ibex_strerror(st));
    }
    const long took = ms_since(t0);
    ctx.say("rank %d: the queued ops failed after %ld ms: %s", ctx.rank, took, ibex_last_error());
    RANK_CHECK(ctx, took < kTimeoutMs / 4, "rank %d: the queued ops failed only after %ld ms", ctx.rank, took);
    RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
    return 0;
}

TEST(Failure, RankKilledWhileOpsWaitQueuedBehindTheRunningOne) {
    ibex::test::run_with_victim(2, 1, [](RankCtx &ctx, std::atomic<int> *issued) {
        return killed_behind_queued_body(ctx, 1, issued);
    });
}

} // namespace

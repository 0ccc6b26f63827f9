// Failures reach every rank as an error, never a hang: a rank killed in the middle of an
// allreduce (a worker, and the bootstrap root), a rank that never joins the collective
// (timeout), and ibex_comm_abort() freeing a communicator stuck waiting on a peer.
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

} // namespace

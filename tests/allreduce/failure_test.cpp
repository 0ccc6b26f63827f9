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

#include "tests/allreduce/ranks.h"

namespace {

using Clock = std::chrono::steady_clock;
using ibex::test::ms_since;
using ibex::test::RankCtx;

ibex_status_t init(RankCtx &ctx, ibex_comm_t **comm, int timeout_ms) {
    return ibex::test::init_comm(ctx, comm, timeout_ms);
}

// The victim starts a large allreduce and is SIGKILLed a moment later; the others must
// fail well before the (long) timeout, and stay failed.
// warmed_up: shared by the forked ranks, counts those past the first allreduce; the victim
// dies only after all of them are, so none can lose the first one to the kill.
int killed_body(RankCtx &ctx, int victim, std::atomic<int> *warmed_up) {
    constexpr int kTimeoutMs = 20000;
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init(ctx, &comm, kTimeoutMs));
    std::vector<float> buf(4 << 20, 1.0f); // 16 MiB: still moving when the victim dies
    RANK_CHECK_OK(ctx, ibex_allreduce(buf.data(), buf.data(), 64, IBEX_F32, IBEX_SUM, comm, nullptr));
    warmed_up->fetch_add(1);
    ibex_request_t *req = nullptr;
    const auto t0 = Clock::now();
    RANK_CHECK_OK(ctx, ibex_allreduce(buf.data(), buf.data(), buf.size(), IBEX_F32, IBEX_SUM, comm, &req));
    if (ctx.rank == victim) {
        for (int i = 0; i < 10000 && warmed_up->load() < ctx.nranks; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ::raise(SIGKILL);
    }
    const ibex_status_t st = ibex_wait(req);
    const long took = ms_since(t0);
    RANK_CHECK(ctx, st == IBEX_ERR_REMOTE || st == IBEX_ERR_TIMEOUT, "rank %d: allreduce returned %s (%s)", ctx.rank,
               ibex_strerror(st), ibex_last_error());
    ctx.say("rank %d: error after %ld ms: %s", ctx.rank, took, ibex_last_error());
    RANK_CHECK(ctx, took < kTimeoutMs / 2, "rank %d: error only after %ld ms", ctx.rank, took);
    // The communicator stays in its error state: later calls fail at once.
    ibex_status_t async = IBEX_OK;
    RANK_CHECK_OK(ctx, ibex_comm_get_async_error(comm, &async));
    RANK_CHECK(ctx, async != IBEX_OK, "no async error recorded");
    const auto t1 = Clock::now();
    RANK_CHECK(ctx, ibex_barrier(comm, nullptr) != IBEX_OK, "barrier on a failed communicator succeeded");
    RANK_CHECK(ctx, ms_since(t1) < 1000, "failed barrier took %ld ms", ms_since(t1));
    RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
    return 0;
}

void check_killed(int n, int victim) {
    void *shared = ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(shared, MAP_FAILED);
    auto *warmed_up = new (shared) std::atomic<int>(0);
    auto out = ibex::test::run_ranks(n, [&](RankCtx &ctx) { return killed_body(ctx, victim, warmed_up); }, 60);
    ::munmap(shared, sizeof(std::atomic<int>));
    for (int r = 0; r < n; ++r) {
        std::printf("%s", out[r].text.c_str());
        if (r == victim) {
            EXPECT_EQ(out[r].code, 256 + SIGKILL) << out[r].text;
            continue;
        }
        EXPECT_EQ(out[r].code, 0) << "rank " << r << ": " << ibex::test::ChildProcess::describe(out[r].code) << "\n"
                                  << out[r].text;
    }
}

TEST(Failure, RankKilledMidAllreduce) { check_killed(4, 2); }
TEST(Failure, BootstrapRootKilledMidAllreduce) { check_killed(3, 0); }

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

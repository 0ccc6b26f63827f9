// Small slices travel through each peer's eager ring instead of waiting for a credit: a
// slice that lands before its collective starts on the receiver waits there, the ring's
// slots come back and are reused many times over, mismatched calls are still named, a
// request polled with ibex_test (nobody waiting) still completes, and a send queue too
// short for a pass's sends takes them in parts.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/ranks.h"

namespace {

using Clock = std::chrono::steady_clock;
using ibex::test::ms_since;
using ibex::test::RankCtx;

// Collectives this small would otherwise go through the fast boxes (tests/allreduce/fastbox_test.cpp).
ibex_status_t init(RankCtx &ctx, ibex_comm_t **comm) {
    ::setenv("IBEX_FASTBOX_MAX", "0", 1);
    return ibex::test::init_comm(ctx, comm, 20000);
}

// The last rank starts each round 200 ms after the others, whose slices are then already
// in its ring; every result is still exact.
int late_receiver_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init(ctx, &comm));
    const int n = ctx.nranks;
    for (int round = 0; round < 3; ++round) {
        if (ctx.rank == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::vector<int32_t> v(16);
        for (size_t i = 0; i < v.size(); ++i) v[i] = ctx.rank * 100 + static_cast<int32_t>(i) + round;
        RANK_CHECK_OK(ctx, ibex_allreduce(v.data(), v.data(), v.size(), IBEX_I32, IBEX_SUM, comm, nullptr));
        for (size_t i = 0; i < v.size(); ++i) {
            const int32_t want = 100 * n * (n - 1) / 2 + n * (static_cast<int32_t>(i) + round);
            RANK_CHECK(ctx, v[i] == want, "rank %d round %d: element %zu is %d, want %d", ctx.rank, round, i, v[i], want);
        }
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Eager, SlicesThatLandBeforeTheirCollectiveWait) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(2, late_receiver_body, 60));
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, late_receiver_body, 60));
}

// Far more small collectives than the ring has slots, blocking and queued: the slots are
// handed back and reused, and nothing is mixed up between rounds.
int many_rounds_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init(ctx, &comm));
    const int n = ctx.nranks;
    constexpr int kRounds = 300;
    for (int round = 0; round < kRounds; ++round) {
        double x[3] = {double(ctx.rank), double(round), 1.0};
        RANK_CHECK_OK(ctx, ibex_allreduce(x, x, 3, IBEX_F64, IBEX_SUM, comm, nullptr));
        RANK_CHECK(ctx, x[0] == n * (n - 1) / 2.0 && x[1] == double(n) * round && x[2] == n,
                   "rank %d round %d: got %g %g %g", ctx.rank, round, x[0], x[1], x[2]);
    }
    std::vector<int64_t> vals(kRounds);
    std::vector<ibex_request_t *> reqs(kRounds);
    for (int round = 0; round < kRounds; ++round) {
        vals[static_cast<size_t>(round)] = int64_t(round) * (ctx.rank + 1);
        RANK_CHECK_OK(ctx, ibex_allreduce(&vals[static_cast<size_t>(round)], &vals[static_cast<size_t>(round)], 1,
                                          IBEX_I64, IBEX_SUM, comm, &reqs[static_cast<size_t>(round)]));
    }
    for (int round = 0; round < kRounds; ++round) {
        RANK_CHECK_OK(ctx, ibex_wait(reqs[static_cast<size_t>(round)]));
        const int64_t want = int64_t(round) * n * (n + 1) / 2;
        RANK_CHECK(ctx, vals[static_cast<size_t>(round)] == want, "rank %d queued round %d: %lld, want %lld", ctx.rank,
                   round, static_cast<long long>(vals[static_cast<size_t>(round)]), static_cast<long long>(want));
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Eager, RingSlotsAreReusedOverManyRounds) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(2, many_rounds_body, 90));
    ibex::test::expect_all_passed(ibex::test::run_ranks(4, many_rounds_body, 90));
}

// Counts that differ between ranks on the eager path: named, on every rank, at once.
TEST(Eager, MismatchedSmallCountsAreNamed) {
    ibex::test::expect_mismatch_named(
        ibex::test::run_ranks(2, [](RankCtx &ctx) {
            ::setenv("IBEX_FASTBOX_MAX", "0", 1);
            return ibex::test::mismatched_count_body(ctx, 8, 5);
        }, 60));
}

// Ranks configured with different eager limits disagree on how a slice travels: a clear
// error naming the setting, not corrupted results or a hang.
int unequal_eager_body(RankCtx &ctx) {
    ::setenv("IBEX_COMM_EAGER", ctx.rank == 0 ? "0" : "8192", 1);
    ibex_comm_t *comm = nullptr;
    // The probe at creation already moves small slices: creation or the first call fails.
    ibex_status_t st = init(ctx, &comm);
    if (st == IBEX_OK) {
        float x[4] = {1, 2, 3, 4};
        st = ibex_allreduce(x, x, 4, IBEX_F32, IBEX_SUM, comm, nullptr);
        ibex_comm_abort(comm);
    }
    RANK_CHECK(ctx, st != IBEX_OK, "allreduce across unequal eager limits succeeded");
    ctx.say("rank %d: %s", ctx.rank, ibex_last_error());
    return 0;
}

TEST(Eager, UnequalEagerLimitsAreNamed) {
    auto out = ibex::test::run_ranks(2, unequal_eager_body, 60);
    bool named = false;
    for (auto &o : out) named = named || o.text.find("IBEX_COMM_EAGER") != std::string::npos;
    ibex::test::expect_all_passed(out, true);
    EXPECT_TRUE(named) << "no rank named IBEX_COMM_EAGER";
}

// Nobody waits: the request is only polled with ibex_test, and completes.
int polled_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init(ctx, &comm));
    for (int round = 0; round < 20; ++round) {
        int32_t x = ctx.rank + round;
        ibex_request_t *req = nullptr;
        RANK_CHECK_OK(ctx, ibex_allreduce(&x, &x, 1, IBEX_I32, IBEX_MAX, comm, &req));
        int done = 0;
        const auto t0 = Clock::now();
        while (!done && ms_since(t0) < 10000) {
            RANK_CHECK_OK(ctx, ibex_test(req, &done));
            if (!done) std::this_thread::sleep_for(std::chrono::microseconds(round % 2 ? 0 : 200));
        }
        RANK_CHECK(ctx, done, "rank %d round %d: not done after 10 s of ibex_test", ctx.rank, round);
        RANK_CHECK(ctx, x == ctx.nranks - 1 + round, "rank %d round %d: max %d", ctx.rank, round, x);
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Eager, PolledRequestsComplete) { ibex::test::expect_all_passed(ibex::test::run_ranks(3, polled_body, 60)); }

uint8_t byte_of(int from, size_t msg, int round, size_t i) {
    return static_cast<uint8_t>(from * 31 + msg * 7 + static_cast<size_t>(round) + i * 13);
}

// Each rank its own host (so every peer is over the udp port, whose QPs complete a send
// only when it is acknowledged) and a send queue of 4 WRs (IBEX_COMM_SQ_DEPTH): a pass's
// chain of sends (a batch's messages cut into eager slices, credited slices, queued
// allreduces of several slices) is taken only in part; the rest is taken back and posted
// in a later pass, in order, and every byte lands where it should.
int short_send_queue_body(RankCtx &ctx) {
    const int n = ctx.nranks, r = ctx.rank;
    ::setenv("IBEX_HOST_ID", ("host" + std::to_string(r)).c_str(), 1);
    ::setenv("IBEX_COMM_SQ_DEPTH", "4", 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init(ctx, &comm));
    const int to = (r + 1) % n, from = (r + n - 1) % n;
    const std::vector<size_t> sizes = {30000, 3, 200000, 8192, 24577};
    for (int round = 0; round < 10; ++round) {
        std::vector<std::vector<uint8_t>> outs, ins;
        std::vector<ibex_p2p_op_t> ops;
        for (size_t k = 0; k < sizes.size(); ++k) {
            outs.emplace_back(sizes[k]);
            for (size_t i = 0; i < sizes[k]; ++i) outs[k][i] = byte_of(r, k, round, i);
            ins.emplace_back(sizes[k] + 1, 0xEE);
        }
        for (size_t k = 0; k < sizes.size(); ++k) ops.push_back({IBEX_P2P_SEND, to, outs[k].data(), sizes[k], IBEX_U8});
        for (size_t k = 0; k < sizes.size(); ++k) ops.push_back({IBEX_P2P_RECV, from, ins[k].data(), sizes[k], IBEX_U8});
        RANK_CHECK_OK(ctx, ibex_p2p_batch(ops.data(), ops.size(), comm, nullptr));
        for (size_t k = 0; k < sizes.size(); ++k) {
            for (size_t i = 0; i < sizes[k]; ++i)
                RANK_CHECK(ctx, ins[k][i] == byte_of(from, k, round, i), "rank %d round %d: byte %zu of message %zu",
                           r, round, i, k);
            RANK_CHECK(ctx, ins[k][sizes[k]] == 0xEE, "rank %d: message %zu written past its end", r, k);
        }
    }
    constexpr int kQueued = 40;
    constexpr size_t kCount = 5000; // 20000 bytes: eager slices to every peer
    std::vector<std::vector<float>> v(kQueued, std::vector<float>(kCount));
    std::vector<ibex_request_t *> reqs(kQueued);
    for (int q = 0; q < kQueued; ++q) {
        for (size_t i = 0; i < kCount; ++i) v[q][i] = static_cast<float>(r + q + static_cast<int>(i % 7));
        RANK_CHECK_OK(ctx, ibex_allreduce(v[q].data(), v[q].data(), kCount, IBEX_F32, IBEX_SUM, comm, &reqs[q]));
    }
    for (int q = 0; q < kQueued; ++q) {
        RANK_CHECK_OK(ctx, ibex_wait(reqs[q]));
        for (size_t i = 0; i < kCount; ++i) {
            const float want = static_cast<float>(n * (n - 1) / 2 + n * (q + static_cast<int>(i % 7)));
            RANK_CHECK(ctx, v[q][i] == want, "rank %d allreduce %d: element %zu is %g, want %g", r, q, i, v[q][i], want);
        }
    }
    const uint64_t back = comm->exec.sends_taken_back();
    RANK_CHECK(ctx, back > 0, "rank %d: a send queue of 4 took every chain whole", r);
    ctx.say("rank %d: %llu sends taken back and posted again", r, static_cast<unsigned long long>(back));
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Eager, AShortSendQueueTakesAPassOfSendsInParts) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(2, short_send_queue_body, 90), true);
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, short_send_queue_body, 90), true);
}

} // namespace

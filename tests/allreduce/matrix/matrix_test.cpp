// The correctness matrix (tests/allreduce/matrix/matrix.h) on one communicator per rank
// count (1, 2, 3, 4, 5, 8 forked ranks over udp:lo), then barriers; once as configured by
// default (small counts through the fast boxes), once with every call scheduled.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <tuple>
#include <sys/mman.h>
#include <vector>

#include "tests/allreduce/matrix/matrix.h"

namespace {

using ibex::test::RankCtx;

int rank_body(RankCtx &ctx, std::atomic<int> *barrier_counts, int barrier_rounds, bool fastbox) {
    // Off, the small counts take the scheduled algorithms too.
    if (!fastbox) ::setenv("IBEX_FASTBOX_MAX", "0", 1);
    ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
    cfg.device = "udp:lo";
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, &cfg));
    const int failures = ibex::test::matrix::run_matrix(ctx, comm);
    // Barrier: nobody leaves round k before everybody has arrived at it.
    for (int k = 0; k < barrier_rounds && failures == 0; ++k) {
        barrier_counts[k].fetch_add(1);
        ibex_request_t *req = nullptr;
        RANK_CHECK_OK(ctx, (k % 2) ? ibex_barrier(comm, nullptr) : ibex_barrier(comm, &req));
        if (req) RANK_CHECK_OK(ctx, ibex_wait(req));
        const int seen = barrier_counts[k].load();
        RANK_CHECK(ctx, seen == ctx.nranks, "rank %d left barrier %d when only %d of %d ranks had arrived", ctx.rank, k,
                   seen, ctx.nranks);
    }
    if (failures) {
        ibex_comm_abort(comm);
        return 12;
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

// (ranks, fast boxes on for the counts they take)
class CollectiveMatrix : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(CollectiveMatrix, EveryCollectiveTypeOpAndPlacement) {
    const int n = std::get<0>(GetParam());
    const bool fastbox = std::get<1>(GetParam());
    constexpr int kBarrierRounds = 4;
    // Shared with the forked ranks: one arrival counter per barrier round.
    void *mem = mmap(nullptr, sizeof(std::atomic<int>) * kBarrierRounds, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    auto *counts = new (mem) std::atomic<int>[kBarrierRounds]();
    const auto out = ibex::test::run_ranks(n, [&](RankCtx &ctx) { return rank_body(ctx, counts, kBarrierRounds, fastbox); }, 100);
    munmap(mem, sizeof(std::atomic<int>) * kBarrierRounds);
    ibex::test::expect_all_passed(out);

    ibex::test::matrix::expect_same_bits(out, n);
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectiveMatrix, ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8), ::testing::Bool()),
                         [](const auto &info) {
                             return std::to_string(std::get<0>(info.param)) + "_ranks" +
                                    (std::get<1>(info.param) ? "" : "_scheduled_only");
                         });

} // namespace

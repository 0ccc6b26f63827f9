// A rank killed in the middle of a large allreduce whose data crosses the dpdk port over
// memif (IBEX_SHM=0): the survivor must get an error, not a crash inside DPDK (its memif
// PMD unmaps the link's rings when the dead peer's socket closes, possibly under a burst;
// transport/soft/dpdk/memif_unmap_guard.h), and not a hang.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <unistd.h>

#include "tests/allreduce/killed_rank.h"

namespace {

// Both ranks on one memif socket of this test process: the first to open it serves.
ibex::test::InitComm over_memif() {
    const std::string device = "dpdk:memif:/tmp/ibex-failure-memif-" + std::to_string(getpid()) + ".sock";
    return [device](ibex::test::RankCtx &ctx, ibex_comm_t **comm, int timeout_ms) {
        ::setenv("IBEX_SHM", "0", 1);
        ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
        cfg.device = device.c_str();
        cfg.timeout_ms = timeout_ms;
        return ibex_comm_init_rank(comm, ctx.nranks, &ctx.id, ctx.rank, &cfg);
    };
}

TEST(FailureOverMemif, ClientRankKilledMidAllreduce) { ibex::test::check_killed(2, 1, over_memif()); }
TEST(FailureOverMemif, ServerAndRootRankKilledMidAllreduce) { ibex::test::check_killed(2, 0, over_memif()); }

} // namespace

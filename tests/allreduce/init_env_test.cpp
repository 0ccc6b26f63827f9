// ibex_comm_init_from_env with the variables each launcher sets (mpirun, srun, torchrun,
// ibex's own): the ranks find rank 0 at the given address and agree on rank and size.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cstdlib>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "tests/allreduce/ranks.h"
#include "tests/support/free_port.h"

namespace {

using ibex::test::RankCtx;

using ibex::test::free_port;

struct Launcher {
    const char *name;
    const char *rank_var;
    const char *size_var;
    bool master; // rendezvous from MASTER_ADDR/MASTER_PORT instead of IBEX_ROOT_ADDR
};

int env_body(RankCtx &ctx, const Launcher &l, int port) {
    for (const char *v : {"IBEX_RANK", "IBEX_NRANKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",
                          "SLURM_NTASKS", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "IBEX_ROOT_ADDR"})
        unsetenv(v);
    setenv(l.rank_var, std::to_string(ctx.rank).c_str(), 1);
    setenv(l.size_var, std::to_string(ctx.nranks).c_str(), 1);
    if (l.master) {
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    } else {
        setenv("IBEX_ROOT_ADDR", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
    }
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_from_env(&comm, nullptr));
    int rank = -1, size = -1;
    RANK_CHECK_OK(ctx, ibex_comm_rank(comm, &rank));
    RANK_CHECK_OK(ctx, ibex_comm_size(comm, &size));
    RANK_CHECK(ctx, rank == ctx.rank && size == ctx.nranks, "%s: rank %d size %d", l.name, rank, size);
    int64_t x = 1 << ctx.rank;
    RANK_CHECK_OK(ctx, ibex_allreduce(&x, &x, 1, IBEX_I64, IBEX_SUM, comm, nullptr));
    RANK_CHECK(ctx, x == (1 << ctx.nranks) - 1, "%s: allreduce gave %lld", l.name, static_cast<long long>(x));
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(InitFromEnv, EachLauncher) {
    const Launcher launchers[] = {
        {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", false},
        {"srun", "SLURM_PROCID", "SLURM_NTASKS", false},
        {"torchrun", "RANK", "WORLD_SIZE", true},
        {"ibex", "IBEX_RANK", "IBEX_NRANKS", false},
    };
    for (const Launcher &l : launchers) {
        SCOPED_TRACE(l.name);
        const int port = free_port();
        ibex::test::expect_all_passed(
            ibex::test::run_ranks(3, [&](RankCtx &ctx) { return env_body(ctx, l, port); }, 60));
    }
}

} // namespace

#include "runtime/bootstrap/launcher_env.h"

#include <cerrno>
#include <cstdlib>

#include "runtime/base/status.h"

namespace ibex::bootstrap {
namespace {

struct RankVars {
    const char *rank;
    const char *size;
    const char *launcher;
};

constexpr RankVars kVars[] = {
    {"IBEX_RANK", "IBEX_NRANKS", "ibex"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun"},
    {"SLURM_PROCID", "SLURM_NTASKS", "srun"},
    {"RANK", "WORLD_SIZE", "torchrun"},
};

const char *env(const char *name) {
    const char *v = std::getenv(name);
    return (v && *v) ? v : nullptr;
}

bool parse_int(const char *s, long lo, long hi, int *out) {
    char *end = nullptr;
    errno = 0;
    const long v = std::strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = static_cast<int>(v);
    return true;
}

} // namespace

ibex_status_t launch_info_from_env(LaunchInfo *out) {
    const RankVars *found = nullptr;
    for (const RankVars &v : kVars) {
        if (env(v.rank) && env(v.size)) {
            found = &v;
            break;
        }
    }
    if (!found)
        return fail(IBEX_ERR_INVALID_ARGUMENT,
                    "no rank/size in the environment: set IBEX_RANK and IBEX_NRANKS, or launch with mpirun "
                    "(OMPI_COMM_WORLD_RANK/SIZE), srun (SLURM_PROCID/SLURM_NTASKS) or torchrun (RANK/WORLD_SIZE)");
    if (!parse_int(env(found->size), 1, 1 << 20, &out->nranks))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "%s=\"%s\" is not a rank count", found->size, env(found->size));
    if (!parse_int(env(found->rank), 0, out->nranks - 1, &out->rank))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "%s=\"%s\" is not a rank below %s=%d", found->rank,
                    env(found->rank), found->size, out->nranks);
    out->launcher = found->launcher;
    if (const char *root = env("IBEX_ROOT_ADDR")) {
        out->root_addr = root;
    } else if (env("MASTER_ADDR") && env("MASTER_PORT")) {
        out->root_addr = std::string(env("MASTER_ADDR")) + ":" + env("MASTER_PORT");
    } else {
        return fail(IBEX_ERR_INVALID_ARGUMENT,
                    "%s gives rank %d of %d but no rendezvous: set IBEX_ROOT_ADDR=host:port (or MASTER_ADDR "
                    "and MASTER_PORT) to where rank 0 should listen",
                    found->launcher, out->rank, out->nranks);
    }
    return IBEX_OK;
}

} // namespace ibex::bootstrap

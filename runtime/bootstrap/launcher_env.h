// Rank, size and rendezvous address from the environment of whatever started this process:
// ibex's own variables, Open MPI's mpirun, Slurm's srun or PyTorch's torchrun.
#pragma once

#include <string>

#include <ibex/ibex.h>

namespace ibex::bootstrap {

struct LaunchInfo {
    int rank = -1;
    int nranks = 0;
    std::string root_addr; // "host:port" where rank 0 listens
    const char *launcher = ""; // "ibex", "mpirun", "srun", "torchrun"
};

// First complete pair wins: IBEX_RANK/IBEX_NRANKS, OMPI_COMM_WORLD_RANK/SIZE,
// SLURM_PROCID/SLURM_NTASKS, RANK/WORLD_SIZE. Rendezvous: IBEX_ROOT_ADDR, else
// MASTER_ADDR:MASTER_PORT. Errors name the variables that are missing or malformed.
ibex_status_t launch_info_from_env(LaunchInfo *out);

} // namespace ibex::bootstrap

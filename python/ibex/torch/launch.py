"""torch.distributed's env:// rendezvous under launchers other than torchrun."""

import os

_RANK_SOURCES = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
)


def env_from_launcher(master_addr="127.0.0.1", master_port=29500):
    """Fills RANK, WORLD_SIZE and LOCAL_RANK from mpirun's (Open MPI, MPICH) or srun's
    variables when torchrun did not set them, and MASTER_ADDR/MASTER_PORT when unset, so
    ``init_process_group("ibex")`` works under mpirun. Returns (rank, world_size)."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        for rank_var, size_var, local_var in _RANK_SOURCES:
            if rank_var in os.environ and size_var in os.environ:
                os.environ["RANK"] = os.environ[rank_var]
                os.environ["WORLD_SIZE"] = os.environ[size_var]
                os.environ.setdefault("LOCAL_RANK", os.environ.get(local_var, "0"))
                break
        else:
            raise RuntimeError(
                "ibex.torch.env_from_launcher: no RANK/WORLD_SIZE and no mpirun or srun "
                "variables (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID) in the environment"
            )
    os.environ.setdefault("MASTER_ADDR", master_addr)
    os.environ.setdefault("MASTER_PORT", str(master_port))
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

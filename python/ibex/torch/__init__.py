"""The ``ibex`` backend of ``torch.distributed``.

Importing this module registers it::

    import ibex.torch
    torch.distributed.init_process_group("ibex")      # under torchrun, or env:// set up

Rendezvous goes through the store torch hands the backend (rank 0 publishes ibex's
unique id there), so nothing besides torch's own init_method is needed. Rank 0 picks the
device for all: its IBEX_DEVICE, else ``shm`` when every rank shares its host, else each
rank's default; across hosts set IBEX_BOOTSTRAP_ADDR on rank 0 to an address the others
reach.

For a job that keeps gloo or NCCL as its process group, ``allreduce_hook`` runs DDP's
gradient allreduce over an ibex group instead.
"""


import torch.distributed as dist

try:
    from ibex import _torch_backend
except ImportError as e:  # the build found no torch, or a different one
    raise ImportError(
        "ibex.torch: the ibex PyTorch backend extension is not built for this torch "
        f"({e}); rebuild ibex with torch installed (python3-torch, libtorch-dev)"
    ) from e

from ibex.torch.hooks import allreduce_hook, new_group  # noqa: F401
from ibex.torch.launch import env_from_launcher  # noqa: F401

BACKEND = "ibex"


def _create(store, rank, world_size, timeout):
    return _torch_backend.create_backend(store, rank, world_size, timeout)


def _register():
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    try:
        # torch >= 2.1: one backend object per device type; ibex serves both.
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
    except TypeError:
        dist.Backend.register_backend(BACKEND, _create)


_register()

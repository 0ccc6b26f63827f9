"""DDP communication hook: gradients allreduced by ibex while the job's process group
stays gloo or NCCL.

    group = ibex.torch.new_group()           # collective: every rank calls it
    model.register_comm_hook(group, ibex.torch.allreduce_hook)
"""

import torch
import torch.distributed as dist


def new_group(ranks=None, timeout=None):
    """An ibex process group over `ranks` (default: all) of the initialised job."""
    kwargs = {"backend": "ibex"}
    if timeout is not None:
        kwargs["timeout"] = timeout
    return dist.new_group(ranks=ranks, **kwargs)


def allreduce_hook(process_group, bucket):
    """Averages the bucket over `process_group` (an ibex group) and returns the future
    DDP waits on. Same arithmetic as DDP's default: divide by the group size, then sum."""
    if process_group is None:
        raise ValueError(
            "ibex.torch.allreduce_hook needs an ibex process group as its state: "
            "model.register_comm_hook(ibex.torch.new_group(), ibex.torch.allreduce_hook)"
        )
    tensor = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
    tensor.div_(process_group.size())
    work = dist.all_reduce(tensor, group=process_group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


__all__ = ["allreduce_hook", "new_group"]
_ = torch  # the hook's tensors are torch's; keep the import explicit

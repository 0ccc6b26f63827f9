"""ibex: kernel-bypass RDMA collectives and queue pairs from Python.

Communicators and collectives (``Comm``) work on any buffer-protocol object (NumPy
arrays, bytearray, memoryview) and on torch tensors, CPU or CUDA, through their data
pointers: nothing is copied. A failed call raises ``IbexError``; its ``status`` is the
``ibex_status_t`` name and its ``detail`` the library's ``ibex_last_error()``.

``import ibex.torch`` registers the ``ibex`` backend of ``torch.distributed``.
"""

from ibex._core import (  # noqa: F401  (re-exported API)
    ACCESS_LOCAL_WRITE,
    ACCESS_REMOTE_ATOMIC,
    ACCESS_REMOTE_READ,
    ACCESS_REMOTE_WRITE,
    AVG,
    MAX,
    MIN,
    PROD,
    QPS_ERR,
    QPS_RTS,
    SUM,
    WR_RDMA_READ,
    WR_RDMA_WRITE,
    WR_RDMA_WRITE_WITH_IMM,
    WR_SEND,
    WR_SEND_WITH_IMM,
    Comm,
    CommBuffer,
    CompletionQueue,
    Context,
    IbexError,
    MemoryRegion,
    Op,
    QueuePair,
    Request,
    cuda_available,
    devices,
    get_unique_id,
    version,
)

__version__ = version()

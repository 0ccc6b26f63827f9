"""torch.distributed (gloo) allreduce, f32 sum, the peer of ibex_allreduce_perf across hosts.

    python3 gloo_allreduce.py RANK WORLD MASTER_ADDR PORT [MIN_BYTES MAX_BYTES ITERS [cpu|cuda]]

With "cuda" the tensors live on GPU (rank % device count), as a framework that keeps gloo for
its CUDA tensors has them; gloo then stages them through host memory itself.

Prints one line per size: bytes, median time in microseconds over ITERS timed runs (after
one warm-up), and busbw in GB/s as nccl-tests defines it (algbw * 2 (n - 1) / n).
"""
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main():
    rank, world, addr, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    lo = int(sys.argv[5]) if len(sys.argv) > 5 else 1 << 20
    hi = int(sys.argv[6]) if len(sys.argv) > 6 else 16 << 20
    iters = int(sys.argv[7]) if len(sys.argv) > 7 else 5
    device = sys.argv[8] if len(sys.argv) > 8 else "cpu"
    if device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    elif device != "cpu":
        sys.exit(f"gloo_allreduce.py: device must be cpu or cuda, not {device!r}")
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    size = lo
    while size <= hi:
        t = torch.ones(size // 4, dtype=torch.float32, device=device)
        dist.all_reduce(t)  # warm-up
        times = []
        for _ in range(iters):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(t)
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        med = statistics.median(times)
        busbw = size / med / 1e9 * 2 * (world - 1) / world
        if rank == 0:
            print(f"{size} {med * 1e6:.1f} {busbw:.3f}", flush=True)
        size *= 2
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

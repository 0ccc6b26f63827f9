#!/usr/bin/env python3
"""torch.distributed.all_reduce (or --op all_to_all_single, send_recv) alone on any backend: the
median of 200 calls after 20 warm-up calls, on rank 0. Run under torchrun; compare
backends in one sitting.

    PYTHONPATH=build/python torchrun --redirects 1 --tee 1 --nproc_per_node 2 \\
        bench/torch_ddp/allreduce_bench.py --backend ibex --floats 400000
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="ibex")
    p.add_argument("--floats", type=int, default=400000, help="float32 elements")
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--op", default="all_reduce",
                   choices=["all_reduce", "all_to_all_single", "all_to_all_uneven", "send_recv"],
                   help="all_to_all_single: --floats is a rank's whole send buffer, a block per rank; "
                        "all_to_all_uneven: rows of 1024 floats, rank r sends ((r + q) %% 3 + 1) * 64 rows to q; "
                        "send_recv: --floats to rank+1 and as many from rank-1, one batch_isend_irecv")
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.backend == "ibex":
        import ibex.torch  # noqa: F401

    dist.init_process_group(a.backend)
    t = torch.ones(a.floats)
    out = torch.empty_like(t)
    call = (lambda: dist.all_reduce(t)) if a.op == "all_reduce" else (lambda: dist.all_to_all_single(out, t))
    if a.op == "all_to_all_uneven":
        r, n = dist.get_rank(), dist.get_world_size()
        sends = [((r + q) % 3 + 1) * 64 for q in range(n)]
        recvs = [((q + r) % 3 + 1) * 64 for q in range(n)]
        t, out = torch.ones(sum(sends), 1024), torch.empty(sum(recvs), 1024)
        a.floats = t.numel()
        call = lambda: dist.all_to_all_single(out, t, output_split_sizes=recvs, input_split_sizes=sends)
    if a.op == "send_recv":
        r, n = dist.get_rank(), dist.get_world_size()

        def call():
            ops = [dist.P2POp(dist.isend, t, (r + 1) % n), dist.P2POp(dist.irecv, out, (r - 1) % n)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
    for _ in range(20):
        call()
    times = []
    for _ in range(a.iters):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        print(f"{a.op} {a.backend} {os.environ.get('IBEX_DEVICE', '')} {a.floats * 4} B x "
              f"{dist.get_world_size()} ranks: median {statistics.median(times) * 1e6:.1f} us")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

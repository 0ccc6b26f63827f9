#!/usr/bin/env python3
"""Time per DDP training step, ibex against gloo, on one host.

Runs python/examples/ddp_train.py under torchrun for each backend, alternating the
backends run by run (so background load hits both alike), --repeats times each, and
prints each backend's median time per step over the runs with the spread (min..max) and
the ratio ibex / gloo of the medians.

    PYTHONPATH=build/python python3 bench/torch_ddp/bench_ddp.py --nproc 2 --steps 60
    PYTHONPATH=build/python python3 bench/torch_ddp/bench_ddp.py --backends gloo,ibex,ibex@shm
    PYTHONPATH=build/python python3 bench/torch_ddp/bench_ddp.py --backends gloo,ibex,none
    PYTHONPATH=build/python python3 bench/torch_ddp/bench_ddp.py --model bag --nproc 4

"none" runs the same steps with gradients not reduced at all (a DDP hook that returns
them as they are): the floor that no backend's step can go below, so the ratios say how
much of the step is communication. For example, if none / gloo is 0.8, no backend can
reach 0.8x gloo on that model and host.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIENT = os.path.join(ROOT, "python", "examples", "ddp_train.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(spec, a, out):
    """spec: a backend name, or ibex@DEVICE for ibex on that device (IBEX_DEVICE)."""
    backend, _, device = spec.partition("@")
    env = dict(os.environ, **({"IBEX_DEVICE": device} if device else {}))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1",
           "--nproc_per_node", str(a.nproc), "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), CLIENT, "--backend", backend,
           "--steps", str(a.steps), "--warmup", str(a.warmup), "--model", a.model, "--width", str(a.width),
           "--batch", str(a.batch), "--out", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return torch.load(out)["step_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--model", default="cnn", choices=["cnn", "bag"],
                   help="cnn: compute-bound; bag: 8 MiB of gradients, little compute (see ddp_train.py)")
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--backends", default="gloo,ibex",
                   help="comma list; ibex@shm runs ibex on the shm device; none: no "
                   "communication (the floor)")
    a = p.parse_args()
    backends = a.backends.split(",")
    times = {b: [] for b in backends}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeats):
            for b in backends:
                times[b].append(one_run(b, a, os.path.join(tmp, f"{b}_{r}.pt")))
    device = os.environ.get("IBEX_DEVICE", "shm (one host, ibex.torch's choice)")
    shape = f"width {a.width}" if a.model == "cnn" else "vocab 32768 x dim 64"
    print(f"# {a.model} model ({shape}), {a.nproc} ranks, {a.steps} steps ({a.warmup} warm-up), "
          f"batch {a.batch}/rank, ibex on {device} unless ibex@DEVICE; median of "
          f"{a.repeats} runs, each run's value its median step; load average "
          f"{os.getloadavg()[0]:.1f}")
    med = {}
    for b in backends:
        med[b] = statistics.median(times[b])
        print(f"{b:10s} {med[b] * 1e3:8.2f} ms/step   spread {min(times[b]) * 1e3:.2f}.."
              f"{max(times[b]) * 1e3:.2f}   runs {[round(t * 1e3, 2) for t in times[b]]}")
    for b in backends:
        if (b.startswith("ibex") or b == "none") and "gloo" in med:
            print(f"{b} / gloo = {med[b] / med['gloo']:.3f}")
    for b in backends:
        if b != "none" and "none" in med:
            print(f"{b} / none (communication's share over the floor) = {med[b] / med['none']:.3f}")


if __name__ == "__main__":
    main()

"""A small model trained with DistributedDataParallel on synthetic data, on any
torch.distributed backend: the same seed gives every backend the same model, data and
step sequence, so their loss curves and weights can be compared.

Two models (--model):
  cnn  a small CNN on 28x28 images (206 k parameters at width 16): compute-bound, the
       step is mostly convolutions whatever the backend;
  bag  an embedding-bag text classifier (fastText-like: the mean of 32 token embeddings,
       then a linear layer; 2.1 M parameters at vocab 32768, dim 64): little compute and
       8 MiB of gradients per step, so communication-bound, as the embedding tables of
       recommendation and language models are.

    torchrun --nproc_per_node 2 python/examples/ddp_train.py --backend ibex --out run.pt
    mpirun -np 2 -x MASTER_PORT=29500 python3 python/examples/ddp_train.py --backend ibex

Rank 0 writes --out: per-step losses of every rank, the final weights, and the median
time per step (after --warmup steps).
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class SmallCnn(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.fc1 = nn.Linear(2 * width * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class BagClassifier(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim, mode="mean")  # dense gradients, as DDP needs
        self.fc = nn.Linear(dim, 10)

    def forward(self, tokens):
        return self.fc(self.embed(tokens))


def synthetic_texts(rank, steps, batch, seed, vocab, length=32):
    """Each rank's own shard: texts of 32 tokens from the whole vocabulary, a quarter of
    them replaced by keywords of the text's class (16 per class)."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    keywords = 16
    for _ in range(steps):
        labels = torch.randint(0, 10, (batch,), generator=g)
        tokens = torch.randint(0, vocab, (batch, length), generator=g)
        tokens[:, : length // 4] = labels[:, None] * keywords + torch.randint(0, keywords, (batch, length // 4),
                                                                               generator=g)
        yield tokens, labels


def synthetic_batches(rank, steps, batch, seed):
    """Each rank's own shard: images whose class shows as a brighter band, plus noise."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    for _ in range(steps):
        labels = torch.randint(0, 10, (batch,), generator=g)
        images = torch.randn(batch, 1, 28, 28, generator=g) * 0.5
        for i, c in enumerate(labels.tolist()):
            images[i, 0, 2 * c + 4, :] += 2.0
        yield images, labels


def skip_communication(_state, bucket):
    """A DDP hook that hands each bucket back unreduced: what a step costs without any
    communication, the floor every backend's step time sits above."""
    done = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="ibex", help="ibex, gloo, ibex-hook (gloo "
                   "process group, gradients through ibex.torch.allreduce_hook), or none (gloo "
                   "process group, gradients not reduced at all: the step's floor; the "
                   "ranks' weights then differ)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the timing")
    p.add_argument("--batch", type=int, default=32, help="per rank")
    p.add_argument("--model", default="cnn", choices=["cnn", "bag"], help="see above")
    p.add_argument("--width", type=int, default=16, help="cnn: channels of the first conv")
    p.add_argument("--vocab", type=int, default=32768, help="bag: vocabulary size")
    p.add_argument("--dim", type=int, default=64, help="bag: embedding width")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=None, help="default: 0.05 (cnn), 3 (bag)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--out", default="", help="rank 0 saves losses, weights, timing here")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    if a.backend.startswith("ibex"):
        import ibex.torch

        ibex.torch.env_from_launcher()  # mpirun/srun: RANK, WORLD_SIZE from theirs
    pg_backend = "gloo" if a.backend in ("ibex-hook", "none") else a.backend
    dist.init_process_group(pg_backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(a.seed)  # same initial weights everywhere (DDP broadcasts them too)
    net = SmallCnn(a.width) if a.model == "cnn" else BagClassifier(a.vocab, a.dim)
    model = nn.parallel.DistributedDataParallel(net)
    if a.backend == "ibex-hook":
        model.register_comm_hook(ibex.torch.new_group(), ibex.torch.allreduce_hook)
    if a.backend == "none":
        model.register_comm_hook(None, skip_communication)
    lr = a.lr if a.lr is not None else (0.05 if a.model == "cnn" else 3.0)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    losses, times = [], []
    batches = (synthetic_batches(rank, a.steps, a.batch, a.seed) if a.model == "cnn" else
               synthetic_texts(rank, a.steps, a.batch, a.seed, a.vocab))
    for step, (x, y) in enumerate(batches):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
        losses.append(loss.detach())

    all_losses = torch.stack(losses)
    gathered = [torch.empty_like(all_losses) for _ in range(world)]
    dist.all_gather(gathered, all_losses)
    if rank == 0:
        step_s = statistics.median(times) if times else float("nan")
        print(f"backend={a.backend} model={a.model} world={world} steps={a.steps} "
              f"loss {all_losses[0]:.4f} -> {all_losses[-1]:.4f} "
              f"median step {step_s * 1e3:.2f} ms", flush=True)
        if a.out:
            torch.save({"losses": torch.stack(gathered), "step_s": step_s,
                        "weights": {k: v.clone() for k, v in model.module.state_dict().items()}},
                       a.out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""One rank of a torch_backend_test scenario: python3 torch_worker.py SCENARIO RANK WORLD
PORT. Prints "RESULT <json>" on success; a scenario that expects an error prints the error
it got. The store is a TCPStore on PORT hosted by rank 0."""

import datetime
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import ibex.torch  # noqa: F401  (registers the backend)


def init(rank, world, port, timeout_s=20):
    store = dist.TCPStore("127.0.0.1", port, is_master=(rank == 0),
                          timeout=datetime.timedelta(seconds=timeout_s))
    dist.init_process_group("ibex", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


def expect_error(fn):
    try:
        fn()
    except Exception as e:  # torch raises RuntimeError (or ValueError) with our text
        return str(e).splitlines()[0]
    return "NO ERROR"


def point_to_point(rank, world, dev):
    """Sends and receives, and the collectives made of them, on tensors of device dev (a
    CUDA device: the backend stages their data through host memory)."""
    out = {}
    # Uneven splits: rank r sends (r + q) % 3 + 1 rows to q, valued 100 r + q.
    sends = [(rank + q) % 3 + 1 for q in range(world)]
    recvs = [(q + rank) % 3 + 1 for q in range(world)]
    inp = torch.cat([torch.full((c, 2), 100 * rank + q, dtype=torch.float32, device=dev) for q, c in enumerate(sends)])
    outp = torch.zeros(sum(recvs), 2, device=dev)
    dist.all_to_all_single(outp, inp, output_split_sizes=recvs, input_split_sizes=sends)
    out["alltoall_uneven"] = outp[:, 1].tolist()
    # Point to point: a pipeline down the ranks (blocking send and recv), a ring exchange
    # of 1 MiB each way with batch_isend_irecv, and isend/irecv to both neighbours waited
    # in reverse order.
    t = torch.zeros(5, dtype=torch.float64, device=dev)
    if rank > 0:
        dist.recv(t, rank - 1)
    t += 1
    if rank + 1 < world:
        dist.send(t, rank + 1)
    out["p2p_pipeline"] = t[0].item()
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    mine = torch.full((1 << 18,), float(rank), dtype=torch.float32, device=dev)
    theirs = torch.zeros(1 << 18, dtype=torch.float32, device=dev)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, nxt), dist.P2POp(dist.irecv, theirs, prv)])
    for w in reqs:
        w.wait()
    out["p2p_ring"] = [theirs[0].item(), theirs[-1].item()]
    a, b = torch.zeros(3, dtype=torch.int64, device=dev), torch.zeros(3, dtype=torch.int64, device=dev)
    works = [dist.isend(torch.full((3,), 10 * rank + 1, dtype=torch.int64, device=dev), nxt),
             dist.isend(torch.full((3,), 10 * rank + 2, dtype=torch.int64, device=dev), prv),
             dist.irecv(a, prv), dist.irecv(b, nxt)]
    for w in reversed(works):
        w.wait()
    out["p2p_neighbours"] = [a[0].item(), b[0].item()]
    # gather, scatter, all_to_all with a tensor per rank (each one batch of sends and
    # receives).
    g = [torch.zeros(3, dtype=torch.int32, device=dev) for _ in range(world)] if rank == world - 1 else None
    dist.gather(torch.full((3,), rank * 7, dtype=torch.int32, device=dev), g, dst=world - 1)
    out["gather"] = [t[0].item() for t in g] if g else None
    s = torch.zeros(2, device=dev)
    dist.scatter(s, [torch.full((2,), 10.0 + q, device=dev) for q in range(world)] if rank == 1 else None, src=1)
    out["scatter"] = s.tolist()
    ins = [torch.full((q + 1,), 100 * rank + q, dtype=torch.int64, device=dev) for q in range(world)]
    outs = [torch.zeros(rank + 1, dtype=torch.int64, device=dev) for _ in range(world)]
    dist.all_to_all(outs, ins)
    out["alltoall_list"] = [t.tolist() for t in outs]
    return out


def collectives(rank, world):
    out = {}
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                  torch.int64, torch.uint8):
        t = torch.full((1001,), rank + 1, dtype=dtype)
        dist.all_reduce(t)
        out[f"allreduce_sum_{dtype}"] = t.double().unique().tolist()
    for name, op in (("prod", dist.ReduceOp.PRODUCT), ("min", dist.ReduceOp.MIN),
                     ("max", dist.ReduceOp.MAX)):
        t = torch.full((17,), float(rank + 2))
        dist.all_reduce(t, op=op)
        out[f"allreduce_{name}"] = t.unique().tolist()
    if hasattr(dist.ReduceOp, "AVG"):
        t = torch.full((8,), float(rank), dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        out["allreduce_avg"] = t.unique().tolist()
    big = torch.arange(3 * 1024 * 1024, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(big)
    out["allreduce_big_ok"] = bool(torch.equal(
        big, torch.arange(3 * 1024 * 1024, dtype=torch.float32) * (world * (world + 1) // 2)))
    b = torch.arange(5.0) if rank == world - 1 else torch.zeros(5)
    dist.broadcast(b, src=world - 1)
    out["broadcast"] = b.tolist()
    r = torch.full((4,), float(rank + 1))
    dist.reduce(r, dst=0)
    out["reduce_root"] = r.tolist() if rank == 0 else None
    gathered = [torch.zeros(3, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(gathered, torch.arange(3) + 10 * rank)
    out["allgather"] = [g.tolist() for g in gathered]
    flat = torch.zeros(world * 2)
    dist._all_gather_base(flat, torch.full((2,), float(rank)))
    out["allgather_base"] = flat.tolist()
    rs = torch.zeros(2)
    dist.reduce_scatter(rs, [torch.full((2,), float(i * 10 + rank)) for i in range(world)])
    out["reduce_scatter"] = rs.tolist()
    rsb = torch.zeros(3)
    dist._reduce_scatter_base(rsb, torch.arange(3.0 * world) + rank)
    out["reduce_scatter_base"] = rsb.tolist()
    a2a = torch.zeros(world * 2)
    dist.all_to_all_single(a2a, torch.arange(world * 2.0) + 100 * rank)
    out["alltoall_single"] = a2a.tolist()
    rows = torch.zeros(world * 2, 3, dtype=torch.int64)
    dist.all_to_all_single(rows, torch.full((world * 2, 3), rank, dtype=torch.int64),
                           output_split_sizes=[2] * world, input_split_sizes=[2] * world)
    out["alltoall_rows"] = rows[:, 0].tolist()
    dist.barrier()
    out.update(point_to_point(rank, world, torch.device("cpu")))
    c1, c2 = torch.full((4,), float(rank)), torch.full((2, 3), 1.0)
    dist.all_reduce_coalesced([c1, c2])
    out["allreduce_coalesced"] = [c1[0].item(), c2[1, 2].item()]
    # Two tensors of different shapes per rank; outputs[q][i] is rank q's tensor i.
    g1, g2 = torch.full((3,), 10.0 * rank), torch.arange(4, dtype=torch.float32).view(2, 2) + rank
    gathered = [[torch.zeros(3), torch.zeros(2, 2)] for _ in range(world)]
    dist.all_gather_coalesced(gathered, [g1, g2])
    out["allgather_coalesced"] = [[a.tolist(), b.view(-1).tolist()] for a, b in gathered]
    # Many async operations in flight, finished out of order by the caller.
    works = [dist.all_reduce(torch.full((64,), float(i)), async_op=True) for i in range(20)]
    futs = [w.get_future() for w in works]
    for w in reversed(works):
        w.wait()
    out["async_values"] = [f.value()[0][0].item() for f in futs]
    return out


def bad_input(rank, world):
    e = {}
    e["non_contiguous"] = expect_error(lambda: dist.all_reduce(torch.ones(4, 4).t()))
    e["sparse"] = expect_error(lambda: dist.all_reduce(torch.ones(3).to_sparse()))
    e["dtype_int8"] = expect_error(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int8)))
    e["dtype_mismatch"] = expect_error(lambda: dist._all_gather_base(
        torch.zeros(2 * world, dtype=torch.float64), torch.zeros(2)))

    e["size_mismatch"] = expect_error(lambda: dist._all_gather_base(
        torch.zeros(2 * world + 1), torch.zeros(2)))
    e["op_band"] = expect_error(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32),
                                                        op=dist.ReduceOp.BAND))
    e["send_tag"] = expect_error(lambda: dist.send(torch.ones(2), (rank + 1) % world, tag=3))
    e["send_self"] = expect_error(lambda: dist.send(torch.ones(2), rank))
    e["alltoall_splits"] = expect_error(lambda: dist.all_to_all_single(
        torch.ones(4), torch.ones(4), output_split_sizes=[1, 2] + [0] * (world - 2),
        input_split_sizes=[1, 3] + [0] * (world - 2)))
    e["alltoall_list"] = expect_error(lambda: dist.all_to_all([torch.ones(1)] * (world + 1),
                                                              [torch.ones(1)] * world))
    # Refused on every rank alike (a refusal on the root alone would leave the others' sends
    # to it unmatched).
    e["gather_root"] = expect_error(lambda: dist.gather(torch.ones(2), None, dst=world + 3))
    e["recv_any"] = expect_error(lambda: dist.recv(torch.ones(2)))
    e["allgather_coalesced_shape"] = expect_error(lambda: dist.all_gather_coalesced(
        [[torch.zeros(3)] for _ in range(world)], [torch.ones(2)]))
    # The group still works after refusals.
    t = torch.ones(3)
    dist.all_reduce(t)
    e["after"] = t.tolist()
    return e


def killed_peer(rank, world):
    t = torch.ones(1 << 16)
    last_ok = time.monotonic()
    for step in range(100000):
        if rank == world - 1 and step == 20:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            dist.all_reduce(t)
            t.fill_(1.0)
            last_ok = time.monotonic()
        except RuntimeError as err:
            return {"error": str(err).splitlines()[0], "after_s": time.monotonic() - last_ok,
                    "step": step}
    return {"error": "NO ERROR"}


def cuda_tensors(rank, world):
    """Collectives, sends and receives on CUDA tensors (every rank on cuda:0, as the C-level
    GPU tests do): the backend hands their data pointers to ibex, which stages them through
    host memory."""
    dev = torch.device("cuda", 0)
    out = {}
    t = torch.full((1001,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    out["allreduce_sum"] = t.cpu().unique().tolist()
    # Larger than one staging chunk (IBEX_GPU_CHUNK, 4 MiB): several chunks in flight.
    big = torch.arange(3 * 1024 * 1024, dtype=torch.float32, device=dev) * (rank + 1)
    dist.all_reduce(big)
    out["allreduce_big_ok"] = bool(torch.equal(
        big, torch.arange(3 * 1024 * 1024, dtype=torch.float32, device=dev) * (world * (world + 1) // 2)))
    b = torch.arange(5.0, device=dev) if rank == world - 1 else torch.zeros(5, device=dev)
    dist.broadcast(b, src=world - 1)
    out["broadcast"] = b.cpu().tolist()
    flat = torch.zeros(world * 2, device=dev)
    dist._all_gather_base(flat, torch.full((2,), float(rank), device=dev))
    out["allgather_base"] = flat.cpu().tolist()
    rsb = torch.zeros(3, device=dev)
    dist._reduce_scatter_base(rsb, torch.arange(3.0 * world, device=dev) + rank)
    out["reduce_scatter_base"] = rsb.cpu().tolist()
    works = [dist.all_reduce(torch.full((64,), float(i), device=dev), async_op=True) for i in range(8)]
    for w in reversed(works):
        w.wait()
    out["async_values"] = [w.get_future().value()[0][0].item() for w in works]
    out.update(point_to_point(rank, world, dev))
    out["mixed_devices"] = expect_error(lambda: dist._all_gather_base(torch.zeros(world * 2),
                                                                      torch.zeros(2, device=dev)))
    return out


def main():
    scenario, rank, world, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(1)
    if scenario == "world_mismatch":
        # Rank 1 was told a different world size than everyone else.
        told = world + 1 if rank == 1 else world
        t0 = time.monotonic()
        err = expect_error(lambda: init(rank, told, port, timeout_s=6))
        print("RESULT " + json.dumps({"error": err, "after_s": time.monotonic() - t0}), flush=True)
        return
    if scenario == "rank_outside":
        err = expect_error(lambda: init(rank if rank == 0 else world, world, port, timeout_s=6))
        print("RESULT " + json.dumps({"error": err}), flush=True)
        return
    init(rank, world, port)
    result = {"collectives": collectives, "bad_input": bad_input,
              "killed_peer": killed_peer, "cuda_tensors": cuda_tensors}[scenario](rank, world)
    print("RESULT " + json.dumps(result), flush=True)
    if scenario != "killed_peer":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

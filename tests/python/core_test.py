"""ibex._core from Python: collectives on NumPy arrays, bytearrays and torch tensors
(zero copy: results land in the caller's memory), async requests, IbexError, argument
refusals, and a two-QP script over udp:lo."""

import multiprocessing as mp
import time
import unittest

import numpy as np

import ibex

try:
    import torch
except ImportError:  # the core package does not need torch
    torch = None

DEVICE = "udp:lo"


def run_ranks(n, body, timeout=60, destroy=True, qp=None):
    """Forks n ranks running body(comm) -> picklable result; returns the results by rank.
    qp(rank): the rank's Comm(qp=...)."""
    uid = ibex.get_unique_id()  # the forked rank 0 inherits the listener
    ctx = mp.get_context("fork")
    q = ctx.Queue()

    def main(rank):
        try:
            comm = ibex.Comm(n, uid, rank, device=DEVICE, timeout_ms=20000, qp=qp(rank) if qp else None)
            out = body(comm)
            if destroy:
                comm.destroy()
            q.put((rank, out))
        except BaseException as e:  # reported to the test, not lost in the child
            q.put((rank, f"EXCEPTION {type(e).__name__}: {e}"))

    procs = [ctx.Process(target=main, args=(r,)) for r in range(n)]
    for p in procs:
        p.start()
    results = {}
    deadline = time.monotonic() + timeout
    while len(results) < n and time.monotonic() < deadline:
        try:
            rank, out = q.get(timeout=1)
            results[rank] = out
        except Exception:
            pass
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()
    return results


def numpy_collectives(comm):
    r, n = comm.rank, comm.size
    out = {}
    a = np.full(1000, r + 1, dtype=np.float32)
    comm.allreduce(a)  # in place: the array itself holds the sum
    out["allreduce_inplace"] = a.tolist()[:2]
    src = np.full(7, r + 1, dtype=np.int64)
    dst = np.zeros(7, dtype=np.int64)
    comm.allreduce(src, dst, op=ibex.MAX)
    out["allreduce_max"] = dst.tolist()[:2]
    h = np.full(33, r + 1, dtype=np.float16)
    comm.allreduce(h, op=ibex.PROD)
    out["prod_f16"] = float(h[0])
    g = np.zeros(3 * n, dtype=np.int32)
    comm.allgather(np.arange(3, dtype=np.int32) + 10 * r, g)
    out["allgather"] = g.tolist()
    rs = np.zeros(2, dtype=np.float64)
    comm.reduce_scatter(np.arange(2.0 * n) + r, rs)
    out["reduce_scatter"] = rs.tolist()
    b = bytearray(b"root" if r == 0 else b"....")
    comm.broadcast(b, root=0)
    out["broadcast_bytearray"] = bytes(b).decode()
    red = np.full(4, r + 1.0)
    comm.reduce(red, root=n - 1)
    out["reduce"] = red.tolist() if r == n - 1 else None
    reqs = [comm.allreduce(np.full(16, float(i)), async_op=True) for i in range(8)]
    arrays = []
    for i in range(8):  # keep results: each request holds its buffer until done
        arr = np.full(16, float(i))
        arrays.append(arr)
        reqs.append(comm.allreduce(arr, async_op=True))
    for req in reversed(reqs):
        req.wait()
    out["async"] = [float(x[0]) for x in arrays]
    comm.barrier()
    a2a = np.zeros(2 * n, dtype=np.float32)
    comm.alltoall(np.arange(2 * n, dtype=np.float32) + 100 * r, a2a)
    out["alltoall"] = a2a.tolist()
    # Uneven: rank r sends q + r + 1 elements to q (valued 100 r + q), packed in rank order.
    sc = [q + r + 1 for q in range(n)]
    rc = [q + r + 1 for q in range(n)]  # rank q sends this rank r + q + 1
    src = np.concatenate([np.full(c, 100 * r + q, dtype=np.int32) for q, c in enumerate(sc)])
    dst = np.zeros(sum(rc), dtype=np.int32)
    comm.alltoall(src, dst, send_counts=sc, recv_counts=rc)
    out["alltoallv"] = dst.tolist()
    sub = comm.split(color=r % 2, key=r)
    out["split_size"] = sub.size
    sub.destroy()
    return out


def torch_collectives(comm):
    r = comm.rank
    t = torch.full((513,), float(r + 1), dtype=torch.bfloat16)
    ptr = t.data_ptr()
    comm.allreduce(t)
    out = {"bf16": float(t[0]), "same_storage": t.data_ptr() == ptr}
    g = torch.zeros(2 * comm.size, dtype=torch.int64)
    comm.allgather(torch.tensor([r, r]), g)
    out["allgather"] = g.tolist()
    return out


def destroy_with_pending(comm):
    """destroy() settles a request nobody waited for: a later wait() is fine and the
    result landed; a request used after it was collected never touches freed memory."""
    a = np.full(1 << 16, comm.rank + 1.0)
    req = comm.allreduce(a, async_op=True)
    comm.destroy()
    req.wait()
    out = {"value": float(a[0]), "test_after": req.test()}
    try:
        comm.allreduce(a)
        out["after_destroy"] = "NO ERROR"
    except ValueError as e:
        out["after_destroy"] = str(e)
    return out


def comm_memory(comm):
    """Buffers from mem_alloc: NumPy and torch views over them go to the collectives in
    place; destroy() leaves memory that something still holds valid."""
    r, n = comm.rank, comm.size
    out = {}
    buf = comm.mem_alloc(4 * 4096)
    view = memoryview(buf)
    out["sizes"] = [buf.nbytes, len(buf), view.nbytes, view.readonly, view.format]
    a = np.frombuffer(buf, dtype=np.float32)
    out["same_memory"] = a.ctypes.data == buf.address
    a[:] = r + 1
    comm.allreduce(a)  # in place, shared memory on both sides
    out["in_place"] = [float(a[0]), float(a[-1])]
    dst = np.frombuffer(comm.mem_alloc(4 * 4096), dtype=np.float32)
    comm.allreduce(np.full(4096, 2.0 * (r + 1), np.float32), dst)  # ordinary send buffer
    out["into_shared"] = [float(dst[0]), float(dst[-1])]
    big_src = np.frombuffer(comm.mem_alloc(4 << 20), dtype=np.float32)
    big_dst = np.frombuffer(comm.mem_alloc(4 << 20), dtype=np.float32)
    big_src[:] = np.arange(big_src.size, dtype=np.float32) % 7 + r
    comm.allreduce(big_src, big_dst)
    want = (np.arange(big_src.size, dtype=np.float32) % 7) * n + n * (n - 1) / 2
    out["big_wrong"] = int(np.count_nonzero(big_dst != want))
    g = np.frombuffer(comm.mem_alloc(8 * n), dtype=np.int64)
    comm.allgather(np.array([r], dtype=np.int64), g)
    out["allgather"] = g.tolist()
    if torch is not None:
        t = torch.frombuffer(comm.mem_alloc(4 * 1000), dtype=torch.float32)
        t.fill_(r + 1)
        comm.allreduce(t)
        out["torch"] = float(t[0])
    for bad in (0, -1):
        try:
            comm.mem_alloc(bad)
            out[f"alloc_{bad}"] = "NO ERROR"
        except (ValueError, TypeError) as e:
            out[f"alloc_{bad}"] = f"{type(e).__name__}: {e}"
    keep = np.frombuffer(comm.mem_alloc(64), dtype=np.uint8)
    keep[:] = 7
    comm.destroy()  # the C communicator waits for `keep` and the others
    keep[:] += 1
    out["after_destroy"] = int(keep.sum())
    try:
        comm.mem_alloc(8)
        out["alloc_after_destroy"] = "NO ERROR"
    except ValueError as e:
        out["alloc_after_destroy"] = str(e)
    return out


def abort_with_memory(comm):
    buf = comm.mem_alloc(64)
    comm.abort()
    out = [memoryview(buf).nbytes, len(buf)]
    try:
        out.append(buf.address)
    except ValueError as e:
        out.append(str(e))
    return out


def err(fn):
    """What fn raised, as "Type: message", or "NO ERROR"."""
    try:
        fn()
    except Exception as x:
        return f"{type(x).__name__}: {x}"
    return "NO ERROR"


def refusals(comm):
    e = {}

    e["size"] = err(lambda: comm.allreduce(np.zeros(4, np.float32), np.zeros(5, np.float32)))
    e["dtype"] = err(lambda: comm.allreduce(np.zeros(4, np.float32), np.zeros(4, np.float64)))
    e["int8"] = err(lambda: comm.allreduce(np.zeros(4, np.int8)))
    e["strided"] = err(lambda: comm.allreduce(np.zeros(8, np.float32)[::2]))
    e["readonly"] = err(lambda: comm.allreduce(np.zeros(4, np.float32), bytes(16)))
    e["not_a_buffer"] = err(lambda: comm.allreduce([1.0, 2.0]))
    e["bad_root"] = err(lambda: comm.broadcast(np.zeros(4), root=comm.size + 3))
    e["alltoall_blocks"] = err(lambda: comm.alltoall(np.zeros(comm.size + 1), np.zeros(comm.size + 1)))
    e["alltoallv_counts"] = err(lambda: comm.alltoall(np.zeros(4), np.zeros(4), send_counts=[4], recv_counts=[4]))
    if torch is not None:
        e["torch_strided"] = err(lambda: comm.allreduce(torch.ones(4, 4).t()))
        e["torch_sparse"] = err(lambda: comm.allreduce(torch.ones(4).to_sparse()))
    a = np.ones(3)
    comm.allreduce(a)  # still usable after refusals
    e["after"] = a.tolist()
    return e


class Collectives(unittest.TestCase):
    def test_numpy_and_buffers_on_three_ranks(self):
        n = 3
        res = run_ranks(n, numpy_collectives)
        self.assertEqual(len(res), n, res)
        for r in range(n):
            out = res[r]
            self.assertIsInstance(out, dict, out)
            self.assertEqual(out["allreduce_inplace"], [6.0, 6.0])
            self.assertEqual(out["allreduce_max"], [3, 3])
            self.assertEqual(out["prod_f16"], 6.0)
            self.assertEqual(out["allgather"], [0, 1, 2, 10, 11, 12, 20, 21, 22])
            self.assertEqual(out["reduce_scatter"], [6.0 * r + 3, 6.0 * r + 6])
            self.assertEqual(out["broadcast_bytearray"], "root")
            if r == n - 1:
                self.assertEqual(out["reduce"], [6.0] * 4)
            self.assertEqual(out["async"], [float(i * n) for i in range(8)])
            self.assertEqual(out["split_size"], 2 if r % 2 == 0 else 1)
            self.assertEqual(out["alltoall"], [float(100 * q + 2 * r + j) for q in range(n) for j in range(2)])
            self.assertEqual(out["alltoallv"], [100 * q + r for q in range(n) for _ in range(q + r + 1)])

    @unittest.skipIf(torch is None, "torch is not installed")
    def test_torch_tensors_in_place(self):
        res = run_ranks(2, torch_collectives)
        for r in range(2):
            self.assertIsInstance(res[r], dict, res[r])
            self.assertEqual(res[r]["bf16"], 3.0)
            self.assertTrue(res[r]["same_storage"])
            self.assertEqual(res[r]["allgather"], [0, 0, 1, 1])

    def test_destroy_settles_pending_requests(self):
        res = run_ranks(2, destroy_with_pending, destroy=False)
        for r in range(2):
            self.assertIsInstance(res[r], dict, res[r])
            self.assertEqual(res[r]["value"], 3.0)
            self.assertTrue(res[r]["test_after"])
            self.assertIn("destroyed", res[r]["after_destroy"])

    def test_comm_memory_in_collectives_and_past_destroy(self):
        n = 3
        res = run_ranks(n, comm_memory, destroy=False)
        self.assertEqual(len(res), n, res)
        for r in range(n):
            out = res[r]
            self.assertIsInstance(out, dict, out)
            self.assertEqual(out["sizes"], [16384, 16384, 16384, False, "B"])
            self.assertTrue(out["same_memory"])
            self.assertEqual(out["in_place"], [6.0, 6.0])
            self.assertEqual(out["into_shared"], [12.0, 12.0])
            self.assertEqual(out["big_wrong"], 0)
            self.assertEqual(out["allgather"], list(range(n)))
            if torch is not None:
                self.assertEqual(out["torch"], 6.0)
            self.assertIn("ValueError: ibex: mem_alloc of 0 bytes", out["alloc_0"])
            self.assertIn("TypeError", out["alloc_-1"])  # not a size_t
            self.assertEqual(out["after_destroy"], 8 * 64)
            self.assertIn("destroyed", out["alloc_after_destroy"])

    def test_abort_takes_comm_memory_with_it(self):
        res = run_ranks(2, abort_with_memory, destroy=False)
        for r in range(2):
            self.assertIsInstance(res[r], list, res[r])
            self.assertEqual(res[r][:2], [0, 0])  # empty: nothing reaches the freed memory
            self.assertIn("aborted, and its memory with it", res[r][2])

    def test_refusals(self):
        res = run_ranks(2, refusals)
        for r in range(2):
            e = res[r]
            self.assertIsInstance(e, dict, e)
            self.assertIn("ValueError: ibex: recv holds 5 float elements, the collective needs 4",
                          e["size"])
            self.assertIn("send is float but recv is double", e["dtype"])
            self.assertIn("has no ibex datatype", e["int8"])
            self.assertIn("not C-contiguous", e["strided"])
            self.assertIn("BufferError", e["readonly"])
            self.assertIn("TypeError: ibex: expected a torch tensor", e["not_a_buffer"])
            self.assertIn("IbexError: IBEX_ERR_INVALID_ARGUMENT", e["bad_root"])
            self.assertIn("not a block for each of", e["alltoall_blocks"])
            self.assertIn("send_counts holds 1 counts, the world has", e["alltoallv_counts"])
            if torch is not None:
                self.assertIn("not contiguous", e["torch_strided"])
                self.assertIn("sparse tensors are not supported", e["torch_sparse"])
            self.assertEqual(e["after"], [2.0, 2.0, 2.0])


def point_to_point(comm):
    """A pipeline down the ranks, a ring exchange in one batch, async requests, torch."""
    r, n = comm.rank, comm.size
    out = {}
    a = np.zeros(1000, dtype=np.float32)
    if r > 0:
        comm.recv(a, r - 1)
    a += 1
    if r + 1 < n:
        comm.send(a, r + 1)
    out["pipeline"] = float(a[0])
    mine = np.full(70000, r, dtype=np.int64)
    theirs = np.zeros(70000, dtype=np.int64)
    comm.p2p([("send", mine, (r + 1) % n), ("recv", theirs, (r - 1) % n)])
    out["ring"] = [int(theirs[0]), int(theirs[-1])]
    got = [np.zeros(3, dtype=np.int32) for _ in range(2)]
    reqs = [comm.send(np.full(3, 10 * r + k, dtype=np.int32), (r + 1) % n, async_op=True) for k in range(2)]
    batch = comm.p2p([("recv", got[0], (r - 1) % n), ("recv", got[1], (r - 1) % n)], async_op=True)
    batch.wait()
    for q in reqs:
        q.wait()
    out["async"] = [int(g[0]) for g in got]
    if torch is not None:
        t = torch.full((5,), float(r), dtype=torch.float64)
        u = torch.zeros(5, dtype=torch.float64)
        comm.p2p([("send", t, (r + 1) % n), ("recv", u, (r - 1) % n)])
        out["torch"] = float(u[0])

    out["bad_peer"] = err(lambda: comm.send(np.zeros(2), n + 4))
    out["bad_kind"] = err(lambda: comm.p2p([("put", np.zeros(2), 0)]))
    out["bad_tuple"] = err(lambda: comm.p2p([("send", np.zeros(2))]))
    out["self"] = err(lambda: comm.send(np.zeros(2), r))
    comm.barrier()  # still usable after refusals
    return out


class PointToPoint(unittest.TestCase):
    def test_send_recv_and_batches_on_three_ranks(self):
        n = 3
        res = run_ranks(n, point_to_point)
        self.assertEqual(len(res), n, res)
        for r in range(n):
            out = res[r]
            self.assertIsInstance(out, dict, out)
            self.assertEqual(out["pipeline"], float(r + 1))
            self.assertEqual(out["ring"], [(r - 1) % n] * 2)
            self.assertEqual(out["async"], [10 * ((r - 1) % n), 10 * ((r - 1) % n) + 1])
            if torch is not None:
                self.assertEqual(out["torch"], float((r - 1) % n))
            self.assertIn("IbexError: IBEX_ERR_INVALID_ARGUMENT", out["bad_peer"])
            self.assertIn(f"peer {n + 4} not in 0..{n - 1}", out["bad_peer"])
            self.assertIn('ValueError: ibex: a p2p op is "send" or "recv", not "put"', out["bad_kind"])
            self.assertIn("TypeError: ibex: a p2p op is a tuple", out["bad_tuple"])
            self.assertIn("sends to itself", out["self"])


class CommQpChoice(unittest.TestCase):
    """Comm(qp={...}): the attributes every QP of the communicator is connected with."""

    def test_every_rank_connects_with_the_choice(self):
        choice = {"traffic_class": 104, "sl": 3, "timeout": 18, "retry_cnt": 5}
        res = run_ranks(2, lambda comm: comm_sum(comm), qp=lambda rank: choice)
        self.assertEqual(res, {0: [3.0] * 4, 1: [3.0] * 4})

    def test_ranks_that_chose_differently_fail_naming_both(self):
        res = run_ranks(2, lambda comm: "NO ERROR", qp=lambda rank: {"traffic_class": 104, "sl": 3 - rank})
        for r in range(2):
            self.assertIn("EXCEPTION IbexError", res[r])
            self.assertIn("rank 0 connects its QPs with traffic class 104, sl 3, rank 1 with traffic class 104, sl 2",
                          res[r])

    def test_a_bad_choice_is_refused_before_any_rank_is_reached(self):
        uid = ibex.get_unique_id()
        with self.assertRaises(ValueError) as e:
            ibex.Comm(2, uid, 0, device=DEVICE, qp={"tos": 1})
        self.assertIn("one of timeout, retry_cnt", str(e.exception))
        with self.assertRaises(TypeError):
            ibex.Comm(2, uid, 0, device=DEVICE, qp={"sl": "3"})
        with self.assertRaises(ValueError):
            ibex.Comm(2, uid, 0, device=DEVICE, qp={"sl": 256})
        with self.assertRaises(ibex.IbexError) as e:
            ibex.Comm(2, uid, 0, device=DEVICE, timeout_ms=60000, qp={"sl": 8})
        self.assertIn("ibex_comm_config_t.qp_attr: sl 8", e.exception.detail)


def comm_sum(comm):
    a = np.full(4, comm.rank + 1.0)
    comm.allreduce(a)
    return a.tolist()


class Errors(unittest.TestCase):
    def test_ibex_error_carries_status_name_and_detail(self):
        with self.assertRaises(ibex.IbexError) as cm:
            ibex.Context("nosuch:dev0")
        e = cm.exception
        self.assertIsInstance(e, RuntimeError)
        self.assertEqual(e.status, "IBEX_ERR_NO_DEVICE")
        self.assertEqual(e.code, 3)
        self.assertIn("nosuch:dev0", e.detail)
        self.assertTrue(str(e).startswith("IBEX_ERR_NO_DEVICE: "))

    def test_lists_devices(self):
        names = [name for name, _ in ibex.devices()]
        self.assertIn(DEVICE, names)


class Devices(unittest.TestCase):
    def test_query_says_what_the_device_carries(self):
        d = ibex.Context(DEVICE).query_device()
        self.assertEqual(d["max_msg_size"], 1 << 31)
        self.assertIn(d["max_mtu"], (256, 512, 1024, 2048, 4096))
        self.assertGreaterEqual(d["efficient_msg_bytes"], 4096)


class QueuePairs(unittest.TestCase):
    def test_send_and_rdma_write_between_two_contexts(self):
        a, b = ibex.Context(DEVICE), ibex.Context(DEVICE)
        cqa, cqb = a.create_cq(64), b.create_cq(64)
        qpa, qpb = a.create_qp(cqa), b.create_qp(cqb)
        qpa.connect(qpb.local_addr())
        qpb.connect(qpa.local_addr())
        self.assertEqual(qpa.state, ibex.QPS_RTS)
        src = np.arange(4096, dtype=np.uint8)
        dst = np.zeros(4096, dtype=np.uint8)
        window = np.zeros(1024, dtype=np.uint8)
        mra, mrb, mrw = a.reg_mr(src), b.reg_mr(dst), b.reg_mr(window)
        qpb.post_recv(mrb, wr_id=7)
        qpa.post_send(mra, wr_id=1)
        qpa.post_send(mra, offset=100, length=1024, opcode=ibex.WR_RDMA_WRITE,
                      remote_addr=mrw.addr, rkey=mrw.rkey, wr_id=2)

        def drain(cq, want):
            got, deadline = [], time.monotonic() + 10
            while len(got) < want and time.monotonic() < deadline:
                if cq.wait(100):
                    got += cq.poll()
            return got

        sent = drain(cqa, 2)
        recv = drain(cqb, 1)
        self.assertEqual(sorted(w["wr_id"] for w in sent), [1, 2])
        self.assertTrue(all(w["status"] == "IBV_WC_SUCCESS" for w in sent + recv), sent + recv)
        self.assertEqual(recv[0]["wr_id"], 7)
        self.assertEqual(recv[0]["byte_len"], 4096)
        self.assertTrue(np.array_equal(dst, src))
        self.assertTrue(np.array_equal(window, src[100:1124]))
        self.assertGreater(a.counters()["tx_packets"], 0)
        with self.assertRaises(ValueError):
            qpa.post_send(mra, offset=4000, length=200)

    def test_connect_takes_the_attributes_verbs_sets_at_each_transition(self):
        a, b = ibex.Context(DEVICE), ibex.Context(DEVICE)
        qpa, qpb = a.create_qp(a.create_cq(16)), b.create_qp(b.create_cq(16))
        with self.assertRaises(ValueError):
            qpa.connect(qpb.local_addr(), sl=300)
        with self.assertRaises(ibex.IbexError) as e:
            qpa.connect(qpb.local_addr(), sl=9)
        self.assertIn("0..7", e.exception.detail)
        qpa = a.create_qp(a.create_cq(16))
        qpa.connect(qpb.local_addr(), timeout=18, retry_cnt=3, sl=5, traffic_class=104)
        qpb.connect(qpa.local_addr())
        got = qpa.attributes()
        self.assertEqual(got["state"], ibex.QPS_RTS)
        self.assertEqual((got["timeout"], got["retry_cnt"], got["sl"], got["traffic_class"]), (18, 3, 5, 104))
        self.assertEqual(qpb.attributes()["timeout"], 14)


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""The ibex backend of torch.distributed: collectives against their definitions on 2 and
3 ranks, refusals of bad input, rendezvous mismatches, and a killed peer; on a CUDA host
also collectives on CUDA tensors (skipped elsewhere, saying why)."""

import json
import os
import socket
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "torch_worker.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(scenario, world, timeout=120):
    """Runs every rank as a process; returns ({rank: result or None}, {rank: returncode})."""
    port = free_port()
    procs = [subprocess.Popen([sys.executable, WORKER, scenario, str(r), str(world), str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    results, codes = {}, {}
    deadline = time.monotonic() + timeout
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"{scenario}: rank {r} did not finish in {timeout} s")
        codes[r] = p.returncode
        lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
        results[r] = json.loads(lines[-1][7:]) if lines else None
        if results[r] is None and not (scenario == "killed_peer" and r == world - 1):
            print(f"--- rank {r} output:\n{out}", file=sys.stderr)
    return results, codes


def cuda_missing():
    """Why CUDA tensors cannot be tested here, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    return None


def check_point_to_point(test, res, r, world):
    """What torch_worker.point_to_point returned on rank r of world."""
    test.assertEqual(res["p2p_pipeline"], float(r + 1))
    test.assertEqual(res["gather"], [7 * q for q in range(world)] if r == world - 1 else None)
    test.assertEqual(res["scatter"], [10.0 + r] * 2)
    test.assertEqual(res["alltoall_list"], [[100 * q + r] * (r + 1) for q in range(world)])
    test.assertEqual(res["p2p_ring"], [float((r - 1) % world)] * 2)
    test.assertEqual(res["p2p_neighbours"], [10 * ((r - 1) % world) + 1, 10 * ((r + 1) % world) + 2])
    test.assertEqual(res["alltoall_uneven"],
                     [float(100 * q + r) for q in range(world) for _ in range((q + r) % 3 + 1)])


class CudaTensors(unittest.TestCase):
    def test_collectives_on_cuda_tensors(self):
        why = cuda_missing()
        if why:
            self.skipTest(f"needs a CUDA device: {why}")
        for world in (2, 3):
            with self.subTest(world=world):
                self.check_world(world)

    def check_world(self, world):
        results, codes = run_ranks("cuda_tensors", world)
        total = world * (world + 1) // 2
        for r in range(world):
            self.assertEqual(codes[r], 0, f"rank {r}")
            res = results[r]
            self.assertEqual(res["allreduce_sum"], [float(total)])
            self.assertTrue(res["allreduce_big_ok"])
            self.assertEqual(res["broadcast"], [0.0, 1.0, 2.0, 3.0, 4.0])
            self.assertEqual(res["allgather_base"], [float(i) for i in range(world) for _ in range(2)])
            base = sum(range(world))
            self.assertEqual(res["reduce_scatter_base"], [float(world * (3 * r + j) + base) for j in range(3)])
            self.assertEqual(res["async_values"], [float(i * world) for i in range(8)])
            check_point_to_point(self, res, r, world)
            # ibex refuses it ("device mismatch"), unless torch does first.
            self.assertNotEqual(res["mixed_devices"], "NO ERROR")


class Collectives(unittest.TestCase):
    def check_world(self, world):
        results, codes = run_ranks("collectives", world)
        total = world * (world + 1) // 2
        for r in range(world):
            self.assertEqual(codes[r], 0, f"rank {r}")
            res = results[r]
            for key, value in res.items():
                if key.startswith("allreduce_sum_"):
                    expected = total % 256 if "uint8" in key else total
                    self.assertEqual(value, [expected], key)
            prod = 1.0
            for i in range(world):
                prod *= i + 2
            self.assertEqual(res["allreduce_prod"], [prod])
            self.assertEqual(res["allreduce_min"], [2.0])
            self.assertEqual(res["allreduce_max"], [world + 1.0])
            if "allreduce_avg" in res:
                self.assertEqual(res["allreduce_avg"], [(world - 1) / 2])
            self.assertTrue(res["allreduce_big_ok"])
            self.assertEqual(res["broadcast"], [0.0, 1.0, 2.0, 3.0, 4.0])
            if r == 0:
                self.assertEqual(res["reduce_root"], [float(total)] * 4)
            self.assertEqual(res["allgather"], [[10 * i, 10 * i + 1, 10 * i + 2]
                                                for i in range(world)])
            self.assertEqual(res["allgather_base"], [float(i) for i in range(world)
                                                     for _ in range(2)])
            base = sum(range(world))
            self.assertEqual(res["reduce_scatter"], [float(r * 10 * world + base)] * 2)
            self.assertEqual(res["reduce_scatter_base"],
                             [float(world * (3 * r + j) + base) for j in range(3)])
            self.assertEqual(res["async_values"], [float(i * world) for i in range(20)])
            self.assertEqual(res["alltoall_single"],
                             [float(100 * q + 2 * r + j) for q in range(world) for j in range(2)])
            self.assertEqual(res["alltoall_rows"], [q for q in range(world) for _ in range(2)])
            check_point_to_point(self, res, r, world)
            self.assertEqual(res["allreduce_coalesced"], [float(world * (world - 1) // 2), float(world)])
            self.assertEqual(res["allgather_coalesced"],
                             [[[10.0 * q] * 3, [float(j + q) for j in range(4)]] for q in range(world)])

    def test_two_ranks(self):
        self.check_world(2)

    def test_three_ranks(self):
        self.check_world(3)


class BadInput(unittest.TestCase):
    def test_refusals_name_the_problem(self):
        results, codes = run_ranks("bad_input", 2)
        for r in range(2):
            self.assertEqual(codes[r], 0)
            e = results[r]
            self.assertIn("not contiguous", e["non_contiguous"])
            self.assertIn("sparse tensors are not supported", e["sparse"])
            self.assertIn("dtype", e["dtype_int8"])
            self.assertIn("dtype mismatch", e["dtype_mismatch"])
            self.assertIn("world size x input", e["size_mismatch"])
            self.assertIn("ReduceOp.BAND is not supported by ibex", e["op_band"])
            self.assertIn("tag 3: ibex matches sends and receives in issue order", e["send_tag"])
            # torch >= 2 refuses a send to itself before the backend sees it, in its own words
            self.assertTrue(f"peer {r} is not another rank" in e["send_self"] or
                            "destination rank should not be the same" in e["send_self"], e["send_self"])
            self.assertIn("the output splits add up to 3 rows, the tensor has 4", e["alltoall_splits"])
            self.assertIn("alltoall: the output list holds", e["alltoall_list"])
            self.assertIn("gather: root", e["gather_root"])
            self.assertIn("recvAnysource is not supported by ibex", e["recv_any"])
            self.assertIn("output 0 holds 3 elements, its input 2", e["allgather_coalesced_shape"])
            self.assertEqual(e["after"], [2.0, 2.0, 2.0])

    def test_world_size_disagreeing_with_rank_0(self):
        results, _ = run_ranks("world_mismatch", 2)
        self.assertIn("given world size 3 but rank 0 was given 2", results[1]["error"])
        # Rank 0 waits for a rank that never joins: it fails at its timeout, no hang.
        self.assertNotEqual(results[0]["error"], "NO ERROR")
        self.assertLess(results[0]["after_s"], 30)

    def test_rank_outside_the_world(self):
        results, _ = run_ranks("rank_outside", 2)
        self.assertIn("rank", results[1]["error"])
        self.assertNotEqual(results[1]["error"], "NO ERROR")


class KilledPeer(unittest.TestCase):
    def test_survivors_raise_within_the_timeout(self):
        results, codes = run_ranks("killed_peer", 3)
        self.assertEqual(codes[2], -9)
        for r in (0, 1):
            res = results[r]
            self.assertIsNotNone(res, f"rank {r} printed no result")
            self.assertIn("failed", res["error"])
            self.assertIn("IBEX_ERR", res["error"])
            self.assertLess(res["after_s"], 20.0)  # the group's timeout
            print(f"rank {r}: {res['error']} after {res['after_s'] * 1e3:.0f} ms",
                  file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)

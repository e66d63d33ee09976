"""The interaction of communication and compute, measured on synthetic kernels (never on a model):
how much an all-reduce, a reduce-scatter and a point-to-point transfer hide behind a compute load,
and how much running both slows them beyond running them in turn, by message bytes, by the load's
compute intensity and at this process's thread count.  ``parsim profile-comm`` runs it (the
profile's ``collective.interaction``, parsim.hardware.interaction); the simulator prices every
model's gradient all-reduces and ZeRO reduce-scatters from it.

Per point (op, bytes, load), per repeat, back to back so that a machine whose speed drifts shifts
the three alike, each after a barrier:

- ``compute``: the load alone, sized to about ``COMPUTE_PER_COMM`` times the collective alone
  (a bucket reduces under a backward several times its length: ResNet-50 on local-cpu, a 105.8 ms
  backward over buckets of 12-16 ms, README);
- ``comm``: the collective alone;
- ``both``: the collective started asynchronously, the load, then the wait.

``added = both - compute`` splits into overlap = 1 - min(added, comm) / comm in [0, 1] and
contention = max(0, added - comm) / comm >= 0 (parsim.cost.compute.split_added); each term is
the median over the repeats.

Loads (FLOPs = 2 x MACs; bytes: what the kernel reads and writes once):
- ``gemm``: an n x n fp32 matmul, n = 256: 2 n^3 FLOPs over 3 n^2 x 4 bytes = n / 6 FLOP/byte;
- ``stream``: c = a + b over 2^22 fp32 elements: 1 FLOP per 12 bytes.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from parsim.cost.compute import split_added
from parsim.hardware.interaction import Interaction

COMPUTE_PER_COMM = 4
SIZES_BYTES = (256 << 10, 4 << 20, 32 << 20)
OPS = ("all_reduce", "reduce_scatter", "p2p")
GEMM_N = 256
STREAM_ELEMENTS = 1 << 22
LOADS = {"gemm": GEMM_N / 6, "stream": 1 / 12}      # FLOPs per byte (module docstring)


def overlap_terms(compute_s: float, comm_s: float, both_s: float) -> tuple[float, float]:
    """(overlap, contention) of one repeat: what the collective added to the compute, split."""
    return split_added(both_s - compute_s, comm_s)


def _load_kernel(load: str):
    if load == "gemm":
        a, b = torch.randn(GEMM_N, GEMM_N), torch.randn(GEMM_N, GEMM_N)
        return lambda: torch.mm(a, b)
    x, y, z = torch.randn(STREAM_ELEMENTS), torch.randn(STREAM_ELEMENTS), torch.empty(STREAM_ELEMENTS)
    return lambda: torch.add(x, y, out=z)


def _collective(op: str, nbytes: int, rank: int, world: int):
    """(start, which returns a waitable work, or a list of them) for ``op`` on ``nbytes``."""
    if op == "all_reduce":
        buf = torch.ones(nbytes // 4)
        return lambda: dist.all_reduce(buf, async_op=True)
    if op == "reduce_scatter":
        full = torch.ones(nbytes // 4 // world * world)
        part = torch.empty(full.numel() // world)
        return lambda: dist.reduce_scatter_tensor(part, full, async_op=True)
    buf = torch.ones(nbytes // 4)                        # p2p: rank 0 sends to rank 1, as a pipeline boundary
    if rank == 0:
        return lambda: dist.isend(buf, 1)
    if rank == 1:
        return lambda: dist.irecv(buf, 0)
    return lambda: None


def _timed(fn) -> float:
    dist.barrier()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure_point(op: str, nbytes: int, load: str, rank: int, world: int, repeats: int) -> tuple[float, float]:
    """The median (overlap, contention) of ``op`` on ``nbytes`` under ``load``, on every rank
    (rank 0's timings, broadcast: the ranks run the same kernels)."""
    kernel, start = _load_kernel(load), _collective(op, nbytes, rank, world)

    def comm():
        work = start()
        if work is not None:
            work.wait()
    kernel(), comm()                                       # warm-up
    per_kernel = statistics.median(_timed(kernel) for _ in range(3))
    alone = statistics.median(_timed(comm) for _ in range(3))
    ratio = torch.tensor([alone / max(per_kernel, 1e-9)])
    dist.all_reduce(ratio, op=dist.ReduceOp.MAX)          # every rank runs the same count
    count = max(1, round(COMPUTE_PER_COMM * float(ratio)))

    def compute():
        for _ in range(count):
            kernel()

    def both():
        work = start()
        compute()
        if work is not None:
            work.wait()
    terms = []
    for _ in range(repeats):
        c, m, b = _timed(compute), _timed(comm), _timed(both)
        terms.append(overlap_terms(c, m, b))
    out = torch.tensor([statistics.median(t[0] for t in terms), statistics.median(t[1] for t in terms)],
                       dtype=torch.float64)
    dist.broadcast(out, src=0)
    return float(out[0]), float(out[1])


def measure_interaction(rank: int, world: int, repeats: int, sizes=SIZES_BYTES, ops=OPS) -> tuple[Interaction, ...]:
    """Every (op, size, load) point, at this process's thread count; every rank calls it."""
    threads = torch.get_num_threads()
    return tuple(Interaction(op, int(n), load, LOADS[load], threads, *measure_point(op, n, load, rank, world, repeats))
                 for op in ops for n in sizes for load in LOADS)

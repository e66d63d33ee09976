"""``parsim profile-comm``: measure this machine's links and device and write a cluster profile.

Run under torchrun (``torchrun --nproc-per-node 2 -m parsim.profile.comm -o out.yaml``) or with
``parsim profile-comm --nproc 2``.  On the backend in use it measures:

- point-to-point (send then receive back, halved) between rank 0 and a rank on the same node,
  and one on another node when there is one;
- all-reduce over all ranks, in each dtype of ``--dtypes`` (default fp32,bf16; the same bytes,
  the dtypes taking turns), and all-gather and reduce-scatter (ZeRO's collectives) as the
  library runs them, each fitted as a ring at its own latency and efficiency;

each at message sizes from 4 KiB to 64 MiB (median of repeats), and fits t = alpha + bytes/beta
by least squares (Hockney's model).  All-reduce is fitted as a ring (2(n-1) steps of alpha, and
2(n-1)/n of the message at the bus bandwidth), giving the collective library's bandwidth
efficiency relative to the point-to-point link and its extra latency per step: fp32's in the
collective section's own fields, each other dtype's under ``collective.dtypes`` with the share of
an all-reduce that hides behind compute in that dtype (``measure_overlap``; gloo sums bf16 with
scalar code on the cores the bf16 backward runs on).  Rank 0 also
measures the device: fp32 matmul FLOP/s at sizes 64..2048 (peak and efficiency curve) and
memory copy bandwidth.  It also measures how late a point-to-point send arrives when its sender
goes straight on computing (``measure_busy_sender``; gloo moves the data on an I/O thread that
shares the cores with compute), and the host time torch FSDP2 adds per unit around its
collectives and per byte of it (``measure_fsdp_overhead``).  The profile records the date, the machine and the command.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

from parsim.exec.precision import TORCH_DTYPES
from parsim.hardware.collectives import (COLLECTIVE_FIT_OPS, SHARDED_OPS, Collectives, DtypeCollectives,
                                        collectives_flow, measured_dtypes)
from parsim.hardware.machine import this_machine

SIZES_BYTES = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def median_time_s(fn, repeats: int, warmup: int = 2) -> float:
    """Median wall time of ``fn`` over ``repeats`` runs after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def fit_alpha_beta(sizes, times) -> tuple[float, float]:
    """t = alpha + size / beta, least squares on relative error (each size weighs the same,
    so 4 KiB messages fix alpha and 64 MiB ones fix beta); returns (alpha_s, beta_bytes_per_s)."""
    t = np.asarray(times, dtype=float)
    A = np.stack([np.ones(len(sizes)), np.asarray(sizes, dtype=float)], axis=1) / t[:, None]
    (alpha, inv_beta), *_ = np.linalg.lstsq(A, np.ones(len(t)), rcond=None)
    return max(float(alpha), 0.0), 1.0 / max(float(inv_beta), 1e-15)


def measure_device(repeats: int) -> dict:
    points = []
    for n in (64, 128, 256, 512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        t = median_time_s(lambda: torch.mm(a, b), repeats)
        points.append((2.0 * n ** 3, 2.0 * n ** 3 / t))
    peak = max(r for _, r in points)
    x = torch.randn(16 << 20)
    y = torch.empty_like(x)
    copy_bw = 2 * x.numel() * 4 / median_time_s(lambda: y.copy_(x), repeats)
    return {"peak_flops_per_s": peak, "efficiency": [(w, r / peak) for w, r in points],
            "copy_bytes_per_s": copy_bw}


def measure_links(rank: int, world: int, local_world: int, repeats: int, dtypes: tuple[str, ...] = ("fp32",)) -> dict:
    """Point-to-point times per link class, and all-reduce times in each of ``dtypes`` (the same
    bytes in each: a bucket holds bytes, whatever its dtype)."""
    out = {}
    peers = {"group": 1 if world > 1 else None, "network": local_world if world > local_world else None}
    for cls, peer in peers.items():
        if peer is None:
            continue
        times = []
        for nbytes in SIZES_BYTES:
            buf = torch.ones(nbytes // 4)

            def ping():
                if rank == 0:
                    dist.send(buf, peer)
                    dist.recv(buf, peer)
                elif rank == peer:
                    dist.recv(buf, 0)
                    dist.send(buf, 0)
            dist.barrier()
            times.append(median_time_s(ping, repeats) / 2)
        out[cls] = (SIZES_BYTES, times)
    per_dtype: dict[str, list[float]] = {d: [] for d in dtypes}
    for nbytes in SIZES_BYTES:             # the dtypes take turns at each size: a drifting load shifts them alike
        bufs = {d: torch.ones(nbytes // _element_bytes(d), dtype=TORCH_DTYPES[d]) for d in dtypes}
        samples: dict[str, list[float]] = {d: [] for d in dtypes}
        for d in dtypes:                   # warm-up
            dist.all_reduce(bufs[d])
        for _ in range(repeats):
            for d in dtypes:
                dist.barrier()
                t = time.perf_counter()
                dist.all_reduce(bufs[d])
                samples[d].append(time.perf_counter() - t)
        for d in dtypes:
            per_dtype[d].append(statistics.median(samples[d]))
    out.update((all_reduce_key(d), (SIZES_BYTES, per_dtype[d])) for d in dtypes)
    if world > 1:      # ZeRO's collectives as the library runs them (sizes: the whole gathered / reduced buffer)
        out.update((op, (SIZES_BYTES, sharded_collective_times(op, SIZES_BYTES, world, repeats)))
                   for op in SHARDED_OPS)
        out["all_to_all"] = (SIZES_BYTES, all_to_all_times(SIZES_BYTES, world, repeats))
    return out


A2A_COMPUTE_S = 300e-6     # compute before each timed all-to-all: about a tiny MoE layer's router and permute
A2A_MIN_REPEATS = 40


def all_to_all_times(sizes_bytes, world: int, repeats: int) -> list[float]:
    """Mean times of all_to_all_single over the whole group per input buffer size (each rank's
    buffer, S / world to every rank), timed the way a MoE layer issues it: with the split sizes
    (parsim.exec.expert_parallel; gloo runs its alltoallv), each right after A2A_COMPUTE_S of
    compute rather than back to back behind a barrier.  The mean, not the median: a step pays the
    sum of dozens of them, tail included (in a dp=2 ep=2 run on the 2-core VM a rank waited for
    its peer 1.09 ms per exchange on average, 0.32 ms at the median:
    results/2026-11-27-amd-epyc/diagnosis-moe-ep/analyze.txt)."""
    a = torch.randn(96, 96)
    times = []
    for nbytes in sizes_bytes:
        x = torch.ones(nbytes // 4 // world * world)
        out = torch.empty_like(x)
        splits = [x.numel() // world] * world
        samples = []
        dist.barrier()
        for i in range(2 + max(repeats, A2A_MIN_REPEATS)):
            compute_for(a, A2A_COMPUTE_S)
            t = time.perf_counter()
            dist.all_to_all_single(out, x, splits, splits)
            if i >= 2:                                  # two warm-up exchanges
                samples.append(time.perf_counter() - t)
        times.append(statistics.fmean(samples))
    return times


def sharded_collective_times(op: str, sizes_bytes, world: int, repeats: int) -> list[float]:
    """Median times of ``op`` ("all_gather" or "reduce_scatter", as FSDP2 and ZeRO-1 issue them:
    c10d's _allgather_base_ and _reduce_scatter_base_) over the whole group, per buffer size (the
    gathered or reduced buffer, cut into equal shards)."""
    times = []
    for nbytes in sizes_bytes:
        full = torch.ones(nbytes // 4 // world * world)
        part = torch.ones(full.numel() // world)
        run = ((lambda: dist.all_gather_single(full, part)) if op == "all_gather"
               else (lambda: dist.reduce_scatter_single(part, full)))
        dist.barrier()
        times.append(median_time_s(run, repeats))
    return times


def all_reduce_key(dtype: str) -> str:
    """measure_links' key for the all-reduce times in ``dtype``: "all_reduce" for fp32."""
    return "all_reduce" if dtype == "fp32" else f"all_reduce_{dtype}"


def _element_bytes(dtype: str) -> int:
    return torch.empty((), dtype=TORCH_DTYPES[dtype]).element_size()


FSDP_UNITS = 16
# 4 KiB: the collectives move next to nothing; 16 MiB: the copies show
FSDP_UNIT_BYTES = (SIZES_BYTES[0], SIZES_BYTES[4])
FSDP_UNIT_DIM = 256            # a 256^3 matmul forward, two backward: about 0.3 and 0.6 ms at 100 GFLOP/s


def fsdp_host_fit(excess_s: dict[int, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """FSDP2's host time per unit, (per_unit_s, copy_bytes_per_s) for "all_gather" and
    "reduce_scatter" (Collectives.fsdp_host_s), from the measured excess per unit at two unit sizes
    (``excess_s``: unit bytes -> (gather_s, reduce_scatter_s)): the line through the two points,
    t = per_unit_s + bytes / copy_bytes_per_s, neither term below 0 (a rate of 0: no per-byte term)."""
    (small, e_small), (large, e_large) = sorted(excess_s.items())
    out = {}
    for j, op in enumerate(SHARDED_OPS):
        per_byte_s = max(0.0, (e_large[j] - e_small[j]) / (large - small))
        out[op] = (max(0.0, e_small[j] - small * per_byte_s), 1.0 / per_byte_s if per_byte_s else 0.0)
    return out


def measure_fsdp_overhead(world: int, repeats: int, links: dict) -> dict[str, tuple[float, float]]:
    """Host time FSDP2 adds to the forward that all-gathers a unit and to the backward that
    reduce-scatters it, beyond the collectives themselves, per unit and per byte: fsdp_host_fit of
    fsdp_excess_s at the two sizes of FSDP_UNIT_BYTES."""
    return fsdp_host_fit(fsdp_excess_s(world, repeats, links, FSDP_UNIT_BYTES))


def fsdp_excess_s(world: int, repeats: int, links: dict, unit_bytes) -> dict[int, tuple[float, float]]:
    """Per unit size in ``unit_bytes`` (each one of SIZES_BYTES), the host time FSDP2 adds per unit
    beyond its collectives: (forward with the gather, backward with the reduce-scatter).

    A chain of FSDP_UNITS units of one parameter each, each running about a millisecond of matmuls
    (as a run's units compute while the next unit's gather is in flight: on CPU, gloo's worker
    thread then waits for a core, as a busy sender's transfer does), is timed plain and under
    ``fully_shard`` keeping parameters gathered after the forward (ZeRO-2: the forward gathers, the
    backward reduce-scatters), at each size.  Per unit, the forward's excess over the plain chain
    less one all-gather of the unit, and the backward's less one reduce-scatter, as measure_links
    timed them alone (``links``: its result)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))

    class Unit(torch.nn.Module):
        def __init__(self, numel: int):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(numel))
            self.a = torch.randn(FSDP_UNIT_DIM, FSDP_UNIT_DIM) / FSDP_UNIT_DIM ** 0.5    # not sharded

        def forward(self, x):
            return torch.tanh(x @ self.a) * self.w[0]

    def chain(reshard: bool | None, numel: int) -> torch.nn.Sequential:
        units = [Unit(numel) for _ in range(FSDP_UNITS)]
        model = torch.nn.Sequential(*units)
        if reshard is not None:
            for u in units:
                fully_shard(u, mesh=mesh, reshard_after_forward=reshard)
            fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
        return model

    x = torch.randn(FSDP_UNIT_DIM, FSDP_UNIT_DIM)

    def phases(model) -> tuple[float, float]:
        fwd, bwd = [], []
        for i in range(repeats + 2):
            dist.barrier()
            t0 = time.perf_counter()
            y = model(x).sum()
            t1 = time.perf_counter()
            y.backward()
            t2 = time.perf_counter()
            if i >= 2:
                fwd.append(t1 - t0)
                bwd.append(t2 - t1)
        return statistics.median(fwd), statistics.median(bwd)

    excess = {}
    for nbytes in unit_bytes:
        numel = nbytes // 4 // world * world
        f0, b0 = phases(chain(None, numel))
        f2, b2 = phases(chain(False, numel))
        ag, rs = (links[op][1][SIZES_BYTES.index(nbytes)] for op in SHARDED_OPS)
        excess[numel * 4] = ((f2 - f0) / FSDP_UNITS - ag, (b2 - b0) / FSDP_UNITS - rs)
    return excess


BUSY_SENDER_BYTES = 256 << 10      # one pipeline boundary of the small GPT: batch 2 x 128 tokens x 256 hidden, fp32


def compute_for(a: torch.Tensor, seconds: float) -> None:
    """Matmuls on ``a`` for ``seconds`` of wall time: a rank that goes on computing."""
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        a @ a


def measure_busy_sender(rank: int, peer: int, sends: int, compute_s: float = 0.01) -> tuple[float, float]:
    """Post to arrival of a ``BUSY_SENDER_BYTES`` send from rank 0 to ``peer`` when the sender then
    waits (idle) and when it goes straight on computing ``compute_s`` of matmuls (busy), as torch's
    ``_PipelineScheduleRuntime`` does after a SEND; the two alternate, so their ratio holds on a noisy
    machine.  A barrier before each send aligns the ranks' clocks: the receiver times the arrival
    from it, then computes as the next pipeline stage would.  Every rank of the group calls it;
    returns (idle_s, busy_s), the medians over ``sends`` // 2 sends each, on every rank."""
    x, a = torch.ones(BUSY_SENDER_BYTES // 4), torch.randn(384, 384)
    arrived: dict[str, list[float]] = {"idle": [], "busy": []}
    for k in range(sends):
        mode = "busy" if k % 2 else "idle"
        dist.barrier()
        t0 = time.perf_counter()
        if rank == 0:
            work = dist.isend(x, peer)
            if mode == "busy":
                compute_for(a, compute_s)
            work.wait()
        elif rank == peer:
            dist.recv(x, 0)
            arrived[mode].append(time.perf_counter() - t0)
            compute_for(a, compute_s)
        dist.barrier()
    medians = torch.tensor([statistics.median(arrived[m]) if arrived[m] else 0.0 for m in ("idle", "busy")],
                           dtype=torch.float64)
    dist.broadcast(medians, src=peer)             # the receiver timed them
    return float(medians[0]), float(medians[1])


# Compute per all-reduce in measure_overlap: a bucket reduces under a backward several times its
# length (ResNet-50 on local-cpu, bf16 dp=2: a 105.8 ms backward over buckets of 12-16 ms, the
# README's measurement log, `git show b68a234:README.md`), so the all-reduce runs wholly inside
# the compute, as there; the 40 fp32 matmuls the fp32 overlap was first measured with (0.08,
# local-cpu.yaml) were about 10x its 16 MiB.
OVERLAP_COMPUTE_RATIO = 8


def measure_overlap(repeats: int, dtype: str = "fp32") -> float:
    """How much of an all-reduce hides behind compute on this machine, in [0, 1] (hidden_share
    of overlap_times), both in ``dtype``: a bf16 run's buckets overlap its bf16 backward.  On a
    GPU with NCCL it is near 1; on CPU, gloo's reduction runs on the cores that also compute."""
    # the median of the repeats' shares (clamping commutes with the median: it is monotone)
    return statistics.median(hidden_share(*times) for times in overlap_times(repeats, dtype))


def hidden_share(t_comp_s: float, t_comm_s: float, t_both_s: float) -> float:
    """(t_compute + t_comm - t_both) / min(t_compute, t_comm), clamped to [0, 1]: 1 when running
    both takes no longer than the longer alone, 0 when it takes their sum (or more)."""
    hidden = (t_comp_s + t_comm_s - t_both_s) / min(t_comp_s, t_comm_s)
    return float(min(1.0, max(0.0, hidden)))


def overlap_times(repeats: int, dtype: str = "fp32") -> list[tuple[float, float, float]]:
    """Per repeat, (compute alone, all-reduce alone, both), s: the all-reduce is 16 MiB, the compute
    matmuls of 512 x 512 for about OVERLAP_COMPUTE_RATIO times its time, both in ``dtype`` (a fixed
    count would not do: bf16 matmuls run several times faster than fp32's on a CPU with bf16
    units); both launches the all-reduce asynchronously, then computes, then waits.  The three run back to back in each repeat, so that a machine whose load
    drifts (other jobs on the cores) shifts the three of a repeat alike."""
    a, b = torch.randn(512, 512, dtype=TORCH_DTYPES[dtype]), torch.randn(512, 512, dtype=TORCH_DTYPES[dtype])
    buf = torch.ones((16 << 20) // _element_bytes(dtype), dtype=TORCH_DTYPES[dtype])
    dist.barrier()
    ratio = torch.tensor([median_time_s(lambda: dist.all_reduce(buf), 3) / median_time_s(lambda: torch.mm(a, b), 5)])
    dist.all_reduce(ratio, op=dist.ReduceOp.MAX)        # every rank runs the same matmuls
    matmuls = max(1, round(OVERLAP_COMPUTE_RATIO * float(ratio)))

    def compute():
        for _ in range(matmuls):
            torch.mm(a, b)

    def comm():
        dist.all_reduce(buf)

    def both():
        work = dist.all_reduce(buf, async_op=True)
        compute()
        work.wait()
    fns = (compute, comm, both)
    for fn in fns:                                  # warm-up
        dist.barrier()
        fn()
    samples = []
    for _ in range(repeats):
        times = []
        for fn in fns:
            dist.barrier()
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        samples.append(tuple(times))
    return samples


def resident_bytes() -> int:
    """This process's resident set (Linux /proc/self/status VmRSS; else the peak from getrusage)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024     # KiB on Linux


def profile_yaml(name: str, device: dict, links: dict, world: int, local_world: int, backend: str,
                 memory_bytes: int, command: str, overlap: float = 1.0, runtime_bytes: int = 0,
                 busy_sender_s: tuple[float, float] = (0.0, 0.0), dtype_overlaps: dict[str, float] | None = None,
                 fsdp_host: dict[str, tuple[float, float]] | None = None, interaction: tuple = (),
                 disturbed: list[str] | tuple = ()) -> str:
    """``busy_sender_s``: (idle, busy) post-to-arrival medians from measure_busy_sender;
    ``overlap``: fp32's; ``dtype_overlaps``: each other dtype measured, its overlap (its all-reduce
    times in ``links`` under all_reduce_key), written as ``collective.dtypes``;
    ``fsdp_host``: measure_fsdp_overhead's result (absent: none); ``interaction``:
    parsim.profile.overlap.measure_interaction's points (absent: none); ``disturbed``: the phases
    the canary or the host's counters found disturbed (parsim.profile.host.PhaseWatch), written
    as ``# DISTURBED:`` lines under the header, which ``parsim profile-comm --strict`` refuses."""
    dtype_overlaps = dtype_overlaps or {}
    fsdp_host = fsdp_host or {op: (0.0, 0.0) for op in SHARDED_OPS}
    (gather_s, gather_rate), (rs_s, rs_rate) = (fsdp_host[op] for op in SHARDED_OPS)
    today = datetime.date.today().isoformat()
    machine = f"{platform.node() or 'host'} ({platform.machine()}, {os.cpu_count()} cores, {platform.system()})"
    here = this_machine()
    a_g, b_g = fit_alpha_beta(*links["group"]) if "group" in links else (0.0, 1e12)
    n = world
    eff, step_latency = ring_fit(links["all_reduce"], n, a_g, b_g)
    fits = tuple((dtype, DtypeCollectives(*ring_fit(links[all_reduce_key(dtype)], n, a_g, b_g), overlap=o))
                 for dtype, o in dtype_overlaps.items())
    eff_rows = ", ".join(f"[{w:.3g}, {min(1.0, e):.3f}]" for w, e in device["efficiency"])
    lines = [
        f"# Measured {today} on {machine} with `{command}`",
        f"# by parsim profile-comm: {world} ranks ({local_world} per node), backend {backend}, "
        f"{torch.get_num_threads()} thread(s) per rank.",
        *(f"# DISTURBED: {line}" for line in disturbed),
        "schema_version: 1",
        f"name: {name}",
        f"description: measured by parsim profile-comm on {today}, {backend}, {local_world} ranks per node",
        f"measured: {{date: '{today}', machine: '{machine}', cpu_model: '{here.cpu_model}', torch: '{here.torch}', "
        f"command: '{command}'}}",
        "device:",
        f"  name: {platform.machine()}-core",
        f"  memory: {memory_bytes}   # machine memory / ranks per node",
        f"  memory_bandwidth_gb_per_s: {device['copy_bytes_per_s'] / 1e9:.3f}   # measured: tensor copy, read + write",
        "  memory_efficiency: 1.0",
        "  peak_tflops:",
        f"    fp32: {device['peak_flops_per_s'] / 1e12:.5f}   # measured: best fp32 matmul, n = 64..2048",
        f"  efficiency: [{eff_rows}]   # measured: matmul FLOP/s / peak at 2n^3 FLOPs",
        f"  memory_reserved: {{runtime_context: {runtime_bytes}, collective_buffers: 0, fragmentation_fraction: 0.0}}"
        "   # measured: a rank's resident set after init, before any tensor; gloo keeps no standing buffers, the CPU "
        "allocator no pool to fragment",
        "node:",
        f"  devices: {local_world}",
        f"  group_link: {{bandwidth_gb_per_s: {b_g / 1e9:.4f}, latency_us: {a_g * 1e6:.1f}}}"
        "   # measured: send/recv fit, 4 KiB..64 MiB",
    ]
    if "network" in links:
        a_n, b_n = fit_alpha_beta(*links["network"])
        lines += ["network:", "  nics_per_node: 1",
                  f"  nic_bandwidth_gb_per_s: {b_n * local_world / 1e9:.4f}   # measured per device x devices",
                  f"  latency_us: {a_n * 1e6:.1f}"]
    idle_s, busy_s = busy_sender_s
    ops = tuple((op, *reversed(ring_fit(links[op], n, a_g, b_g, op)))
                for op in COLLECTIVE_FIT_OPS if op in links and n > 1)          # (op, latency_s, efficiency)
    coll = Collectives(library=backend, bandwidth_efficiency=eff, latency_s=step_latency, overlap=overlap,
                       busy_sender_delay_s=busy_s, op_fits=ops, fsdp_gather_overhead_s=gather_s,
                       fsdp_reduce_scatter_overhead_s=rs_s, fsdp_gather_copy_bytes_per_s=gather_rate,
                       fsdp_reduce_scatter_copy_bytes_per_s=rs_rate, dtypes=fits, interaction=tuple(interaction))
    lines.append(f"collective: {collectives_flow(coll)}"
                 f"   # measured: all-reduce fitted as a ring over {n} ranks; overlap: share hidden behind compute")
    lines.append(f"  # busy_sender_delay_us: measured: post to arrival of a {BUSY_SENDER_BYTES >> 10} KiB send whose sender "
                 f"goes on computing (median; {idle_s * 1e6:.0f} us when it waits)")
    if ops:
        lines.append("  # all_gather, reduce_scatter: all_gather_into_tensor and reduce_scatter_tensor fitted as rings, "
                     "4 KiB..64 MiB of gathered / reduced buffer; all_to_all: all_to_all_single with split sizes, "
                     "fitted as pairwise exchange ((n-1) steps, (n-1)/n of each rank's 4 KiB..64 MiB buffer), each timed "
                     "after compute, mean over repeats (parsim.profile.comm.all_to_all_times)")
    lines.append(f"  # fsdp_*_overhead_us, fsdp_*_copy_gb_per_s: measured: per FSDP2 unit and per byte of it, beyond its "
                 f"collective ({FSDP_UNITS} units of {FSDP_UNIT_BYTES[0] >> 10} KiB, then of {FSDP_UNIT_BYTES[1] >> 20} "
                 f"MiB, computing {FSDP_UNIT_DIM}^3 matmuls; parsim.profile.comm.measure_fsdp_overhead)")
    if interaction:
        lines.append("  # interaction: [op, message_bytes, load, flops_per_byte, threads, overlap, contention] on "
                     "synthetic kernels (parsim.profile.overlap), medians over the repeats; prices the gradient all-reduces and "
                     "ZeRO's reduce-scatters of every model")
    if fits:
        lines.append(f"  # dtypes: {', '.join(d for d, _ in fits)}'s own all-reduce fit (the same bytes, "
                     f"{SIZES_BYTES[0] >> 10} KiB..{SIZES_BYTES[-1] >> 20} MiB) and overlap under matmuls in that dtype; "
                     "the fields before it are fp32's")
    return "\n".join(lines) + "\n"


def ring_fit(sizes_times: tuple[list[int], list[float]], n: int, a_g: float, b_g: float,
             op: str = "all_reduce") -> tuple[float, float]:
    """A collective's times over ``n`` ranks fitted as a ring against the point-to-point link
    (a_g s, b_g bytes/s): an all-reduce takes 2(n-1) steps of alpha and moves 2(n-1)/n of the
    message at the bus bandwidth, an all-gather or reduce-scatter (n-1) and (n-1)/n of the whole
    buffer.  (bandwidth efficiency relative to the link, in [0.01, 1]; the library's latency per
    step, s)."""
    a_ar, inv = fit_alpha_beta(*sizes_times)
    if n <= 1:
        return 1.0, 0.0
    steps = 2 if op == "all_reduce" else 1
    ring_bus = steps * (n - 1) / n * inv               # bus bytes/s the collective reached
    return min(1.0, max(ring_bus / b_g, 0.01)), max(0.0, a_ar / (steps * (n - 1)) - a_g)


def launch_profile_comm(output: str, nproc: int, name: str = "local-cpu", repeats: int = 9,
                        dtypes: str = "fp32,bf16", quiet: bool = False, threads: int = 1) -> int:
    """Run ``nproc`` ranks of this module's ``main`` (``parsim profile-comm``); rank 0 writes the
    cluster profile to ``output``.  Returns the exit code."""
    from parsim.exec.launch import launch

    worker = ["-o", output, "--name", name, "--repeats", str(repeats), "--dtypes", dtypes]
    return launch(worker, nproc, timeout_s=300, threads=threads, module="parsim.profile.comm", quiet=quiet)   # with the interaction grid


def main(argv=None) -> int:
    from parsim.errors import ParsimError
    from parsim.exec.runtime import configure_process
    from parsim.fileio import write_text

    p = argparse.ArgumentParser(prog="python -m parsim.profile.comm")
    p.add_argument("-o", "--output", default="measured-cluster.yaml")
    p.add_argument("--name", default="local-cpu")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--dtypes", default="fp32,bf16", help="all-reduce and overlap measured in each (fp32 first)")
    p.add_argument("--no-interaction", action="store_true",
                   help="skip the interaction of collectives and compute on synthetic kernels (parsim.profile.overlap)")
    args = p.parse_args(argv)
    rank = os.environ.get("RANK", "?")
    try:
        dtypes = measured_dtypes(args.dtypes)
        configure_process(int(os.environ.get("OMP_NUM_THREADS", "1")))
        from parsim.exec import groups
        env = groups.init(timeout_s=300)
        runtime_bytes = resident_bytes()          # the process before any tensor: the runtime's own footprint
    except ParsimError as e:
        print(f"parsim: error: rank {rank}: {e}", file=sys.stderr)
        return e.exit_code
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", env.world_size))
    from parsim.profile.host import PhaseWatch, disturbed_phases
    from parsim.profile.overlap import measure_interaction

    watch = PhaseWatch(local_world)          # the canary and the host's counters around each phase
    device = watch("device", lambda: measure_device(args.repeats)) if env.rank == 0 else None
    dist.barrier()
    links = watch("links and collectives", lambda: measure_links(env.rank, env.world_size, local_world,
                                                                  args.repeats, dtypes))
    overlaps = watch("overlap", lambda: {d: measure_overlap(args.repeats, d) if env.world_size > 1 else 1.0
                                         for d in dtypes})
    busy_sender = watch("busy sender", lambda: measure_busy_sender(env.rank, 1, 2 * max(args.repeats, 2))) \
        if env.world_size > 1 else (0.0, 0.0)
    fsdp = watch("fsdp", lambda: measure_fsdp_overhead(env.world_size, args.repeats, links)) \
        if env.world_size > 1 else None
    interaction = watch("interaction", lambda: measure_interaction(env.rank, env.world_size, args.repeats)) \
        if env.world_size > 1 and not args.no_interaction else ()
    everyone = [None] * env.world_size
    dist.all_gather_object(everyone, watch.phases)
    disturbed = sorted({f"rank {r}: {line}" for r, phases in enumerate(everyone) for line in disturbed_phases(phases)})
    if env.rank == 0:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // local_world
        command = "parsim profile-comm " + " ".join(sys.argv[1:]) if sys.argv[1:] else "parsim profile-comm"
        write_text(args.output, profile_yaml(args.name, device, links, env.world_size, local_world, env.backend,
                                             memory, command, overlaps["fp32"], runtime_bytes, busy_sender,
                                             {d: o for d, o in overlaps.items() if d != "fp32"}, fsdp,
                                             interaction, disturbed))
        for line in disturbed:
            print(f"parsim: warning: DISTURBED while measuring {line}; profile again on a quiet machine "
                  "(--strict refuses such a profile)", file=sys.stderr)
        print(f"wrote {args.output}")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from parsim.exec.runtime import exit_without_teardown

    exit_without_teardown(main())      # torch's teardown after gloo aborted finished ranks (runtime's docstring)

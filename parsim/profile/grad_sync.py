"""The gradient all-reduce under the model's own backward, as the ranks of a data-parallel run
pay for it: measured by the concurrent profilers of ``parsim profile --nproc N`` (N >= 2, no
tensor parallelism), which form the data-parallel group.

Why here and not in ``parsim profile-comm``: on CPU, gloo reduces on threads that share the
cores with the backward, so what an all-reduce costs under compute depends on that compute.
profile-comm's reading under matmuls ran from 0.00 to 0.71 (the share hidden) between runs on
the idle 2-core local-cpu (hardware_profiles/local-cpu.yaml); this one is taken under the
model's own backward, in its dtype, on the executor's buckets (README, "The gradient all-reduce
under the backward", for what it measured).

Per repeat, back to back (so that a machine whose speed drifts shifts the three alike), on the
executor's own buckets (``parsim.exec.grad_sync.GradBuckets``: DDP's 25 MiB, backward order,
started by the gradient hooks):

- ``backward_s``: the whole model's backward, one chain as a pp = 1 stage runs it, the hooks idle;
- ``all_reduce_s``: every bucket divided by dp and all-reduced, one after the other, no compute;
- ``both_s``: the backward with the buckets started as they fill (DDP's overlap), then waited for.

``cost = (both - backward) / all_reduce``: what the all-reduces add to the step per second they
take alone; 0 if wholly hidden, 1 if as if run after the backward, above 1 if they also slow
the backward (the caches and memory bandwidth are shared).  The simulator charges each bucket
``(1 - overlap)`` of its time on the compute stream (``parsim.sim.engine``), so a profile with
this figure prices its data-parallel buckets with ``overlap = 1 - cost``
(``parsim.cost.compute.grad_sync_overlap``).

The micro-batch size is the smallest profiled one whose backward is at least
``BACKWARD_PER_ALL_REDUCE`` times the all-reduce (the largest if none is), so that the buckets
reduce under the backward, as the simulator's formula takes them, not in a tail after it (that
tail the simulator prices itself, bucket by bucket).
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

BACKWARD_PER_ALL_REDUCE = 3.0
WARMUP = 1


def grad_sync_cost(backward_s: float, all_reduce_s: float, both_s: float) -> float:
    """(both - backward) / all-reduce, at least 0 (module docstring)."""
    return max(0.0, (both_s - backward_s) / all_reduce_s) if all_reduce_s > 0 else 0.0


def choose_size(sizes, backward_s_by_size: dict[int, float], all_reduce_s: float) -> int:
    """The smallest size whose backward is at least BACKWARD_PER_ALL_REDUCE x the all-reduce, else the largest."""
    return next((b for b in sorted(sizes) if backward_s_by_size[b] >= BACKWARD_PER_ALL_REDUCE * all_reduce_s),
                max(sizes))


def summarize(samples: list[tuple[float, float, float]], microbatch: int, dp: int, bucket_bytes: list[int]) -> dict:
    """The profile's ``grad_sync`` entry from per-repeat (backward, all-reduce, both) seconds:
    each the median over the repeats, the cost from the medians, and the range of the repeats' own costs."""
    med = [statistics.median(s[i] for s in samples) for i in range(3)]
    costs = [grad_sync_cost(*s) for s in samples]
    return {"microbatch_size": microbatch, "dp": dp, "bucket_bytes": list(bucket_bytes),
            "backward_s": med[0], "all_reduce_s": med[1], "both_s": med[2],
            "cost": grad_sync_cost(*med), "cost_min": min(costs), "cost_max": max(costs), "repeats": len(samples)}


def measure_grad_sync(units, loss_of, sample, sizes, backward_s_by_size: dict[int, float], repeats: int) -> dict:
    """Every profiler of the group calls it (collectives inside).  ``units``: the cut units, in
    order; ``loss_of(stage, x, y)``: the run's loss; ``sample(b)``: (inputs, targets) of b samples;
    ``backward_s_by_size``: the profiled backward of the whole model per size (to choose one)."""
    from parsim.exec.grad_sync import GradBuckets
    from parsim.exec.stages import sequential

    stage = sequential(units)
    dp = dist.get_world_size()
    buckets = GradBuckets(stage, None, dp, 1)

    def zero():
        for flat in buckets.flat:
            flat.zero_()

    def all_reduce() -> float:
        dist.barrier()
        t0 = time.perf_counter()
        for flat in buckets.flat:
            flat.div_(dp)
            dist.all_reduce(flat)
        return time.perf_counter() - t0

    def backward(x, y, sync: bool) -> float:
        zero()
        loss = loss_of(stage, x, y)
        dist.barrier()
        t0 = time.perf_counter()
        if sync:
            loss.backward()
            buckets.finish()
        else:
            with buckets.unsynced():
                loss.backward()
        return time.perf_counter() - t0

    for _ in range(WARMUP):
        all_reduce()
    alone = torch.tensor([statistics.median(all_reduce() for _ in range(3))])
    dist.all_reduce(alone, op=dist.ReduceOp.MAX)          # every profiler chooses the same size
    b = choose_size(sizes, backward_s_by_size, float(alone))
    x, y = sample(b)
    for _ in range(WARMUP):
        backward(x, y, False)
        backward(x, y, True)
    samples = []
    for _ in range(repeats):
        samples.append((backward(x, y, False), all_reduce(), backward(x, y, True)))
    zero()
    return summarize(samples, b, dp, [flat.numel() * flat.element_size() for flat in buckets.flat])

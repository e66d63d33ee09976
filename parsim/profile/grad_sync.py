"""The gradient all-reduce under the model's own backward, as the ranks of a data-parallel run
pay for it: measured by the concurrent profilers of ``parsim profile --nproc N`` (N >= 2, no
tensor parallelism), which form the data-parallel group.

Why here and not in ``parsim profile-comm``: on CPU, gloo reduces on threads that share the
cores with the backward, so what an all-reduce costs under compute depends on that compute.
profile-comm's reading under matmuls ran from 0.00 to 0.71 (the share hidden) between runs on
the idle 2-core local-cpu (hardware_profiles/local-cpu.yaml); this one is taken under the
model's own backward, in its dtype, on the executor's buckets (for what it measured: the
measurement log in `git show b68a234:README.md`, "The gradient all-reduce under the backward").

Per repeat, back to back (so that a machine whose speed drifts shifts the three alike), on the
executor's own buckets (``parsim.exec.grad_sync.GradBuckets``: DDP's 25 MiB, backward order,
started by the gradient hooks):

- ``backward_s``: the whole model's backward, one chain as a pp = 1 stage runs it, the hooks idle;
- ``all_reduce_s``: every bucket divided by dp and all-reduced, one after the other, no compute;
- ``both_s``: the backward with the buckets started as they fill (DDP's overlap), then waited for.

``cost = (both - backward) / all_reduce``: what the all-reduces add to the step per second they
take alone; 0 if wholly hidden, 1 if as if run after the backward, above 1 if they also slow
the backward (the caches and memory bandwidth are shared).  DIAGNOSTIC ONLY: it is measured on
the model's own workload, so pricing the model from it would fit the prediction to its target.
The simulator prices every model's buckets from the interaction measured on synthetic kernels
(parsim.profile.overlap, parsim.hardware.interaction); ``parsim validate`` prints this figure
beside it, split the same way into overlap and contention (``GradSync.terms``).

The micro-batch size is the smallest profiled one whose backward is at least
``BACKWARD_PER_ALL_REDUCE`` times the all-reduce (the largest if none is), so that the buckets
reduce under the backward, as the simulator's formula takes them, not in a tail after it (that
tail the simulator prices itself, bucket by bucket).

ZeRO-2 and 3 (FSDP2, ``parsim.exec.fsdp``) reduce-scatter every unit's gradient after every
micro-batch's backward, with host copies around each (FSDP2's ``chunk_cat`` in, the shard out).
``measure_fsdp_sync`` times, at the same size and per repeat back to back, the plain backward
(a copy of the model, unsharded, no hooks) and the backward of a ZeRO-2 copy (as the executor
shards it, a micro-batch that keeps its parameters gathered: every reduce-scatter, no gather),
each after its own untimed forward.  ``added = fsdp - plain`` is what FSDP2's reduce-scatters
and their host time add to a backward; the profile's ``fsdp_sync`` entry, a DIAGNOSTIC like
``grad_sync`` (``FsdpSync.terms``, ``parsim.sim.simulate.fsdp_sync_overlap``): the
reduce-scatters are priced from the interaction table.
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


def summarize_fsdp(samples: list[tuple[float, float]], microbatch: int, dp: int, reduce_scatter_bytes: list[int]) -> dict:
    """The profile's ``fsdp_sync`` entry from per-repeat (plain backward, ZeRO-2 backward) seconds:
    each the median over the repeats, ``added_s`` from the medians (at least 0), and the range of
    the repeats' own differences."""
    plain = statistics.median(s[0] for s in samples)
    fsdp = statistics.median(s[1] for s in samples)
    diffs = [s[1] - s[0] for s in samples]
    return {"microbatch_size": microbatch, "dp": dp, "reduce_scatter_bytes": list(reduce_scatter_bytes),
            "backward_s": plain, "fsdp_backward_s": fsdp, "added_s": max(0.0, fsdp - plain),
            "added_min_s": min(diffs), "added_max_s": max(diffs), "repeats": len(samples)}


def measure_fsdp_sync(units, loss_of, sample, microbatch: int, repeats: int) -> dict:
    """Every profiler of the group calls it (FSDP2's collectives inside), after measure_grad_sync
    and at its size; arguments as there (module docstring, ZeRO-2 and 3)."""
    import copy

    from torch.distributed.device_mesh import init_device_mesh

    from parsim.exec.fsdp import ShardedCollectives, before_microbatch, shard_stage
    from parsim.exec.stages import sequential

    plain = copy.deepcopy(sequential(units))          # fresh parameters: no gradient hooks
    sharded = copy.deepcopy(plain)
    dp = dist.get_world_size()
    device_type = next(plain.parameters()).device.type
    shard_stage(sharded, init_device_mesh(device_type, (dp,)), 2)
    before_microbatch(sharded, 2, 0, 2)               # a micro-batch before the step's last: stays gathered
    x, y = sample(microbatch)

    def backward(stage) -> float:
        loss = loss_of(stage, x, y)
        dist.barrier()
        t0 = time.perf_counter()
        loss.backward()
        return time.perf_counter() - t0

    with ShardedCollectives() as issued:
        for _ in range(WARMUP):
            backward(plain)
            backward(sharded)
    reduce_scatter_bytes = [n for op, n in issued.take()[0] if op == "reduce_scatter"]
    per_backward = len(reduce_scatter_bytes) // WARMUP
    samples = [(backward(plain), backward(sharded)) for _ in range(repeats)]
    return summarize_fsdp(samples, microbatch, dp, reduce_scatter_bytes[:per_backward])

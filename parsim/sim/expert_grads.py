"""The routed experts' gradients (and ZeRO's parameter shards) over the ranks holding the same
experts (ParallelConfig.expert_dp_group), apart from the dense ones: as DDP / ZeRO-1 buckets
(ddp_expert_buckets) and as ZeRO 2-3's FSDP units (FsdpExperts); parsim.sim.simulate prices them
beside the dense parameters'."""

from __future__ import annotations

from parsim.cost.comm import DDP_BUCKET_BYTES, ddp_buckets, first_bucket_bytes, fsdp_unit_s, shard_padded_bytes


def ddp_expert_buckets(s, cfg, prices, idx, expert_own, last, total, per_param, width, zero, algorithm, bucket,
                       buckets_per_stage, after_opt, comm_bytes) -> tuple[float, ...]:
    """ep > 1: stage s's routed-expert gradients, bucketed as DDP buckets the dense ones
    (Megatron-Core keeps the expert parameters in a buffer of their own), all-reduced (ZeRO-1:
    reduce-scattered, their shards all-gathered after the optimizer) over the expert_dp ranks
    holding the same experts (ParallelConfig.expert_dp_group: 1/ep of the bytes, dp x cp / ep
    ranks).  Added to the stage's buckets (``bucket``) in the order they become ready, on the
    same stream; returns their bytes."""
    group = prices.group(cfg, "expert_dp", s % cfg.pp)
    n, link = len(group), prices.link_class(group)
    grads = [expert_own[i - idx.start] * per_param["grads"] for i in reversed(idx)]
    members = ddp_buckets(grads, DDP_BUCKET_BYTES, first_cap_bytes=first_bucket_bytes(zero))
    sizes = tuple(sum(grads[j] for j in g) for g in members)
    sizes = tuple(shard_padded_bytes(x, width, n) for x in sizes) if zero else sizes
    op = "reduce_scatter" if zero else "all_reduce"
    ours = [(sum(last[: g[-1] + 1]) / total, prices.collective_s(group, x, op, algorithm))
            for g, x in zip(members, sizes)]
    dense = [bucket.pop((s, k)) for k in range(buckets_per_stage.get(s, 0))]
    for k, entry in enumerate(sorted(dense + ours, key=lambda e: e[0])):     # stable: dense first on ties
        bucket[(s, k)] = entry
    buckets_per_stage[s] = len(dense) + len(ours)
    groups = cfg.expert_shards               # expert-data-parallel groups per pipeline rank, all alike
    comm_bytes[link] += sum((1 if zero else 2) * (n - 1) * x for x in sizes) * groups
    if zero == 1:           # the updated shards: parameters, in the training dtype
        share = per_param["params"] / per_param["grads"]
        after_opt[s] = after_opt.get(s, 0.0) + sum(prices.collective_s(group, x * share, "all_gather") for x in sizes)
        comm_bytes[link] += (n - 1) * sum(sizes) * share * groups
    return sizes


class FsdpExperts:
    """ZeRO 2-3 under expert parallelism: each FSDP unit's routed experts, a unit of their own
    sharded over the ranks holding the same experts (ParallelConfig.expert_dp_group, dp x cp x tp
    / (ep x etp) of them) rather than the dense shard group: torchtitan's apply_fsdp wraps
    ``transformer_block.moe.experts`` with fully_shard on its edp mesh before the block on the
    dense one (torchtitan/models/llama4/infra/parallelize.py; Megatron-FSDP likewise keeps the
    expert parameters in a buffer of their own over the expert-data-parallel group).  Per unit k of
    ``units``: the experts' gradient bytes (``grads``), their reduce-scatter's padded buffer
    (``shard_bytes``) and seconds (``reduce_s``), their parameters' all-gather seconds
    (``gather_s``); and FSDP2's host time and copies around them (fsdp_unit_s), every micro-batch.
    All zeros where the unit holds no routed experts apart (parsim.cost.experts.expert_param_count)."""

    def __init__(self, cfg, prices, s, units, expert_own, per_param, width, algorithm):
        self.grads = tuple(sum(expert_own[i] for i in u) * per_param["grads"] for u in units)
        self.on = any(self.grads)
        ne = cfg.expert_dp
        zeros = (0.0,) * len(units)
        self.shard_bytes, self.reduce_s, self.gather_s = zeros, zeros, zeros
        self.gather_host_s = self.reduce_host_s = 0.0
        self.groups, self.ranks = cfg.expert_shards, ne     # expert_dp groups per pipeline rank, their ranks
        self.gather_bytes = zeros
        if not self.on:
            return
        cluster = prices.cluster
        group = prices.group(cfg, "expert_dp", s % cfg.pp)
        self.link = prices.link_class(group)
        share = per_param["params"] / per_param["grads"]
        self.shard_bytes = tuple(shard_padded_bytes(x, width, ne) if x else 0.0 for x in self.grads)
        self.gather_bytes = tuple(shard_padded_bytes(x * share, per_param["params"], ne) if x else 0.0
                                  for x in self.grads)
        if ne > 1:
            self.reduce_s = tuple(prices.collective_s(group, x, "reduce_scatter", algorithm) if x else 0.0
                                  for x in self.shard_bytes)
            self.gather_s = tuple(prices.collective_s(group, x, "all_gather") if x else 0.0
                                  for x in self.gather_bytes)
        self.gather_host_s = sum(fsdp_unit_s(cluster, "all_gather", x, x) for x in self.gather_bytes if x)
        self.reduce_host_s = sum(fsdp_unit_s(cluster, "reduce_scatter", x, x * per_param["params"] / width)
                                 for x in self.shard_bytes if x)

    def count_bytes(self, comm_bytes, reduces: int, gathers: int) -> None:
        """Ring bytes over every rank of ``reduces`` reduce-scatters and ``gathers`` all-gathers of
        each unit's experts: (ne - 1) x the buffer in each of ep x etp groups."""
        if self.on and self.ranks > 1:
            comm_bytes[self.link] += (self.ranks - 1) * self.groups * (
                sum(self.shard_bytes) * reduces + sum(self.gather_bytes) * gathers)

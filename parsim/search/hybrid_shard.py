"""Hybrid sharding for the planner's ZeRO picks (``parsim plan --hybrid-shard``;
Constraints.hybrid_shard).

A ranked candidate whose ZeRO shards span data-parallel ranks on more than one node is simulated
again with shard groups of one node's replicas, then of two nodes', four, ... (ParallelConfig.
dp_shard: the HSDP torchtitan's and FSDP's users run, shard groups replicated across the rest), and
the fastest of them that fits the cap takes its place where it is faster.  Which is faster depends
on the fabric (results/simulated/2026-12-01-hsdp.txt): the gathers move onto the node's links, but
the replicas' all-reduce moves twice a reduce-scatter's bytes over the network, and a rank holds
dp / dp_shard times the optimizer state.

It refines the ranked candidates only: the branch and bound prices ZeRO over every dp rank, so a
layout that only hybrid sharding would make the best one, and that the search ranked below its
top k, is not found.  Off by default: Megatron-LM's torch FSDP2 path (ZeRO 2 and 3) and DeepSpeed
run no shard groups (parsim.export refuses them), and a pick should run where parsim exports it.
"""

from __future__ import annotations

from dataclasses import replace

from parsim.errors import DoesNotFitError, InfeasibleError
from parsim.fmt import human_bytes, human_time
from parsim.search.bound import Candidate, refine_ranked


def _on_one_node(cfg, devices_per_node: int) -> bool:
    """Whether every pipeline rank's data-parallel ranks (ParallelConfig.grad_group) share a node."""
    return all(len({r // devices_per_node for r in cfg.grad_group(p)}) == 1 for p in range(cfg.pp))


def node_shard(cfg, devices_per_node: int) -> int:
    """The dp_shard that keeps each shard group inside one node: the most consecutive replicas
    (ParallelConfig.shard_group) whose every group, on every pipeline rank, sits on one node and
    that divide dp; 0 where every replica is on one node already, or a node holds one replica with
    cp 1 (nothing to shard).
    Replicas sit pp x cp x tp ranks apart under pp-inner, cp x tp under dp-inner
    (ParallelConfig.global_rank), so a node holds at most devices_per_node over that."""
    if _on_one_node(cfg, devices_per_node):
        return 0                     # the shards span one node already
    stride = cfg.cp * cfg.tp * (cfg.pp if cfg.placement == "pp-inner" else 1)
    for shard in range(min(devices_per_node // stride, cfg.dp - 1), 0, -1):
        if cfg.dp % shard or shard * cfg.cp < 2:
            continue
        hybrid = replace(cfg, dp_shard=shard)
        if all(len({r // devices_per_node for r in hybrid.shard_group(p, 0, k)}) == 1
               for p in range(cfg.pp) for k in range(hybrid.shard_replicas)):
            return shard
    return 0


def shard_sizes(cfg, devices_per_node: int) -> list[int]:
    """The dp_shard values to try: a node's replicas (``node_shard``), then two, four, ... nodes'
    (the shard groups HSDP's users pick, trading optimizer state against network traffic), each
    dividing dp and below it; [] where every replica is on one node already."""
    base = node_shard(cfg, devices_per_node)
    if not base:
        if _on_one_node(cfg, devices_per_node):
            return []
        base = 1 if cfg.cp > 1 else 2         # a node holds one replica: groups of two nodes first
    sizes, size = [], base
    while size < cfg.dp:
        if cfg.dp % size == 0:
            sizes.append(size)
        size *= 2
    return sizes


def shard_within_nodes(cand: Candidate, devices_per_node: int, cap_bytes: float, simulated) -> Candidate:
    """``cand`` with the fastest of ``shard_sizes`` that fits ``cap_bytes``, where that is faster;
    ``cand`` itself otherwise, or where it shards nothing across nodes.  ``simulated(cfg) ->
    Candidate`` prices a configuration as the search does."""
    cfg = cand.config
    best = cand
    for shard in shard_sizes(cfg, devices_per_node) if cfg.zero and not cfg.dp_shard else ():
        try:
            trial = simulated(replace(cfg, dp_shard=shard))
        except InfeasibleError:      # a layout hybrid sharding does not take (parsim.refusals.shard_refusal)
            return cand
        if trial.peak_memory_bytes <= cap_bytes and trial.estimate.step_time_s < best.estimate.step_time_s:
            best = trial
    return cand if best is cand else replace(best, label=cand.label)


def hybrid_sharded(ranked: list[Candidate], devices_per_node: int, cap_bytes: float,
                   simulated) -> tuple[list[Candidate], dict]:
    """``shard_within_nodes`` of each of ``ranked``, ranked again, and each refined one's key -> its
    step sharding over every dp rank (for ``hybrid_lines``)."""
    return refine_ranked(ranked, lambda cand: shard_within_nodes(cand, devices_per_node, cap_bytes, simulated))


def fixed_sharded(ranked: list[Candidate], shard: int, top: int, cap_bytes: float,
                  simulated) -> tuple[list[Candidate], dict]:
    """A shard group the user fixed (``parsim plan --dp-shard``, model.yaml's ``parallel.dp_shard``):
    the plans of ``ranked`` (the search's, each ZeRO over every dp rank, best first: the search
    offered only those the group applies to, parsim.search.enumerate.zero_variants) priced again
    with it, in rank order until ``top`` of them fit ``cap_bytes``, ranked again; and each one's
    key -> its step sharding over every dp rank (for ``hybrid_lines``).  A plan whose dp is the
    group is ZeRO over every dp rank already, and stays as ranked.  Like ``hybrid_sharded``, it
    refines the ranking of ZeRO over every dp rank (module docstring)."""
    out, whole = [], {}
    for cand in ranked:
        if len(out) == top:
            break
        if cand.config.dp == shard:
            out.append(cand)
            continue
        try:
            trial = simulated(replace(cand.config, dp_shard=shard))
        except InfeasibleError:      # parsim.refusals.shard_refusal
            continue
        if trial.peak_memory_bytes <= cap_bytes:
            trial = replace(trial, label=cand.label)
            whole[trial.key()] = cand.estimate.step_time_s
            out.append(trial)
    if not out:
        raise DoesNotFitError(f"no ranked plan fits {human_bytes(cap_bytes)} with ZeRO's shards over groups of {shard} "
                              f"data-parallel ranks (--dp-shard, or model.yaml's parallel.dp_shard), which hold "
                              f"dp / {shard} times the state; use a larger shard group, or drop it")
    return sorted(out, key=Candidate.rank), whole


def sharding_refined(results: list[Candidate], shard: int, hybrid: bool, top: int, devices_per_node: int,
                     cap_bytes: float, simulated) -> tuple[list[Candidate], dict]:
    """The search's ranked plans (``results``, best first) under the sharding asked for: a shard
    group given (``fixed_sharded``), else ``--hybrid-shard``'s groups within nodes for the top
    ``top`` (``hybrid_sharded``), else as ranked; and each refined plan's key -> its step sharding
    over every dp rank (for ``hybrid_lines``)."""
    if shard:
        return fixed_sharded(results, shard, top, cap_bytes, simulated)
    if hybrid:
        head, whole = hybrid_sharded(results[:top], devices_per_node, cap_bytes, simulated)
        return head + results[top:], whole
    return results, {}


def hybrid_lines(chosen: Candidate, whole: dict) -> tuple[str, ...]:
    """What the report says of the pick's sharding where ``shard_within_nodes`` changed it."""
    if chosen.key() not in whole:
        return ()
    c = chosen.config
    name = "Megatron's partial distributed optimizer" if c.zero == 1 else "HSDP, torchtitan's and FSDP's"
    return (f"hybrid sharding: ZeRO-{c.zero}'s shards over groups of {c.dp_shard} data-parallel ranks, "
            f"replicated {c.shard_replicas} times ({name}): {human_time(chosen.estimate.step_time_s)} a step "
            f"against {human_time(whole[chosen.key()])} sharding over all {c.dp}",)

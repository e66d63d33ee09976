"""ZeRO-3's parameter all-gathers as a term of the search's lower bound
(parsim.search.split.Bounds.lower_bound_s).

Under ZeRO-3 every FSDP unit of a stage is all-gathered, on one stream, before its layer runs, in
each micro-batch's forward and again in its backward; the simulator charges each action its
compute and what of the gathers its compute does not hide (parsim.cost.comm.prefetched_gather_s,
one layer ahead), so an action lasts at least as long as its gathers, whatever its compute.  A
search with many micro-batches of a large model would otherwise simulate ZeRO-3 candidates whose
gathers alone, repeated each micro-batch, put them far behind the best (DeepSeek-V3 on 2,048
H100s: 88 ZeRO-3 simulations of 110, at 39.2-426.9 s a step against a best of 38.6 s; with this
term 27 of 49, at 39.2-53.5 s: results/2026-12-04c-amd-epyc/zero3-sims-trace.txt)."""

from __future__ import annotations


def least_gathers_s(prices, cfg, pipe_rank: int, dense_params: float, expert_params: float,
                    param_bytes: float) -> float:
    """A time no forward (or backward) of a ZeRO-3 stage of ``dense_params`` and ``expert_params``
    (its routed experts, sharded apart: parsim.cost.experts.expert_param_count) can beat on
    pipeline rank ``pipe_rank``: one all-gather of all its dense parameters over the shard group
    and one of all its experts' over the expert_dp group (parsim.sim.expert_grads.FsdpExperts), in
    the training dtype (``param_bytes`` a parameter).  The simulator gathers unit by unit, padded
    to whole shards: no faster than one message of all of them, as a collective's time grows no
    faster than its bytes (the same assumption as parsim.search.buckets)."""
    seconds = 0.0
    if dense_params > 0 and cfg.shard_ranks > 1:
        seconds += prices.collective_s(prices.group(cfg, "shard", pipe_rank), dense_params * param_bytes, "all_gather")
    if expert_params > 0 and cfg.expert_dp > 1:
        seconds += prices.collective_s(prices.group(cfg, "expert_dp", pipe_rank), expert_params * param_bytes,
                                       "all_gather")
    return seconds

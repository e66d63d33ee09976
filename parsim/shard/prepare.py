"""The graph one device of a plan runs: a layout's strategies chosen (the model's ``shard:``,
parsim.shard.builtin's, or searched by parsim.shard.auto), applied by parsim.shard.graph, then
recomputed if asked, then cut to s/cp tokens of each sequence under context parallelism
(parsim.cost.context); kept in a run's ShardMemo (parsim.sim.prices.Prices.shard), since the
planner asks for the same graphs many times."""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from parsim.cost.context import context_parallel_graph
from parsim.cost.experts import expert_parallel_graph, fold_experts, routing_imbalance
from parsim.errors import InfeasibleError, InputError
from parsim.model.attention import cpu_attention
from parsim.model.graph import LayerGraph
from parsim.model.recompute import Recompute, recompute_mode
from parsim.shard import builtin
from parsim.shard.auto import StrategySearches, answered, auto_strategies, search_sizes
from parsim.shard.graph import Strategy, shard_graph


class ShardMemo:
    """What one run's per-device graphs are made of, made once: ``graphs`` by their settings
    (keys name the graphs they come from by id; each entry holds them), ``searches``, the
    auto layout's (parsim.shard.auto.StrategySearches), and ``expert_parts``, the kernels and
    operators an expert-parallel graph rescales (parsim.cost.experts.expert_parallel_graph)."""

    def __init__(self):
        self.graphs: dict[tuple, tuple] = {}
        self.searches = StrategySearches()
        self.expert_parts: dict[tuple, tuple] = {}      # parsim.cost.experts._ep_changes's rescaled kernels and ops


def check_shard_section(spec):
    """``spec`` (a ModelSpec), once its model.yaml's ``shard:`` section shards its graph: every
    strategy names operators, divides their shapes and uses the tensor-parallel group's devices
    (parallel.tp); else an InputError naming the file.  The commands call it as they load a model
    (parsim.model.spec reads the section; the rule that checks it lives here, above the model)."""
    if spec.shard:
        try:
            shard_graph(spec.graph, spec.shard, spec.parallel.tp)
        except InfeasibleError as e:
            raise InputError(f"{spec.path}: shard: {e}") from None
    return spec


def layout_strategies(graph: LayerGraph, tp: int, tp_layout: str, model_strategies=None, cluster=None,
                      training=None, microbatch: int = 1, memory_bytes: float | None = None,
                      etp: int = 1, memo: ShardMemo | None = None) -> dict[str, Strategy]:
    """The patterns -> strategies of a layout ("model", "auto" or a built-in) for tp devices;
    "auto" is searched for micro-batches of ``microbatch`` samples within ``memory_bytes``
    (auto_memory_bytes) for the model's operators on one device of each tensor-parallel group
    (``memo``: a run's, which keeps the searches).
    A mixture of experts at tp > 1 takes the megatron-sp layout, its routed experts split over
    ``etp`` devices (parsim.shard.builtin.moe: Megatron-Core's MoE Parallel Folding)."""
    if tp > 1 and getattr(graph, "moe", False) and tp_layout not in builtin.LAYOUTS:
        # The auto search would split the grouped GEMMs by expert over the tp group, an expert
        # parallelism under another name and priced by another rule: one rule for experts
        # (parsim.cost.experts), so the experts are laid out by the built-in layout alone.
        raise InfeasibleError(f"tp={tp} with the {tp_layout} layout: {graph.name} is a mixture of experts, whose "
                              "expert layers parsim lays out only in Megatron's megatron-sp layout (its MoE "
                              "Parallel Folding); use --tp-layout megatron-sp, or tp 1")
    if tp_layout == "model":
        if not model_strategies:
            raise InfeasibleError("tp > 1 with the model's strategies, but the model has no shard: section")
        return dict(model_strategies)
    if tp_layout == "auto":
        if cluster is None or training is None:
            raise ValueError("the auto layout searches on a cluster for a training setup; pass both")
        return auto_strategies(graph, tp, cluster, training.dtype, training.optimizer, microbatch,
                               cap_bytes=memory_bytes, memo=memo.searches if memo is not None else None)[0]
    return builtin.strategies(tp_layout, tp, graph, etp)


def auto_memory_bytes(cluster, pp: int) -> float:
    """The auto layout's memory cap for the whole model's operators on one device of each group:
    the device memory of the pp devices its stages share (the operator graph counts parameters,
    optimizer state and one micro-batch's saved activations; the split and the activations of
    the other micro-batches in flight are the planner's to fit).  The usable memory, not a
    --max-memory cap: a plan's layout must follow from its configuration and cluster alone."""
    return cluster.device.usable_memory_bytes * pp


def searched_microbatch(microbatch: int) -> int:
    """The micro-batch size the auto layout is searched at: the largest power of two <= the size.
    Each search of a GPT-3 takes about 0.5 s and a planner run meets some 20 sizes per tp; the
    costs it weighs are linear in the size apart from latencies (a heuristic, unconfirmed by
    measurement)."""
    return 1 << (max(1, int(microbatch)).bit_length() - 1)


def searched_already(graph: LayerGraph, tp: int, cluster, training, b: int, pp: int, memo: ShardMemo) -> bool:
    """Whether the run's ``memo`` already answers the auto layout for tp devices at micro-batch
    size ``b`` within ``pp`` devices' memory (auto.answered, at the size and cap per_device_graph
    asks for)."""
    return tp == 1 or answered(graph, tp, cluster, training.dtype, training.optimizer, searched_microbatch(b),
                               auto_memory_bytes(cluster, pp), memo=memo.searches)


def search_auto_sizes(graph: LayerGraph, tp: int, cluster, training, entries, memo: ShardMemo) -> None:
    """Search the auto layout for tp devices at the (micro-batch size, pp) of several families at
    once, ahead of per_device_graph asking for them one by one (parsim.shard.auto.search_sizes:
    the sizes without a cap in one pass, then those under each pp's cap, auto_memory_bytes, that
    miss it, in one pass a cap; the same answers, for about the price of one search each), into
    the run's ``memo``."""
    if tp > 1:
        search_sizes(graph, tp, cluster, training.dtype, training.optimizer,
                     {searched_microbatch(b) for b, _ in entries}, memo=memo.searches,
                     caps={(searched_microbatch(b), auto_memory_bytes(cluster, pp)) for b, pp in entries})


def plan_strategies(graph: LayerGraph, cfg, model_strategies, cluster, training) -> dict[str, Strategy]:
    """The patterns a configuration's layout gives, as ``parsim.sim.simulate`` prices them (its
    micro-batch size from the global batch, the auto layout's memory from the cluster): what the
    executor runs."""
    microbatch = max(1, training.global_batch_size // (cfg.dp * cfg.microbatches))
    if cfg.tp_layout == "auto":
        microbatch = searched_microbatch(microbatch)
    return layout_strategies(graph, cfg.tp, cfg.tp_layout, model_strategies, cluster, training, microbatch,
                             auto_memory_bytes(cluster, cfg.pp), cfg.etp)


def expert_graph(base: LayerGraph, ep: int, training=None, memo: ShardMemo | None = None) -> LayerGraph:
    """``base``, a per-device graph without expert parallelism, on one rank of an ep group at
    ``training``'s routing imbalance (parsim.cost.experts.expert_parallel_graph); kept in ``memo``."""
    if ep == 1:
        return base
    imbalance = routing_imbalance(training)
    return _kept(memo, ("experts", id(base), ep, imbalance), base,
                 lambda: expert_parallel_graph(base, ep, imbalance, memo.expert_parts if memo is not None else None))


def _kept(memo: ShardMemo | None, key: tuple, held, make) -> LayerGraph:
    """``make()``, once per ``key`` in the run's memo (None: every time); the entry holds
    ``held``, which the key names by id."""
    if memo is None:
        return make()
    if key not in memo.graphs:
        memo.graphs[key] = (held, make())
    return memo.graphs[key][1]


def per_device_graph(graph: LayerGraph, tp: int = 1, tp_layout: str = "", recompute: Recompute | str | bool = False,
                     model_strategies: Mapping[str, Strategy] | None = None, cluster=None,
                     training=None, microbatch: int = 1, memory_bytes: float | None = None,
                     cp: int = 1, ep: int = 1, etp: int = 1, memo: ShardMemo | None = None,
                     recompute_only: frozenset[int] | None = None) -> LayerGraph:
    """The LayerGraph one device of a plan runs: ``graph`` sharded over tp devices by
    ``tp_layout`` ("model": ``model_strategies``, the model.yaml's ``shard:``; "auto": searched
    on ``cluster`` for ``training``'s dtype and optimizer, parsim.shard.auto; else a built-in of
    parsim.shard.builtin; for ``microbatch`` samples within ``memory_bytes``, see
    layout_strategies), then recomputed as ``recompute`` says (parsim.model.recompute: none,
    selective, full; True and False read as full and none), then one rank's of a context-parallel
    group of ``cp`` (parsim.cost.context.context_parallel_graph).  Under context parallelism the
    ring runs attention flash-style, keeping no s x s tensor, so selective recomputation has
    nothing to recompute there: that graph is the one without recomputation, marked selective.
    A mixture of experts at tp > 1 folds its routed experts as Megatron-Core's MoE Parallel
    Folding does, split over ``etp`` devices (1 or tp; parsim.shard.builtin.moe, then
    parsim.cost.experts.fold_experts).  Last, under expert parallelism (``ep`` > 1), one rank's
    share of the routed experts at ``training``'s routing imbalance
    (parsim.cost.experts.expert_parallel_graph).
    On a CPU ``cluster``, the model's graph as a CPU runs it (LayerGraph.cpu_graph: attention with
    dropout or a sliding window).
    A graph already prepared for these settings is returned as is.  ``memo``: the run's, which
    keeps every graph made (the planner asks many times); settings that give the same
    strategies share one graph.  ``recompute_only``: under full recomputation, the layers
    recomputed where not every one is (ParallelConfig.recomputed_layers; None: all)."""
    model_graph = graph.tp == 1 and not graph.recompute and graph.cp == 1 and graph.ep == 1
    if model_graph and graph.cpu_graph is not None and cluster is not None and cpu_attention(cluster):
        graph = graph.cpu_graph              # what a CPU saves for its attention (LayerGraph.cpu_graph)
    recompute = recompute_mode(recompute)
    only = recompute_only if recompute is Recompute.FULL else None
    etp = etp if getattr(graph, "moe", False) else 1          # a dense model has no experts to split
    if (graph.tp == tp and graph.recompute == recompute and graph.recompute_only == only and graph.cp == cp
            and graph.ep == ep and graph.etp == etp):
        return graph
    if not model_graph:
        raise ValueError("per_device_graph takes the model's graph, not one already prepared for other settings")
    if ep > 1:                    # the tp-sharded, recomputed, cp graph (kept on its own), then ep's experts
        return expert_graph(per_device_graph(graph, tp, tp_layout, recompute, model_strategies, cluster, training,
                                             microbatch, memory_bytes, cp, etp=etp, memo=memo, recompute_only=only),
                            ep, training, memo)
    if cp > 1:                    # the tp-sharded, recomputed graph (kept on its own), then its tokens / cp
        selective = recompute is Recompute.SELECTIVE
        base = per_device_graph(graph, tp, tp_layout, Recompute.NONE if selective else recompute, model_strategies,
                                cluster, training, microbatch, memory_bytes, etp=etp, memo=memo, recompute_only=only)

        def ring() -> LayerGraph:
            out = context_parallel_graph(base, cp)
            return replace(out, recompute=recompute) if selective else out
        return _kept(memo, ("context", id(base), cp, recompute, only), base, ring)
    searched = tp_layout == "auto" and tp > 1
    if searched:
        microbatch = searched_microbatch(microbatch)
    key = (id(graph), tp, tp_layout, recompute, only, tuple(sorted((model_strategies or {}).items())),
           (id(cluster), training, microbatch, memory_bytes) if searched else None, etp)
    if memo is not None and key in memo.graphs:
        return memo.graphs[key][1]
    if recompute:                 # the sharded graph, then recomputed (the sharding is kept on its own)
        base = per_device_graph(graph, tp, tp_layout, Recompute.NONE, model_strategies, cluster, training,
                                microbatch, memory_bytes, etp=etp, memo=memo)
        out = _kept(memo, ("recomputed", id(base), recompute, only), base, lambda: base.with_recompute(recompute, only))
    elif tp > 1:
        patterns = layout_strategies(graph, tp, tp_layout, model_strategies, cluster, training, microbatch,
                                     memory_bytes, etp, memo)

        def sharded() -> LayerGraph:
            try:
                sharded = shard_graph(graph, patterns, tp, memo.searches.edges if memo is not None else None)
                return fold_experts(sharded, etp) if graph.moe else sharded
            except InfeasibleError as e:
                raise InfeasibleError(f"tp={tp} with the {tp_layout} layout: {e}") from None
        out = _kept(memo, ("sharded", id(graph), tp, etp, tuple(sorted(patterns.items()))), graph, sharded)
    else:
        out = graph
    if memo is not None:
        memo.graphs[key] = ((graph, cluster), out)     # holds what the key's ids name
    return out

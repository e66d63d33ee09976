"""The planner's search space: the candidates it enumerates, and the constraints that narrow them
(parsim.search.planner searches them; parsim.search.bound orders them).

Search space:
- tensor parallelism: tp among the divisors of the largest fast-link group (a node's NVSwitch
  domain, one of Ascend 910's 4-device HCCS groups), so that tensor-parallel collectives never
  leave it (Narayanan et al. 2021, Sec. 3.3); with each tp > 1, the strategies: the model's
  ``shard:`` section if it has one, else the built-in layouts that apply (parsim.shard.builtin)
  and the searched one (parsim.shard.auto), searched for each candidate's micro-batch size
  within the memory of its pp devices (parsim.shard.prepare.auto_memory_bytes);
- ZeRO stages 0-3 where dp > 1 (unless the model or --zero fixes it; zero 3 not under ZB-H1's
  split backward; 2-3 with pp = 1 only, but a fixed zero 2 beside pipelines too), each priced by
  the simulator, its memory bound shrunk per stage (parsim.cost.memory.zero_fractions);
- activation recomputation off and on (unless the model or a flag fixes it); on only where the
  same candidate without it does not fit the memory bound or, simulated, the cap, since
  recomputing is never faster;
- context parallelism (cp; parsim.cost.context) for models with attention over at least
  CP_SEARCH_MIN_TOKENS tokens: cp in 1, 2, 4, ... up to CP_SEARCH_MAX while 2 x cp divides the
  sequence (Megatron's zigzag chunks), unless fixed;
- every factorization of the remaining devices into dp x pp, with pp at most the number of layers;
- every micro-batch count dividing the per-replica batch;
- GPipe, 1F1B, interleaved with every v from 2 to the cut units over pp (pp x v stages, each of
  at least one cut unit; the micro-batches a multiple of pp, parsim.schedule.generators), at most
  INTERLEAVE_SEARCH_MAX, ZB-H1;
- with tp > 1 and the megatron-sp layout, tensor-parallel communication overlapped with the GEMMs
  or not (parsim.sim.overlap; Megatron-Core's --tp-comm-overlap), where the device profile prices it;
- with cp > 1, the ring and all-gather context parallelism (parsim.cost.context);
- for mixtures of experts, expert parallelism (parsim.cost.experts) folded from the tp x cp x dp
  ranks (MoE Parallel Folding, parsim.plan.ParallelConfig.fold): ep = 1 and the powers of two up
  to EP_SEARCH_MAX dividing both tp x cp x dp / etp and every MoE layer's routed experts, unless
  fixed (--ep, model.yaml parallel.ep); at tp > 1 (megatron-sp) the expert tp etp = 1 and tp,
  unless fixed (--etp, parallel.etp); ep = 1 alone for a dense model.  The split and the
  bounds price a layer without its all-to-alls (the simulation adds them): the bounds stay below
  the simulated step, only looser, and the split balances compute alone;
- placements pp-inner (pipeline neighbours on adjacent devices: inside an HCCS group or node
  where pp allows) and dp-inner;
- the split from the min-max dynamic program (parsim.search.partition), memory-constrained.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from parsim.errors import InfeasibleError
from parsim.hardware.cluster import Cluster
from parsim.model.attention import attention_window, check_cp, cp_options, sequence_length
from parsim.model.graph import LayerGraph
from parsim.model.recompute import Recompute, recompute_mode
from parsim.model.spec import ModelSpec
from parsim.plan import ParallelConfig
from parsim.refusals import shard_refusal
from parsim.schedule.generators import check_feasible
from parsim.shard.builtin import LAYOUTS, SEARCHED
from parsim.shard.prepare import expert_graph, per_device_graph


@dataclass(frozen=True)
class Constraints:
    dp: int | None = None
    pp: int | None = None
    microbatches: int | None = None
    schedule: str | None = None
    max_memory_bytes: int | None = None
    top: int = 10
    chunk_options: tuple[int, ...] | None = None     # interleaved's v; None: 2 .. cut units / pp
    placements: tuple[str, ...] = ("pp-inner", "dp-inner")
    tp: int | None = None
    tp_layout: str | None = None
    recompute: Recompute | str | bool | None = None    # none | selective | full; None: searched
    microbatch_sizes: tuple[int, ...] | None = None    # samples per micro-batch allowed (e.g. those profiled)
    zero: int | None = None                          # ZeRO stage; None: searched (0-3 where dp > 1)
    cp: int | None = None                            # context-parallel size; None: searched (models with attention)
    tp_comm_overlap: bool | None = None              # None: searched where it applies (tp > 1, megatron-sp)
    cp_mode: str | None = None                       # None: ring and allgather searched where cp > 1
    ep: int | None = None                            # expert-parallel size; None: searched (MoE models)
    ep_overlap: bool = False                         # ep > 1's all-to-alls hidden under paired compute (not searched)
    etp: int | None = None                           # expert tp, 1 or tp; None: both searched (MoE models, tp > 1)
    prune: bool = True             # False: simulate every candidate (the reference the pruned search must equal)
    use_all_devices: bool = False  # True: only plans on every device (no tp group whose layout splits nothing)
    # True: the ranked plans that recompute every layer recompute the fewest layers a stage that fit
    # (parsim.search.recompute_layers; off by default, as torchtitan and DeepSpeed cannot run it)
    partial_recompute: bool = False
    # True: the ranked plans whose ZeRO shards span nodes shard over groups of 1, 2, 4, ... nodes where faster
    # (parsim.search.hybrid_shard; off by default, as Megatron's FSDP2 path and DeepSpeed cannot run it)
    hybrid_shard: bool = False
    dp_shard: int | None = None    # HSDP's shard group, fixed (--dp-shard, then model.yaml); None: every dp rank
    # False: the DDP and ZeRO-1 candidates reduce their gradient buckets after the backward
    # (ParallelConfig.overlap_grad_reduce; Megatron-Core without --overlap-grad-reduce), ZeRO-2's on
    # the compute stream as their backward readies them (DeepSpeed's overlap_comm false); ZeRO-3's
    # reduce under the backward whatever this says (FSDP)
    overlap_grad_reduce: bool = True


def overlaps_grad_reduce(c: Constraints, zero: int) -> bool:
    """ParallelConfig.overlap_grad_reduce of a candidate at ZeRO stage ``zero`` under ``c``: ZeRO-3
    always overlaps (FSDP), DDP and ZeRO 1-2 as c says."""
    return c.overlap_grad_reduce or zero >= 3


def fixed_shard(c: Constraints, spec: ModelSpec) -> int:
    """The shard group the plans must take (--dp-shard, then model.yaml's parallel.dp_shard), 0 for none."""
    return c.dp_shard or spec.parallel.dp_shard or 0


# The cp the search tries unless told, a bound on the search (--cp prices any cp): up to 16, and
# only for sequences longer than 8,192 tokens.  Llama 3 405B trained at 8,192 tokens with cp=1 and
# at 131,072 with cp=16 (Dubey et al. 2024, "The Llama 3 Herd of Models", Table 4); up to 8,192
# tokens each cp value would multiply the search for plans data parallelism mostly covers
# (tests/test_published.py's GPT-3 175B plans at 2,048 tokens on 1,024 GPUs, searching cp up to 16,
# had not finished after 13 minutes, about 80 s without cp; Llama 3 405B at 8,192 tokens on
# 16,384 H100s, 113 s with cp searched against 5.4 s without, python benchmarks/bench_planner.py
# --goals, 2026-11-24).
CP_SEARCH_MAX = 16
CP_SEARCH_MIN_TOKENS = 16384
# The largest ep the search tries unless told (--ep prices any ep dividing dp x cp and the experts):
# powers of two up to 256, a bound on the search's size (each ep value is a family of its own: at
# most 9 values).  DeepSeek-V3 trained at ep = 64 over 8 nodes (DeepSeek-AI 2024, Sec. 3.2).
EP_SEARCH_MAX = 256


def divisors(n: int) -> list[int]:
    """The divisors of n, rising, in O(sqrt n) steps."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def check_usable(spec: ModelSpec, cluster: Cluster, c: Constraints) -> None:
    """Refuse at once a cluster larger than the model can use: dp divides the global batch into
    micro-batches the model can run, pp is at most the cut units and tp at most the largest
    fast-link group (or the tp given), so no plan has more ranks than their product; the search is
    never sized by the cluster alone."""
    batch, units, least = spec.training.global_batch_size, len(spec.graph), spec.graph.min_microbatch
    dp = batch // least
    tp = c.tp or spec.parallel.tp or tp_domain(cluster)
    cp = cp_values(spec, c)[-1]
    usable = dp * units * tp * cp
    if cluster.world_size > usable:
        raise InfeasibleError(f"--cluster {cluster.spec}: {cluster.world_size:,} devices, but {spec.path or spec.name} "
                              f"can use at most {usable:,}: dp at most {dp} (the global batch {batch}"
                              + (f" in micro-batches of at least {least}" if least > 1 else "")
                              + f") x pp at most its {units} cut units x tp at most {tp}"
                              + (f" x cp at most {cp}" if cp > 1 else "") + "; choose a cluster of at most "
                              f"{usable:,} devices or raise training.global_batch_size")


def schedules(pp: int, m: int, layers: int, c: Constraints) -> list[tuple[str, int]]:
    out = []
    for name in ("1f1b", "gpipe", "zbh1", "interleaved"):
        if c.schedule and name != c.schedule:
            continue
        if pp == 1 and name != "1f1b" and not c.schedule:
            continue                              # with one stage every schedule is the same
        chunks = (c.chunk_options if c.chunk_options is not None
                  else range(2, min(layers // pp, INTERLEAVE_SEARCH_MAX) + 1))
        for v in ((1,) if name != "interleaved" else chunks):
            if pp * v > layers:
                continue
            try:
                check_feasible(name, pp, m, v)
            except InfeasibleError:
                continue
            out.append((name, v))
    return out


# The deepest interleaving the search tries unless told (Constraints.chunk_options; simulate's
# --chunks prices any v the cut units allow): v from 2 to min(cut units / pp, 8).  Every v >= 2
# has the same split-free floor (floor.floor_s: m x a rank's work), so each depth adds its
# candidates' splits and lower bounds to the search: GPT-3 175B on 1,024 A100s split and bounded
# 3,324 candidates with v in {2, 4}, 7,348 with v up to 8 and 9,156 up to 12 (its 98 cut units
# allow 49 at pp = 2), simulating 20, 23 and 23, each with tp_comm_overlap searched too (the
# candidates parsim.search.bound.candidate was called for, counted by a wrapper, 2026-11-27;
# not timed: this session had no quiet machine, so bench_planner.py --goals is still to run).
# The picks: v = 3 (19.04 s a step against v = 2's 19.27 s) up to 8 and 12 alike.
INTERLEAVE_SEARCH_MAX = 8


def variants(spec: ModelSpec, cluster: Cluster, c: Constraints, build_searched: bool = True,
              memo=None) -> list[tuple[int, str, bool, int, LayerGraph | None]]:
    """(tp, layout, recompute, cp, per-device graph) for every tensor- and context-parallel
    setting to search; without ``build_searched`` the searched layout's graph is None (plan()
    searches it per micro-batch size), and it applies wherever the model has an operator view."""
    domain = tp_domain(cluster)
    hint = spec.parallel
    if c.tp:
        tps = [c.tp]
    elif hint.tp:
        tps = [hint.tp]
    else:
        tps = [t for t in divisors(domain) if cluster.world_size % t == 0]
    if spec.shard:
        layouts = ["model"]
    elif c.tp_layout or hint.tp_layout:
        layouts = [c.tp_layout or hint.tp_layout]
    else:
        layouts = list(LAYOUTS) + [SEARCHED]
    fixed = c.recompute if c.recompute is not None else spec.training.recompute
    # DeepSeek-V3's recomputation (norms, MLA up-projections, SwiGLUs) searched for mixtures of
    # experts; Megatron's MoE-block recomputation (moe: --recompute-modules layernorm moe) only where
    # asked for: searched, it adds a third to DeepSeek-V3's candidates on 2,048 H100s (514,416 to
    # 685,888) for the same pick (results/2026-12-04d-amd-epyc/moe-mode-search-cost.txt)
    recomputes = ([recompute_mode(fixed)] if fixed is not None else
                  [r for r in Recompute if r is not Recompute.MOE and (r is not Recompute.DEEPSEEK or spec.graph.moe)])
    fixed_etp = c.etp or hint.etp
    # searched, selective only where a layer has something to recompute selectively (eager
    # attention's s x s tensors; parsim.model.recompute): elsewhere it is none again
    selective_applies = fixed is not None or any(layer.recompute_bytes for layer in
                                                 spec.graph.with_recompute(Recompute.SELECTIVE).layers)
    cps = cp_values(spec, c)
    out = []
    for tp in tps:
        if cluster.world_size % tp or tp > domain:
            continue
        for layout in (layouts if tp > 1 else [""]):
            for rc in recomputes:
                for cp in cps:
                    if cluster.world_size % (tp * cp) or (rc is Recompute.SELECTIVE and not selective_applies) \
                            or (rc is Recompute.SELECTIVE and cp > 1 and fixed is None):
                        continue
                    if layout == SEARCHED and not build_searched:
                        if any(layer.ops for layer in spec.graph.layers) and not spec.graph.moe:
                            out.append((tp, layout, rc, cp, None))
                        continue
                    for etp in etp_values(spec, tp, fixed_etp):
                        try:
                            graph = per_device_graph(spec.graph, tp, layout, rc, spec.shard, cluster, spec.training,
                                                     cp=cp, etp=etp, memo=memo)
                        except InfeasibleError:
                            continue         # this layout does not apply to the model (or does not divide it)
                        out.append((tp, layout, rc, cp, graph))
    return out


def etp_values(spec: ModelSpec, tp: int, fixed: int | None) -> list[int]:
    """The expert tp values to search beside attention's tp: for a mixture of experts at tp > 1,
    the one fixed (--etp, then model.yaml) or both that parsim prices, 1 and tp (MoE Parallel
    Folding; the per-device graph records it, LayerGraph.etp); 1 otherwise."""
    if tp == 1 or not spec.graph.moe:
        return [1]
    return [fixed] if fixed else [1, tp]


def cp_values(spec: ModelSpec, c: Constraints) -> list[int]:
    """The cp values to search: the one fixed (--cp, then model.yaml), else 1, 2, 4, ... up to
    CP_SEARCH_MAX while 2 x cp divides a sequence of at least CP_SEARCH_MIN_TOKENS; 1 for a model
    without attention, with shorter sequences or with a sliding window."""
    fixed = c.cp or spec.parallel.cp
    if fixed:
        check_cp(spec.graph, fixed, f"--cp {fixed}")
        return [fixed]
    s = sequence_length(spec.graph)
    if not s or s < CP_SEARCH_MIN_TOKENS or attention_window(spec.graph):     # a sliding window: check_cp refuses cp > 1
        return [1]
    return cp_options(s, CP_SEARCH_MAX)


def ep_values(spec: ModelSpec, c: Constraints, dp: int, cp: int, tp: int, etp: int = 1) -> list[int]:
    """The ep values to search for the tp x cp x dp ranks a pipeline rank's MoE layers fold into
    etp x ep x edp (parsim.plan.ParallelConfig.fold): the one fixed (--ep, then model.yaml) where
    ep x etp divides them, else 1 and the powers of two up to EP_SEARCH_MAX dividing them over etp
    and every MoE layer's routed experts (parsim.cost.experts.check_ep); 1 alone for a dense
    model, so that its search is unchanged."""
    ranks = dp * cp * tp
    fixed = c.ep or spec.parallel.ep
    if fixed:
        return [fixed] if ranks % (fixed * etp) == 0 else []
    counts = {layer.experts.experts for layer in spec.graph.layers if layer.experts is not None}
    if not counts:
        return [1]
    out, ep = [1], 2
    while ep <= EP_SEARCH_MAX and ranks % (ep * etp) == 0 and all(e % ep == 0 for e in counts):
        out.append(ep)
        ep *= 2
    return out


def zero_variants(schedules, dp: int, pp: int, c: Constraints, spec: ModelSpec, cp: int = 1, ep: int = 1):
    """(schedule, chunks, placement, zero) for each schedule: the placements where both dp and pp
    exceed 1, and the ZeRO stages: the one fixed (--zero, then model.yaml), else 0-3 where dp x cp
    > 1, the ranks it shards over (3 only where pp = 1, and not under a split backward: parsim.sim.simulate
    refuses them; 2 beside a pipeline, torchtitan's FSDP under pp, only where it is the fixed stage: it runs
    ZeRO-1's collectives there, once a step, and holds more).  A fixed shard group (``fixed_shard``, HSDP)
    takes the ZeRO plans it applies to only (parsim.refusals.shard_refusal): zero 1-3, its size dividing dp,
    ep 1."""
    fixed = c.zero if c.zero is not None else spec.parallel.zero
    shards = dp * cp
    shard = fixed_shard(c, spec)
    if shard and shard_refusal(ParallelConfig(dp, pp, 1, cp=cp, ep=ep, zero=1, dp_shard=shard)):
        return                     # the group does not apply to this family at any ZeRO stage
    for schedule, v in schedules:
        for placement in (c.placements if dp > 1 and pp > 1 else c.placements[:1]):
            for zero in ((fixed,) if fixed is not None else (0, 1, 2, 3) if shards > 1 else (0,)):
                if (zero and shards == 1) or (zero >= 2 and pp > 1 and (zero == 3 or fixed is None)) \
                        or (zero == 3 and schedule == "zbh1") or (shard and not zero):
                    continue
                yield schedule, v, placement, zero


def families(spec: ModelSpec, cluster: Cluster, c: Constraints, variants, memo=None):
    """The search space, the one place it is enumerated: (tp, layout, recompute, cp, graph, dp,
    pp, m, b, ep) for every tensor- and context-parallel setting (``variants``), factorization of the
    rest of the devices into dp x pp, expert-parallel size (ep_values; the graph then its
    per-device one) and micro-batch count m of b samples; graph is None for the
    searched layout, whose graph depends on b and pp (plan() searches it when the family comes
    up).  Each family's candidates are its schedules, placements and ZeRO stages (zero_variants)."""
    batch, world, L = spec.training.global_batch_size, cluster.world_size, len(spec.graph)
    for tp, layout, recompute, cp, graph in variants:
        for pp in divisors(world // (tp * cp)):
            dp = world // (tp * cp) // pp
            if pp > L or batch % dp or (c.pp and pp != c.pp) or (c.dp and dp != c.dp):
                continue
            per_replica = batch // dp
            for ep in ep_values(spec, c, dp, cp, tp, graph.etp if graph is not None else 1):
                experts = graph if graph is None else expert_graph(graph, ep, spec.training, memo)
                for m in divisors(per_replica):
                    b = per_replica // m
                    if (c.microbatches and m != c.microbatches) or b < spec.graph.min_microbatch or \
                            (c.microbatch_sizes is not None and b not in c.microbatch_sizes):
                        continue
                    yield tp, layout, recompute, cp, experts, dp, pp, m, b, ep


def twin_key(cfg: ParallelConfig) -> tuple:
    """What a candidate shares with its twin that differs only in recomputation."""
    return (cfg.dp, cfg.pp, cfg.tp, cfg.tp_layout, cfg.microbatches, cfg.schedule, cfg.chunks, cfg.placement, cfg.zero,
            cfg.cp, cfg.tp_comm_overlap, cfg.cp_mode, cfg.ep, cfg.etp)


def tp_domain(cluster: Cluster) -> int:
    """The most devices a tensor-parallel group may span (Cluster.fast_span: a fast-link group,
    or a node or scale-up domain on links as fast)."""
    return cluster.fast_span()

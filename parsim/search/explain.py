"""What the planner says about its pick: the bottleneck, the memory margin, expert parallelism,
the runner-up and what it loses on, the plan on every device where the pick leaves some idle
(``explanation``), and, when nothing fits, the smallest plan and the knobs to try (``nothing_fits``)."""

from __future__ import annotations

from parsim.cost.kernels import kernel_counts
from parsim.model.graph import LayerGraph
from parsim.model.attention import attention_window, sequence_length
from parsim.plan import ParallelConfig, recompute_layers_text
from parsim.fmt import human_bytes, human_time
from parsim.search.bound import Candidate
from parsim.sim import Estimate


def short(c: ParallelConfig) -> str:
    """A configuration in a few words: dp=1 pp=8 tp=1 m=2 zbh1."""
    return (f"dp={c.dp} pp={c.pp} tp={c.tp}{f' {c.tp_layout}' if c.tp > 1 else ''}{f' cp={c.cp}' if c.cp > 1 else ''}"
            f"{f' ep={c.ep}' if c.ep > 1 else ''}{f' etp={c.etp}' if c.etp > 1 else ''}"
            f"{' recompute' if c.recompute else ''}"
            f"{f' ({part})' if (part := recompute_layers_text(c.recompute_layers, c.recompute_every)) else ''}"
            f"{f' zero={c.zero}' if c.zero else ''} m={c.microbatches} "
            f"{c.schedule}{f' v={c.chunks}' if c.chunks > 1 else ''}")


def busiest_rank(e: Estimate):
    return max(e.ranks, key=lambda r: r.busy_s + r.exposed_comm_s)


def kernels_per_step(graph: LayerGraph, cand: Candidate) -> int:
    """Kernels the busiest rank launches in one step: its stages' kernels (forward, backward, and
    the forward again where recomputed) once per micro-batch."""
    cfg = cand.config
    graph = graph.with_recompute(cfg.recompute, cfg.recomputed_layers(len(graph))) if not graph.recompute else graph
    layers = [graph.layers[i] for s in busiest_rank(cand.estimate).stages for i in cfg.stage_layers(s)]
    per_mb = sum(sum(kernel_counts(l).values()) + recomputed_kernels(l) for l in layers)
    return per_mb * cfg.microbatches


def recomputed_kernels(layer) -> int:
    """Kernels a recomputed layer's backward re-runs: its forward's (full) or its core attention's
    (selective)."""
    if layer.recompute_part is not None:
        return len(layer.recompute_part.kernels)
    return kernel_counts(layer)["F"] if layer.recompute_bytes else 0


def explanation(result_ranked: list[Candidate], graph: LayerGraph, memory_line: str, world: int = 0,
             all_devices: Candidate | None = None) -> tuple[str, ...]:
    """``memory_line``: the pick's peak against the cap (parsim.fmt.memory_margin);
    ``all_devices``: where the pick leaves devices idle, the best plan on all ``world``."""
    names = graph.names
    best = result_ranked[0]
    e = best.estimate
    lines = []
    used = best.config.world_size
    if world and used < world:
        line = (f"the pick uses {used} of the {world} devices ({short(best.config)}), the other {world - used} idle: "
                f"splitting the work further costs more than it saves here")
        if all_devices is None:
            line += f"; no plan on all {world} fits the constraints"
        else:
            a = all_devices.estimate
            row = next((str(i + 1) for i, x in enumerate(result_ranked) if x.key() == all_devices.key()), None)
            line += (f"; the best on all {world} ({short(all_devices.config)}, "
                     f"{f'row {row}' if row else f'row all {world}'}) takes {a.step_time_s * 1e3:.3g} ms, "
                     f"{a.step_time_s / e.step_time_s - 1:.1%} more than the pick's {e.step_time_s * 1e3:.3g} ms")
        lines.append(line)
    hot = busiest_rank(e)
    stages = ", ".join(best.config.describe_split(names).split(" | ")[s] for s in hot.stages)
    kernels = kernels_per_step(graph, best) if any(layer.kernels for layer in graph.layers) else 0
    lines.append(f"bottleneck: pipeline rank {hot.rank} ({stages}) is busy {hot.busy_s / e.step_time_s:.0%} of the "
                 f"step{f' running {kernels:,} kernels' if kernels else ''}; bubble {e.bubble_fraction:.1%}, "
                 f"waiting on other ranks {e.sync_wait_fraction:.1%}, "
                 f"exposed communication {e.exposed_comm_fraction:.1%}")
    lines.append("memory: " + memory_line)
    if best.config.ep > 1:
        lines.append(ep_line(best))
    elif graph.moe and no_ep_line(result_ranked):
        lines.append(no_ep_line(result_ranked))
    rival = next((c for c in result_ranked[1:] if c.config.dp != best.config.dp or c.config.pp != best.config.pp
                  or c.config.tp != best.config.tp or c.config.cp != best.config.cp or c.config.ep != best.config.ep
                  or c.config.schedule != best.config.schedule), None)
    if rival is not None:
        r = rival.estimate

        def per_rank(est, attr):
            return sum(getattr(x, attr) for x in est.ranks) / len(est.ranks)
        diffs = {"compute": per_rank(r, "busy_s") - per_rank(e, "busy_s"),
                 "bubble": per_rank(r, "bubble_s") - per_rank(e, "bubble_s"),
                 "waiting on other ranks": per_rank(r, "sync_wait_s") - per_rank(e, "sync_wait_s"),
                 "exposed communication": per_rank(r, "exposed_comm_s") - per_rank(e, "exposed_comm_s")}
        what, delta = max(diffs.items(), key=lambda kv: kv[1])
        c = rival.config
        rival_kernels = kernels_per_step(graph, rival) if kernels else 0
        lines.append(f"runner-up dp={c.dp} pp={c.pp} tp={c.tp}{f' cp={c.cp}' if c.cp > 1 else ''}"
                     f"{f' ep={c.ep}' if c.ep > 1 else ''}{f' etp={c.etp}' if c.etp > 1 else ''} m={c.microbatches} "
                     f"{c.schedule}"
                     f"{f' v={c.chunks}' if c.chunks > 1 else ''} ({c.placement}) is "
                     f"{r.step_time_s / e.step_time_s - 1:.1%} slower; it loses most on {what} "
                     f"(+{delta * 1e3:.3g} ms per rank)"
                     f"{f'; its busiest rank runs {rival_kernels:,} kernels' if rival_kernels else ''}")
    return tuple(lines)


def ep_line(cand: Candidate) -> str:
    """The pick's expert parallelism by what it costs: its all-to-alls and its bubble on the busiest
    rank, against the step."""
    e, c = cand.estimate, cand.config
    hot = busiest_rank(e)
    split = f", each split over etp={c.etp}" if c.etp > 1 else (f", whole beside tp={c.tp}" if c.tp > 1 else "")
    return (f"expert parallelism: ep={c.ep} (E/{c.ep} routed experts a rank{split}, expert_dp={c.expert_dp}); "
            f"on the busiest "
            f"rank the token all-to-alls take {human_time(hot.ep_comm_s)} ({hot.ep_comm_s / e.step_time_s:.1%} of the "
            f"step, exposed) and the bubble {human_time(hot.bubble_s)} ({hot.bubble_s / e.step_time_s:.1%})")


def no_ep_line(ranked: list[Candidate]) -> str | None:
    """A mixture of experts picked with ep = 1: the best ranked plan with ep > 1, by its all-to-alls
    and its bubble against the pick's."""
    best = ranked[0]
    row = next((i for i, x in enumerate(ranked) if x.config.ep > 1), None)
    if row is None:
        return None
    other, e = ranked[row], best.estimate
    hot, mine = busiest_rank(other.estimate), busiest_rank(e)
    return (f"expert parallelism: the pick keeps every expert on each rank (ep=1); the best with ep > 1 (row {row + 1}, "
            f"{short(other.config)}) is {other.estimate.step_time_s / e.step_time_s - 1:.1%} slower: its busiest "
            f"rank's all-to-alls take {human_time(hot.ep_comm_s)}, its bubble {human_time(hot.bubble_s)} against "
            f"the pick's {human_time(mine.bubble_s)}")


def nothing_fits(spec, cap, misses, over_memory, usable: str = "") -> str:
    need, where = float("inf"), None
    for cand in over_memory:
        if cand.peak_memory_bytes < need:
            need, where = cand.peak_memory_bytes, cand.config
    # the exact smallest split (bisection) only for the few that the balanced split ranks best
    promising = sorted(misses, key=lambda x: (x[0].balanced_memory(*x[1], x[2][3]), x[1], x[2]))[:3]
    for bnd, (schedule, m, pp, v, b, shards, links), (tp, layout, rc, zero, cp) in promising:
        bound = bnd.smallest_memory(schedule, m, pp, v, b, shards, links, zero)
        if bound < need:
            need, where = bound, ParallelConfig(shards // cp, pp, m, schedule, v, (), "pp-inner", tp, layout, rc, zero,
                                                cp)
    t = spec.training
    knobs = ["more pipeline stages (a larger cluster)", "more micro-batches"]
    if t.optimizer == "adam" or t.dtype == "fp32":
        knobs.append("mixed precision or a lighter optimizer")
    if where is None or not where.recompute:
        knobs.append("activation recomputation (--recompute selective or full)")
    if where is None or where.tp == 1:
        knobs.append("tensor parallelism (--tp with the zoo's GPT, or a model.yaml shard: section)")
    if (where is None or where.cp == 1) and sequence_length(spec.graph) and not attention_window(spec.graph):
        knobs.append("context parallelism (--cp)")
    if where is None:
        return f"no plan fits {human_bytes(cap)}{usable} per device; try {', '.join(knobs)}"
    return (f"no plan fits {human_bytes(cap)}{usable} per device: the smallest (dp={where.dp} pp={where.pp} tp={where.tp}"
            f"{f' ep={where.ep}' if where.ep > 1 else ''}"
            f"{f' recompute={where.recompute}' if where.recompute else ''} "
            f"m={where.microbatches} {where.schedule}) needs {human_bytes(need)}, {human_bytes(need - cap)} more; "
            f"try {', '.join(knobs)}")

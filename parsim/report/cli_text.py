"""What the ``parsim`` commands print: each function takes what a command computed and returns its
text as lines (or, for ``--json``, the object to dump); parsim.cli prints them."""

from __future__ import annotations

import math

from parsim.hardware.links import LINK_CLASSES
from parsim.fmt import human_bytes, human_si, human_time, memory_margin
from parsim.model.recompute import recompute_mode
from parsim.plan import grad_reduce_text, recompute_layers_text
from parsim.sim.band import band_text


def ops_lines(spec, frame) -> list[str]:
    """``parsim model --ops``: every operator (parsim.shard.graph.ops_frame)."""
    return [f"{spec.name}: operators at a batch of {spec.graph.extraction_batch} (ids for model.yaml's shard:; "
            "a Linear's inputs are X and W^T)",
            frame.to_string(index=False)]


def model_lines(spec) -> list[str]:
    """``parsim model``: the layer table and the totals."""
    g = spec.graph
    df = g.table()
    if spec.manual_stages:
        df.insert(1, "stage", spec.manual_stages)
    show = df.assign(
        params=df.param_count.map(lambda v: f"{v:,}"),
        fwd_flops=df.fwd_flops.map(lambda v: human_si(v, "FLOP")),
        bwd_flops=df.bwd_flops.map(lambda v: human_si(v, "FLOP")),
        output=df.output_bytes.map(human_bytes), saved=df.saved_bytes.map(human_bytes),
        mem_bound=(df.fwd_mem_bytes + df.bwd_mem_bytes).map(human_bytes))
    cols = ["name"] + (["stage"] if spec.manual_stages else []) + ["params", "fwd_flops", "bwd_flops", "output",
                                                                   "saved", "mem_bound"]
    if g.moe:
        show = show.assign(active=[f"{layer.active_param_count:,}" for layer in g.layers],
                           experts=[_experts_cell(layer.experts) for layer in g.layers])
        cols[cols.index("params") + 1:cols.index("params") + 1] = ["active", "experts"]
    t = g.totals()
    return [f"{spec.name}: {len(g)} cut units, dtype {g.dtype}, per sample "
            "(FLOPs = 2 x MACs; output = boundary activation; saved = kept for backward; "
            "mem_bound = bytes moved by memory-bound ops, fwd + bwd)",
            show[cols].to_string(index=False),
            f"total: {t['param_count']:,} parameters ({human_bytes(t['param_bytes'])}), "
            f"forward {human_si(t['fwd_flops_per_sample'], 'FLOP')} ({human_si(t['fwd_flops_per_sample'] / 2, 'MAC')}), "
            f"backward {human_si(t['bwd_flops_per_sample'], 'FLOP')}, "
            f"saved activations {human_bytes(t['saved_bytes_per_sample'])} per sample; "
            f"global batch {spec.training.global_batch_size}, optimizer {spec.training.optimizer}"] + \
        default_lines(spec) + moe_lines(spec)


def window_lines(graph) -> list[str]:
    """The sliding window fused attention is priced at, where a layer's is shorter than its sequence."""
    from parsim.model.attention import attention_of, window_share

    found = [a for a in (attention_of(layer, graph.extraction_batch) for layer in graph.layers) if a is not None]
    a = min((x for x in found if x.windowed), key=lambda x: x.window, default=None)
    return [] if a is None else [
        f"sliding window: {a.window} keys a query on {sum(x.windowed for x in found)} of {len(found)} "
        f"attention layers (the config's, as transformers applies it); their fused attention priced at "
        f"{window_share(a.seq_len, a.window):.1%} of causal attention's work over {a.seq_len} tokens"]


def default_lines(spec) -> list[str]:
    """The kernels a model is priced with where its model.yaml may leave them out: its attention
    (a transformer) and its memory format (a convolution network), each saying whether it is the
    default and the source of that default (parsim.model.zoo.gpt.GPTConfig.attention,
    parsim.model.spec.default_memory_format)."""
    from parsim.model.spec import default_memory_format

    lines, src = [], spec.source
    given = dict(src.args) if src is not None else {}
    if src is not None and src.kind == "builtin" and src.target == "gpt":
        kind = given.get("attention")
        lines.append(f"attention: {kind} (args.attention)" if kind else
                     "attention: sdpa, fused (FlashAttention) kernels: the default, as Megatron-Core (Transformer "
                     "Engine's fused attention), torchtitan and transformers train; args.attention: eager for "
                     "explicit QK^T, softmax and AV")
    elif src is not None and src.kind == "hf":
        lines.append(f"attention: {given.get('attn_implementation', 'sdpa')} (args.attn_implementation; default sdpa, "
                     "transformers' default)")
        lines += window_lines(spec.graph)
        fused = given.get("fused_ops")
        lines.append(f"fused kernels: {', '.join(fused)} (args.fused_ops; parsim.model.fused_ops)" if fused else
                     "fused kernels: none: RMSNorm, rope and SwiGLU as transformers writes them, step by step, as "
                     "parsim's executor runs them (the default); args.fused_ops: true prices them as the fused "
                     "kernels Megatron-Core and MindSpeed run")
    if any(k.klass == "conv" for layer in spec.graph.layers for k in layer.kernels):
        fmt, dtype = spec.training.memory_format, spec.training.dtype
        default = fmt == default_memory_format(dtype)
        lines.append(f"memory format: {fmt} (training.memory_format" +
                     (f"; the default under {dtype}: " + ("NVIDIA's mixed-precision recipe runs convolutions NHWC on "
                                                          "tensor cores" if fmt == "channels_last" else "torch's NCHW")
                      if default else "") + ")")
    return lines


def _experts_cell(ex) -> str:
    """A MoE layer's experts in the layer table: routed x top-k (+ shared), '-' when dense."""
    if ex is None:
        return "-"
    shared = f" +shared {ex.shared_intermediate}" if ex.shared_intermediate else ""
    return f"{ex.experts}x{ex.intermediate} top-{ex.top_k}{shared}"


def moe_lines(spec) -> list[str]:
    """``parsim model`` of a mixture of experts: total and active parameters, the layers' expert
    GEMMs at one sample, and a multi-token-prediction module the main model leaves out."""
    import json

    from parsim.model.moe import mtp_param_count

    g = spec.graph
    if not g.moe:
        return []
    inside = g.mtp_in_head
    moe_layers = [layer for layer in g.layers[:-1 if inside else None] if layer.experts is not None]
    ex = moe_layers[0].experts
    seq = spec.input.shape[0] if spec.input is not None else 0
    block = " and the head's multi-token-prediction block" if inside else ""
    lines = [f"mixture of experts: {len(moe_layers)} of {len(g) - 2} decoder layers{block}; "
             f"{g.param_count:,} parameters, {g.active_param_count:,} active per token "
             f"({g.active_param_count / g.param_count:.1%})"]
    if seq:
        (m, n, k, e), (_, n2, k2, _) = ex.routed_gemms(seq)
        shared = "".join(f", shared ({a:g} x {b:g} x {c:g})" for a, b, c, _ in ex.shared_gemms(seq))
        lines.append(f"  per MoE layer and sequence of {seq} tokens (balanced routing): router "
                     f"({seq} x {ex.experts} x {ex.hidden}), routed experts grouped GEMMs {e} x ({m:g} x {n} x {k}) "
                     f"and {e} x ({m:g} x {n2} x {k2}) (M x N x K){shared}")
    if spec.source.kind == "hf":
        mtp = mtp_param_count(json.loads(spec.source.target))
        if mtp["depths"]:
            where = ("in the model above, in the head, trained as DeepSeek-V3 was; args: {mtp_layers: 0} leaves it out"
                     if inside else "not in the model above (args: mtp_layers: 0)")
            total = g.param_count + (mtp["checkpoint"] - mtp["own"] if inside else mtp["checkpoint"])
            lines.append(f"  multi-token prediction ({mtp['depths']} module, {where}; DeepSeek-V3 "
                         f"Sec. 2.2): {mtp['own']:,} parameters of its own, {mtp['checkpoint']:,} with the "
                         f"embedding and head copies its checkpoint stores; {total:,} in the checkpoint")
    return lines


def cluster_lines(d: dict) -> list[str]:
    """``parsim cluster``: a cluster's ``describe()``."""
    dev = d["device"]
    peaks = ", ".join(f"{k} {human_si(v, 'FLOP/s')}" for k, v in dev["peak_flops_per_s"].items())
    res = dev["memory_reserved"]
    lines = [f"{d['cluster']}: {d['description']}",
             f"  {d['nodes']} node(s) x {d['devices_per_node']} devices = {d['world_size']} ranks; "
             f"collectives: {d['collective_library']}" + (" (rings' and trees' latency: NCCL's tuning model)"
                                                          if d.get("collective_latency_model") == "nccl" else ""),
             f"  device {dev['name']}: {human_bytes(dev['memory_bytes'])} at "
             f"{human_si(dev['memory_bandwidth_bytes_per_s'], 'B/s')}; peak {peaks}",
             f"  usable memory {human_bytes(dev['usable_memory_bytes'])}: less "
             f"{human_bytes(res['runtime_context_bytes'])} runtime context and "
             f"{human_bytes(res['collective_buffers_bytes'])} collective buffers, then "
             f"{res['fragmentation_fraction']:.0%} fragmentation",
             f"  groups per node: {d['groups_per_node']}; NICs per node: {d['nics_per_node']}"]
    for cls, link in d["links"].items():
        lines.append(f"  link {cls:8s} {human_si(link['bandwidth_bytes_per_s'], 'B/s'):>12s} per direction, "
                     f"latency {human_time(link['latency_s'])}")
    f = d["fabric"]
    if f["rail_optimized"] or f["pod_nodes"]:
        lines.append("  network tiers: " + "; ".join(
            ([f"rail-optimised ({d['nics_per_node']} rails; another rail via NVLink first, NCCL's PXN)"]
             if f["rail_optimized"] else [])
            + ([f"pods of {f['pod_nodes']} nodes, spine oversubscribed {f['oversubscription']:g}:1 "
                f"(+{human_time(f['spine_latency_s'])})"] if f["pod_nodes"] else [])))
    if f.get("domain_nodes"):
        lines.append(f"  scale-up domain: {f['domain_nodes']} nodes ({f['domain_nodes'] * d['devices_per_node']} devices) "
                     f"on the domain link; beyond it, the NICs")
    if d["group_topology"] != "switch":
        lines.append(f"  groups wired {d['group_topology']}: group link is one peer link; collectives use all at once")
    if d["rank_devices"]:
        lines.append("  rank -> (server, device_id): "
                     + ", ".join(f"{r}->{tuple(x)}" for r, x in enumerate(d["rank_devices"])))
    return lines


def coverage_lines(models) -> list[str]:
    """One line per (name, compute model) that is a profile: which micro-batch sizes it priced how."""
    return [f"{name}: {model.coverage().describe()}" for name, model in models if hasattr(model, "coverage")]


def interval_text(iv, fmt) -> str:
    """`` [90%: 71.2 ms .. 93.0 ms]`` for an Interval, '' for None."""
    return "" if iv is None else f" [{iv.level:.0%}: {fmt(iv.low)} .. {fmt(iv.high)}]"


def simulate_lines(spec, cluster, est, grid: bool = False) -> list[str]:
    """``parsim simulate``: the configuration, the step, per-rank times and memory."""
    from parsim.report.timeline import timeline_grid

    c, sync = est.config, est.config.get("no_sync", False)
    lines = [f"{spec.name} on {cluster.spec} ({precision(spec.training)}): dp={c['dp']} pp={c['pp']}"
             + (f" tp={c['tp']} ({c['tp_layout']})" if c["tp"] > 1 else "")
             + (" tp-comm-overlap" if c.get("tp_comm_overlap") else "")
             + (f" cp={c['cp']}" if c["cp"] > 1 else "")
             + (f" ({c['cp_mode']})" if c["cp"] > 1 and c.get("cp_mode", "ring") != "ring" else "")
             + (f" ep={c['ep']}" if c.get("ep", 1) > 1 else "") + (f" etp={c['etp']}" if c.get("etp", 1) > 1 else "")
             + (" ep-overlap" if c.get("ep_overlap") else "")
             + (f" recompute={c['recompute']}" if c["recompute"] != "none" else "")
             + (f" ({part})" if (part := recompute_layers_text(c.get("recompute_layers", ()),
                                                               c.get("recompute_every", 0))) else "")
             + (f" zero={c['zero']}" if c["zero"] else "")
             + (f" dp_shard={c['dp_shard']}" if c.get("dp_shard") else "")
             + (f" {grads}" if (grads := grad_reduce_text(c.get("overlap_grad_reduce", True), c["zero"], sync)) else "")
             + f" microbatches={c['microbatches']} "
             f"(size {c['microbatch_size']}) schedule={c['schedule']}"
             + (f" chunks={c['chunks']}" if c["chunks"] > 1 else "") + f" placement={c['placement']}",
             f"split: {c['split']}",
             f"step {human_time(est.step_time_s)}{interval_text(est.step_time_band, human_time)}, "
             f"{est.throughput_samples_per_s:,.1f} samples/s, "
             f"bubble {est.bubble_fraction:.1%}, waiting on other ranks {est.sync_wait_fraction:.1%}, "
             f"exposed communication {est.exposed_comm_fraction:.1%}",
             "step-time band: " + band_text(est.step_time_band, cluster.device.name)]
    if est.peak_memory_band is not None:
        lines.append("peak-memory band: " + band_text(est.peak_memory_band, unit="bytes"))
    if est.input is not None:
        i = est.input
        how = (f"inline, {human_time(i['microbatch_s'])} per micro-batch on stage 0's rank" if not i["overlap"] else
               f"loader workers, {human_time(i['microbatch_s'])} of the node's loader per micro-batch "
               f"({i['readers_on_node']} input rank(s) share it)")
        lines.append(f"input: {how}; {human_time(est.ranks[0].input_s)} of the step on rank 0"
                     + ("; the loader, not compute, sets the step" if est.input_bound else ""))
    lines.append(f"{'rank':>4} {'stages':>8} {'busy':>10} {'bubble':>10} {'sync wait':>10} {'exp.comm':>10} "
                 f"{'in flight':>9} {'activations':>12} {'peak memory':>12} {'headroom':>10}")
    cap = cluster.device.usable_memory_bytes
    for r in est.ranks:
        lines.append(f"{r.rank:>4} {','.join(map(str, r.stages)):>8} {human_time(r.busy_s):>10} "
                     f"{human_time(r.bubble_s):>10} {human_time(r.sync_wait_s):>10} {human_time(r.exposed_comm_s):>10} "
                     f"{r.max_inflight_microbatches:>9} {human_bytes(r.memory.activations_bytes):>12} "
                     f"{human_bytes(r.peak_memory_bytes):>12} {human_bytes(cap - r.peak_memory_bytes):>10}")
    lines.append("memory: " + memory_margin(max(est.peak_memory_bytes), cluster.device))
    if est.ep_a2a_bytes:
        lines.append(ep_line(est))
    lines.append(comm_bytes_line(est))
    if grid:
        lines.append(timeline_grid(est))
    return lines


def ep_line(est) -> str:
    """Expert parallelism's all-to-alls: their exposed time on each pipeline rank and the bytes its
    all-to-alls scatter per step (Estimate.ep_a2a_bytes, what the executor counts)."""
    per_rank = [(r.ep_comm_s, sum(est.ep_a2a_bytes[s] for s in r.stages)) for r in est.ranks]
    worst = max(range(len(per_rank)), key=lambda r: per_rank[r][0])
    if not per_rank[worst][0]:          # an expert-parallel profile: timed inside the MoE layers
        return (f"expert parallelism ep={est.config['ep']}: token all-to-alls inside the profiled MoE layers' times "
                f"(parsim profile --ep), scattering {human_bytes(max(b for _, b in per_rank))} per step")
    return (f"expert parallelism ep={est.config['ep']}: token all-to-alls (exposed) "
            f"{human_time(per_rank[worst][0])} of the step on rank {worst} "
            f"({per_rank[worst][0] / est.step_time_s:.1%}), scattering {human_bytes(per_rank[worst][1])} per step")


def comm_bytes_line(est, what: str = "bytes moved per step") -> str:
    """The bytes an estimate moves per step over each link class, nearest first (a spine shows here)."""
    return f"{what}: " + ", ".join(f"{k} {human_bytes(est.comm_bytes[k])}" for k in
                                    sorted(est.comm_bytes, key=LINK_CLASSES.index))


def config_text(c) -> str:
    """A plan's parallel configuration in one line, as the reports write it: 'dp=16 pp=1 tp=2
    megatron zero=2 m=32 1f1b pp-inner' (tp's comm overlap, cp and its mode, recompute and ZeRO
    only where used; interleaved and zbh1's chunks as 'v=2').  ``c``: a ParallelConfig, or an
    Estimate's config (a dict of the same names; older ones lack the overlap and cp mode)."""
    def get(name, default=None):
        return c.get(name, default) if isinstance(c, dict) else getattr(c, name)
    recompute = recompute_mode(get("recompute"))
    return " ".join([f"dp={get('dp')}", f"pp={get('pp')}",
                     f"tp={get('tp')}" + (f" {get('tp_layout')}" if get("tp") > 1 else "")
                     + (" overlap" if get("tp_comm_overlap", False) else ""),
                     *([f"cp={get('cp')}" + (f" {get('cp_mode')}" if get("cp_mode", "ring") != "ring" else "")]
                       if get("cp") > 1 else []),
                     *([f"ep={get('ep', 1)}" + (" overlap" if get("ep_overlap", False) else "")]
                       if get("ep", 1) > 1 else []),
                     *([f"etp={get('etp', 1)}"] if get("etp", 1) > 1 else []),
                     *([f"recompute={recompute}"] if recompute else []),
                     *([f"({part})"] if (part := recompute_layers_text(get("recompute_layers", ()),
                                                                       get("recompute_every", 0))) else []),
                     *([f"zero={get('zero')}"] if get("zero") else []),
                     *([f"dp_shard={get('dp_shard')}"] if get("dp_shard", 0) else []), f"m={get('microbatches')}",
                     get("schedule") + (f" v={get('chunks')}" if get("chunks") > 1 else ""), get("placement")])


def band_cell(band) -> str:
    """A step-time band as a table cell: [low, high], or "-" where none is drawn."""
    if band is None:
        return "-"
    low, high = human_time(band.low), human_time(band.high)
    low_number, _, low_unit = low.partition(" ")
    return f"{low_number}-{high}" if high.endswith(" " + low_unit) else f"{low}-{high}"   # 3.16-7.49 ms


def candidate_row(cand, cap_bytes: float, world: int = 0, moe: bool = False) -> dict:
    """A planner candidate as a row of the ranked table (strings as shown); ``devices``: the
    devices the plan uses of the cluster's ``world`` (fewer where the rest idle); ``moe``: with
    the expert-parallel size and the busiest rank's exposed all-to-all time."""
    c, e = cand.config, cand.estimate
    ep = {}
    if moe:
        hot = max(e.ranks, key=lambda r: r.busy_s + r.exposed_comm_s)
        ep = {"ep": c.ep if c.etp == 1 else f"{c.ep} etp={c.etp}",
              "a2a": human_time(hot.ep_comm_s) if c.ep > 1 else "-"}
    return {"": cand.label, "dp": c.dp, "pp": c.pp,
            "tp": c.tp if c.tp == 1 else f"{c.tp} {c.tp_layout}" + (" overlap" if c.tp_comm_overlap else ""),
            "cp": c.cp if c.cp == 1 or c.cp_mode == "ring" else f"{c.cp} {c.cp_mode}", **ep,
            "devices": f"{c.world_size}/{world or c.world_size}",
            "recompute": c.recompute.value + (f" ({','.join(map(str, c.recompute_layers))}/stage)"
                                              if c.recompute_layers else f" (1 in {c.recompute_every})"
                                              if c.recompute_every else ""),
            "zero": f"{c.zero} (shard {c.dp_shard})" if c.dp_shard else c.zero, "m": c.microbatches,
            "schedule": c.schedule + (f" v={c.chunks}" if c.chunks > 1 else ""), "placement": c.placement,
            "step": human_time(e.step_time_s), "90% band": band_cell(e.step_time_band),
            **({"P(best)": f"{cand.p_best:.0%}"} if getattr(cand, "p_best", None) is not None else {}),
            "samples/s": f"{e.throughput_samples_per_s:,.1f}",
            "bubble": f"{e.bubble_fraction:.1%}", "sync wait": f"{e.sync_wait_fraction:.1%}",
            "exp.comm": f"{e.exposed_comm_fraction:.1%}",
            "peak mem": human_bytes(cand.peak_memory_bytes), "headroom": human_bytes(cap_bytes - cand.peak_memory_bytes)}


def candidate_json(cand) -> dict:
    c = cand.config
    return {"label": cand.label, "dp": c.dp, "pp": c.pp, "tp": c.tp, "tp_layout": c.tp_layout, "cp": c.cp, "ep": c.ep,
            "ep_overlap": c.ep_overlap, "etp": c.etp,
            "devices": c.world_size,
            "recompute": c.recompute.value, **({"recompute_layers": list(c.recompute_layers)} if c.recompute_layers
                                               else {}),
            **({"recompute_every": c.recompute_every} if c.recompute_every else {}),
            "zero": c.zero, **({"dp_shard": c.dp_shard} if c.dp_shard else {}),
            "microbatches": c.microbatches, "tp_comm_overlap": c.tp_comm_overlap, "cp_mode": c.cp_mode,
            "schedule": c.schedule, "chunks": c.chunks, "placement": c.placement, "bounds": list(c.bounds),
            "estimate": cand.estimate.to_json()}


def plan_result_json(result, plan: dict, strategies: list[dict], models) -> dict:
    """``parsim plan --json``: the search, the chosen plan (its plan.json), every ranked candidate.
    ``models``: (name, compute model) of the profiles used."""
    return {"search_time_s": result.search_time_s, "considered": result.considered,
            "simulated": result.simulated, "plan": plan,
            "capacity_bytes": result.capacity_bytes, "margin_bytes": result.margin_bytes,
            "strategies": strategies,
            "candidates": [candidate_json(c) for c in result.ranked],
            "pareto": [candidate_json(c) for c in result.pareto],
            "manual": candidate_json(result.manual) if result.manual else None,
            "world_size": result.world_size,
            "all_devices": candidate_json(result.all_devices) if result.all_devices else None,
            "explanation": list(result.explanation),
            "profile_coverage": {p: m.coverage().describe() for p, m in models if hasattr(m, "coverage")}}


def precision(training) -> str:
    """The training's precision as shown: its dtype, with FP8 GEMMs where asked (parsim.model.fp8)."""
    return f"{training.dtype} + fp8 GEMMs" if getattr(training, "fp8", False) else training.dtype


def plan_header(spec, cluster, result) -> str:
    """The first line of ``parsim plan``: the model, the cluster and the search."""
    return (f"{spec.name} on {cluster.spec} ({cluster.world_size} devices, global batch "
            f"{spec.training.global_batch_size}, {precision(spec.training)}): searched {result.considered} candidates, simulated "
            f"{result.simulated} in {result.search_time_s:.2f} s")


def shown_candidates(result) -> list:
    """The ranked table's candidates, row by row: the ranked ones; where the pick leaves devices
    idle, the best plan on all of them unless ranked already; then the model.yaml split's."""
    extra = result.all_devices
    if extra is not None and any(c.key() == extra.key() for c in result.ranked):
        extra = None
    return list(result.ranked) + ([extra] if extra else []) + ([result.manual] if result.manual else [])


def plan_rows(result, moe: bool = False) -> list[dict]:
    """The ranked table's rows (shown_candidates): the pick (*), the rest by rank, the best on all
    devices ("all N") where the pick uses fewer, then the model.yaml split's (manual); ``moe``
    (a mixture of experts): with ep and the all-to-all time."""
    rows = [candidate_row(c, result.capacity_bytes, result.world_size, moe) for c in shown_candidates(result)]
    columns = [k for row in rows for k in row]
    rows = [{k: row.get(k, "") for k in dict.fromkeys(columns)} for row in rows]     # the top rows' columns on all
    for i, row in enumerate(rows[:len(result.ranked)]):
        row[""] = "*" if i == 0 else str(i + 1)
    if result.all_devices is not None and len(rows) > len(result.ranked) + bool(result.manual):
        rows[len(result.ranked)][""] = f"all {result.world_size}"
    return rows


def pareto_entry(cand, world: int = 0) -> str:
    """A Pareto candidate: its whole configuration, the devices it uses where fewer than the
    cluster's ``world``, throughput and peak memory."""
    used = cand.config.world_size
    return (f"{config_text(cand.config)}{f' ({used}/{world} devices)' if world and used < world else ''} "
            f"{cand.estimate.throughput_samples_per_s:,.0f}/s {human_bytes(cand.peak_memory_bytes)}")


def plan_lines(spec, cluster, result, strategies: list[dict]) -> list[str]:
    """``parsim plan``: the ranked table, the splits, the explanation, the pick's operator
    strategies (``strategies``: op, strategy, layers) and the Pareto front."""
    import pandas as pd

    rows = plan_rows(result, spec.graph.moe)
    lines = [plan_header(spec, cluster, result)]
    with pd.option_context("display.width", 250):
        lines.append(pd.DataFrame(rows).to_string(index=False))
    lines.append("splits:")
    for row, cand in zip(rows, shown_candidates(result)):
        lines.append(f"  {row['']:>6}: {cand.config.describe_split(spec.graph.names)}")
    lines.append("the pick's step-time band: " + band_text(result.chosen.estimate.step_time_band, cluster.device.name))
    lines.extend(result.explanation)
    if result.chosen.estimate.comm_bytes:
        lines.append(comm_bytes_line(result.chosen.estimate, "the pick's bytes moved per step"))
    c = result.chosen.config
    if c.tp > 1:
        lines.append(f"operator strategies of the pick (tp={c.tp}, {c.tp_layout}) that differ from data parallelism:")
        if not strategies:
            lines.append("  none: every operator is replicated over the group")
        for row in strategies[:12]:
            lines.append(f"  {row['op']:>28}  {row['strategy']}  in {row['layers']} layer(s)")
        if len(strategies) > 12:
            lines.append(f"  ... {len(strategies) - 12} more (--json lists all)")
    if len(result.pareto) > 1:
        lines.append("pareto (throughput vs peak memory): " + "; ".join(pareto_entry(c, result.world_size)
                                                                         for c in result.pareto))
    return lines


def run_summary_lines(out: dict, folder: str) -> list[str]:
    """``parsim run``'s last lines: the measured step and peak memory against the plan's
    prediction (measured.json's ``predicted``, parsim.exec.train.predicted_against_measured)."""
    p = out["predicted"]
    timed = [t for t in out["step_times_s"][out["warmup"]:] if t == t]
    if p["measured_step_time_s"] is None:
        step = (f"step time: not measured: all {out['steps']} step(s) were warm-up (--warmup {out['warmup']}); "
                f"run with --steps {out['warmup'] + 1} or more")
    else:
        step = (f"step time: measured {human_time(p['measured_step_time_s'])} (median of {len(timed)} step(s) after "
                f"{out['warmup']} warm-up)")
        if p["step_time_s"] is not None:
            step += f", predicted {human_time(p['step_time_s'])}, error {p['step_time_error']:+.1%}"
    mem = ("peak memory: not measured" if p["measured_peak_memory_bytes"] is None else
           f"peak memory (fullest rank): measured {human_bytes(p['measured_peak_memory_bytes'])}")
    if p["peak_memory_bytes"] is not None and p["peak_memory_error"] is not None:
        mem += f", predicted {human_bytes(p['peak_memory_bytes'])}, error {p['peak_memory_error']:+.1%}"
    lines = [f"summary ({out['world_size']} ranks, {out['backend']} on {out['device']}): {step}; {mem}"]
    if not p["same_cluster"]:
        lines.append(f"note: the prediction is for {p['cluster']}, not this machine (run under --force); plan for "
                     "this machine to compare")
    ranks = out.get("ep_all_to_all") or []
    if ranks and all(ranks):
        rows = [r["expert_rows"] for r in ranks]
        lines.append(f"expert parallelism (ep={out['config'].get('ep')}): per rank on the last step "
                     f"{ranks[0]['all_to_alls']} token all-to-alls, input buffers "
                     + " / ".join(human_bytes(r["input_bytes"]) for r in ranks)
                     + f" (own token rows {' / '.join(human_bytes(r['own_rows_bytes']) for r in ranks)}, the rest the "
                     f"rows each rank's experts received); expert rows per rank {' / '.join(map(str, rows))}, "
                     f"busiest over mean {max(rows) / (sum(rows) / len(rows)):.2f}")
    lines.append(f"wrote {folder}/measured.json and measured_trace.json")
    return lines


def profile_lines(spec, table: dict, sizes, nproc: int, out: str) -> list[str]:
    """``parsim profile``: per layer, forward and backward times per size and their intervals' widths,
    then how the rounds went (parsim.profile.rounds) and what disturbed them."""
    machine = table.get("machine", {})
    rounds = table.get("rounds")
    how = (f"median of {rounds['count']} interleaved rounds" if rounds else "median of the repeats")
    lines = [f"{spec.name}: {len(table['layers'])} layers x micro-batch sizes {sizes} on {table['device']}, "
             f"{nproc} concurrent process(es) x {table['threads']} thread(s); {how} -> {out}",
             f"machine: {machine.get('cpu_model')}, {machine.get('cores')} cores, torch {machine.get('torch')}; "
             f"spread = width of the 90% interval of the median / median; proc = (max-min)/mean of the processes' F+B"]
    for row in table["layers"]:
        flags = ([f"noisy at {','.join(map(str, row['noisy']))}"] if row.get("noisy") else []) + \
                ([f"falls {' '.join(f'{a}->{b}' for a, b in row['nonmonotone_confirmed'])} (confirmed)"]
                 if row.get("nonmonotone_confirmed") else [])
        lines.append(f"  {row['name']:>10}  fwd " + " ".join(f"{t * 1e3:7.2f}" for t in row["fwd_s"]) +
                     "  ms | bwd " + " ".join(f"{t * 1e3:7.2f}" for t in row["bwd_s"]) + " ms | spread " +
                     " ".join(f"{max(f, b):.0%}" for f, b in zip(row["fwd_spread"], row["bwd_spread"])) + " | proc " +
                     " ".join(f"{p:.0%}" for p in row["proc_spread"]) + ("  " + "; ".join(flags) if flags else ""))
    if rounds:
        why = {"precise": f"every size's chain within {rounds['target']:.0%}",
               "budget": "the --budget ran out", "rounds": "--max-rounds reached"}[rounds["stopped"]]
        dropped = sum(not k for row in rounds["kept"] for k in row)
        lines.append(f"rounds: {rounds['count']}, stopped: {why}; chain known within "
                     + ", ".join(f"{p:.1%}" for p in rounds["precision"]) + f" (90%) at sizes {sizes}; "
                     f"{dropped} of {rounds['count'] * len(sizes)} measurements left out as disturbed (canary, host)")
        for line in rounds.get("disturbed", []):
            lines.append(f"DISTURBED: {line}: profile again on a quiet machine (--strict refuses such a profile)")
    if table.get("grad_sync"):
        lines.append(grad_sync_line(table["grad_sync"]))
    if table.get("fsdp_sync"):
        f = table["fsdp_sync"]
        lines.append(f"diagnostic, not a price: ZeRO-2's reduce-scatters under the backward (dp={f['dp']}, micro-batch {f['microbatch_size']}, "
                     f"{len(f['reduce_scatter_bytes'])} units, {sum(f['reduce_scatter_bytes']) / 2**20:.1f} MiB): "
                     f"add {f['added_s'] * 1e3:.1f} ms to a {f['backward_s'] * 1e3:.1f} ms backward "
                     f"(repeats {f['added_min_s'] * 1e3:.1f} to {f['added_max_s'] * 1e3:.1f} ms)")
    return lines


def grad_sync_line(sync: dict) -> str:
    """A layer profile's ``grad_sync`` (parsim.profile.grad_sync), in one line."""
    return (f"diagnostic, not a price: gradient all-reduce under the backward (dp={sync['dp']}, micro-batch {sync['microbatch_size']}, "
            f"{len(sync['bucket_bytes'])} buckets, {sum(sync['bucket_bytes']) / 2**20:.1f} MiB): alone "
            f"{sync['all_reduce_s'] * 1e3:.1f} ms, adds {(sync['both_s'] - sync['backward_s']) * 1e3:.1f} ms "
            f"to a {sync['backward_s'] * 1e3:.1f} ms backward: {sync['cost']:.2f}x its time alone "
            f"(repeats {sync['cost_min']:.2f}-{sync['cost_max']:.2f}x)")


def profile_data_line(timing, repeats: int, output: str) -> str:
    """``parsim profile-data``: the loader's time per sample."""
    return (f"loader: {timing.median_s * 1e6:.1f} us per sample ({timing.samples_per_s:,.0f} samples/s, one thread), "
            f"spread {timing.spread:.1%} over {repeats} repeats; wrote input_pipeline to {output}")


def _ci(ci) -> str:
    return "" if not ci or not all(map(math.isfinite, ci)) else f" [{ci[0]:.1%}, {ci[1]:.1%}]"


def validate_lines(table, out: dict, out_dir: str) -> list[str]:
    """``parsim validate``: the per-plan table and the summary metrics (parsim.report.validation)."""
    import pandas as pd

    with pd.option_context("display.width", 250):
        lines = [table.to_string(index=False)]
    lines.append(
        f"step time: MAPE {out['mape_step_time']:.1%}{_ci(out.get('mape_step_time_ci'))}, "
        f"max error {out['max_error_step_time']:.1%}; peak memory: "
        f"MAPE {out['mape_peak_memory']:.1%}; Spearman (throughput) {out['spearman_throughput']:.2f}; planner's pick "
        + (f"(the same plan as {', '.join(out['pick_same_as'])}: their runs pooled into one median, the plan "
           "counted once) " if out['pick_same_as'] else "")
        + f"{'is' if out['pick_is_best'] else 'is not'} the measured best (gap {out['pick_gap_to_best']:.1%}"
        + (f", its stated noise +{out['pick_stated_noise']:.1%}"
           if math.isfinite(out.get("pick_stated_noise", math.nan)) else "")
        + f", best: {out['measured_best']}); median run-to-run spread {out['median_run_to_run_spread']:.1%}"
        + (f", of the predictions over the passes' own profiles {out['median_profile_spread']:.1%}"
           if any(p != out["measured_per_pass"][0] for p in out.get("measured_per_pass", ())) else ""))
    if out.get("step_interval_runs"):
        lines.append(f"intervals ({out['interval_level']:.0%}, each pass's profile x the development residuals x the "
                     f"host's noise over the profile): {out['step_interval_coverage']:.0%} of "
                     f"{out['step_interval_runs']} runs inside their step interval; peak memory inside "
                     f"{out['memory_interval_coverage']:.0%} of the plans; profile repeatability: passes' predictions "
                     f"of a plan differ by {out['profile_repeatability']:.1%} (median)")
    lines += [out["pipeline_rank_memory"]] if out.get("pipeline_rank_memory") else []
    if out.get("runs_watched"):
        bad = out.get("disturbed_runs", [])
        lines.append(f"host: {len(bad)} of {out['runs_watched']} runs disturbed (other processes' CPU or hypervisor "
                     "steal over a quarter of a core during the run)" + (": " + "; ".join(bad) if bad else ""))
    lines.append(f"calibrated analytical model, each size fitted without it (leave-one-size-out): step-time MAPE "
                 f"{out['mape_step_time_analytical']:.1%}{_ci(out.get('mape_step_time_analytical_ci'))}, "
                 f"max error {out['max_error_step_time_analytical']:.1%}")
    if out.get("error_bars"):
        b = out["error_bars"]
        lines.append(f"[lo, hi]: {b['level']:.0%} bootstrap intervals ({b['n_boot']} replicates, seed {b['seed']}) "
                     "over the runs (passes) and their steps; 'beyond noise': the interval excludes 0")
    lines.append(f"wrote {out_dir}/validation.json, validation.csv, scatter.png, overlay_*.png")
    return lines


def calibrate_lines(profile_name: str, profile_path: str, report: dict) -> list[str]:
    """``parsim calibrate``: the fitted efficiencies and the fit's errors, in and out of sample."""
    lines = [f"calibrated {profile_name} to {profile_path}: {report['points']} layer timings, "
             f"{report['model']} model"]
    if report["model"] == "kernel-level":
        lines.append(f"  large-GEMM efficiency {report['gemm_efficiency']:.3f}, k_half {report['k_half']:.3g}, "
                     f"launch {report['launch_s'] * 1e6:.3g} us per kernel")
    else:
        lines.append("  efficiency (work FLOPs -> fraction of peak): "
                     + ", ".join(f"{w:.3g}: {e:.3f}" for w, e in report["efficiency"]))
    lines.append(f"  memory efficiency {report['memory_efficiency']:.3f}")
    lines.append(f"  fit error per layer: MAPE {report['layer_mape']:.1%}, max {report['layer_max_error']:.1%}; "
                 f"per whole forward+backward: MAPE {report['step_mape']:.1%}")
    for row in report["per_step"]:
        lines.append(f"    micro-batch {row['microbatch']:>3}: measured {row['measured_s'] * 1e3:8.2f} ms, "
                     f"analytical {row['predicted_s'] * 1e3:8.2f} ms ({row['error']:+.1%})")
    if report.get("weight_touch_bytes_per_s"):
        lines.append(f"  CPU: {report['layer_call_s'] * 1e6:.3g} us per layer call, "
                     f"GEMM rows at half efficiency {report['m_half']:.3g}")
        if report["convolutions"]:
            lines.append(f"  CPU convolutions: oneDNN weight reorders at "
                         f"{report['weight_touch_bytes_per_s'] / 1e9:.3g} GB/s "
                         f"(backward {report['backward_weight_touch_bytes_per_s'] / 1e9:.3g} GB/s), "
                         f"oneDNN's k_half {report['conv_k_half']:.3g}; "
                         "slow_conv2d per-sample GEMMs (rows: fraction of peak) "
                         + ", ".join(f"{r:g}: {e:.3f}" for r, e in report["per_sample_gemm_efficiency"]))
        else:
            lines.append("  CPU convolutions: none in this model, so the profile does not constrain their numbers")
        if report["memory_family_efficiency"]:
            lines.append("  memory-bound kernels by family (fraction of the memory bandwidth): "
                         + ", ".join(f"{f} {e:.3f}" for f, e in report["memory_family_efficiency"]))
    held = report["held_out"]
    for split in (held, held.get("swapped")):
        if split and split["held_out_sizes"]:
            lines.append(f"  held out: fitted on sizes {split['fit_sizes']}, predicting {split['held_out_sizes']}: "
                         f"median error per layer {split['median_layer_error']:.1%} "
                         f"(worst layer {split['max_layer_median_error']:.1%})")
            for row in split["per_size"]:
                lines.append(f"    micro-batch {row['microbatch']:>3}: measured {row['measured_s'] * 1e3:8.2f} ms, "
                             f"predicted {row['predicted_s'] * 1e3:8.2f} ms ({row['error']:+.1%})")
    if report.get("at_bound"):
        lines.append(f"  efficiency reached 1.0 at work {report['at_bound']}: the profile's peak may be too low")
    return lines

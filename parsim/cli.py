"""The ``parsim`` command: parse, call, print.  Every command takes ``--json``.

User errors (ParsimError) print one line on stderr and exit with their code (2 for bad input,
3 when nothing fits); no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import json
import sys

from parsim.errors import InputError, ParsimError
from parsim.inputs import (nonnegative_float_arg, nonnegative_int_arg, positive_float_arg, positive_int_arg,
                           rising_sizes_arg)


def _print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=True, default=float)
    sys.stdout.write("\n")


def cmd_model(args) -> int:
    from parsim.model.spec import load_model
    from parsim.report.fmt import human_bytes, human_si

    spec = load_model(args.model)
    g = spec.graph
    if args.ops:
        from parsim.shard.graph import ops_frame

        frame = ops_frame(g, spec.shard)
        if args.json:
            _print_json(frame.to_dict(orient="records"))
        else:
            print(f"{spec.name}: operators at a batch of {g.extraction_batch} (ids for model.yaml's shard:; "
                  "a Linear's inputs are X and W^T)")
            print(frame.to_string(index=False))
        return 0
    if args.json:
        _print_json({"name": spec.name, "training": spec.training.__dict__, "graph": g.to_dict(),
                     "totals": g.totals(), "manual_stages": spec.manual_stages})
        return 0
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
    print(f"{spec.name}: {len(g)} cut units, dtype {g.dtype}, per sample "
          "(FLOPs = 2 x MACs; output = boundary activation; saved = kept for backward; "
          "mem_bound = bytes moved by memory-bound ops, fwd + bwd)")
    print(show[cols].to_string(index=False))
    t = g.totals()
    print(f"total: {t['param_count']:,} parameters ({human_bytes(t['param_bytes'])}), "
          f"forward {human_si(t['fwd_flops_per_sample'], 'FLOP')} ({human_si(t['fwd_flops_per_sample'] / 2, 'MAC')}), "
          f"backward {human_si(t['bwd_flops_per_sample'], 'FLOP')}, "
          f"saved activations {human_bytes(t['saved_bytes_per_sample'])} per sample; "
          f"global batch {spec.training.global_batch_size}, optimizer {spec.training.optimizer}")
    return 0


def cmd_cluster(args) -> int:
    from parsim.hardware import load_cluster
    from parsim.report.fmt import human_bytes, human_si, human_time

    c = load_cluster(args.cluster)
    d = c.describe()
    if args.json:
        _print_json(d)
        return 0
    print(f"{d['cluster']}: {d['description']}")
    print(f"  {d['nodes']} node(s) x {d['devices_per_node']} devices = {d['world_size']} ranks; "
          f"collectives: {d['collective_library']}")
    dev = d["device"]
    peaks = ", ".join(f"{k} {human_si(v, 'FLOP/s')}" for k, v in dev["peak_flops_per_s"].items())
    print(f"  device {dev['name']}: {human_bytes(dev['memory_bytes'])} at "
          f"{human_si(dev['memory_bandwidth_bytes_per_s'], 'B/s')}; peak {peaks}")
    res = dev["memory_reserved"]
    print(f"  usable memory {human_bytes(dev['usable_memory_bytes'])}: less {human_bytes(res['runtime_context_bytes'])} "
          f"runtime context and {human_bytes(res['collective_buffers_bytes'])} collective buffers, then "
          f"{res['fragmentation_fraction']:.0%} fragmentation")
    print(f"  groups per node: {d['groups_per_node']}; NICs per node: {d['nics_per_node']}")
    for cls, link in d["links"].items():
        print(f"  link {cls:8s} {human_si(link['bandwidth_bytes_per_s'], 'B/s'):>12s} per direction, "
              f"latency {human_time(link['latency_s'])}")
    if d["rank_devices"]:
        print("  rank -> (server, device_id): " + ", ".join(f"{r}->{tuple(x)}" for r, x in enumerate(d["rank_devices"])))
    return 0


def _compute_model(args, cluster, spec):
    """The analytical model, or with --profile the profiled one, whose fallback for sizes it did
    not measure is the analytical model calibrated to the same profile."""
    from parsim.cost.compute import AnalyticalCompute, load_profile_table
    from parsim.profile.calibrate import profiled_compute

    if getattr(args, "profile", None):
        return profiled_compute(load_profile_table(args.profile), spec.graph, cluster.device, spec.training.dtype)
    return AnalyticalCompute.for_training(cluster.device, spec.training)


def _print_coverage(models, file=None) -> None:
    """One line per profile used: which micro-batch sizes it priced how."""
    for name, model in models:
        if hasattr(model, "coverage"):
            print(f"{name}: {model.coverage().describe()}", file=file or sys.stdout)


def cmd_simulate(args) -> int:
    from parsim.fileio import check_output, write_json, write_text
    from parsim.hardware import load_cluster
    from parsim.model.spec import load_model
    from parsim.report.fmt import human_bytes, human_time, memory_margin
    from parsim.report.timeline import action_frame, chrome_trace, timeline_grid
    from parsim.search.resolve import resolve_config
    from parsim.sim import simulate

    for flag in ("output", "trace", "csv", "gantt", "memory_plot"):
        check_output(getattr(args, flag), "--" + flag.replace("_", "-"))
    if args.model.endswith(".json"):
        from parsim.plan import load_plan_and_model

        plan, spec = load_plan_and_model(args.model)
        cluster = load_cluster(args.cluster or plan.cluster)
        compute = _compute_model(args, cluster, spec)
        cfg = plan.config
    else:
        cluster = load_cluster(args.cluster or DEFAULT_CLUSTER)
        spec = load_model(args.model)
        compute = _compute_model(args, cluster, spec)
        cfg = resolve_config(spec, cluster, compute, dp=args.dp, pp=args.pp, microbatches=args.microbatches,
                             schedule=args.schedule, chunks=args.chunks, split=args.split, placement=args.placement,
                             tp=args.tp, tp_layout=args.tp_layout, recompute=args.recompute)
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, algorithm=args.algorithm, strategies=spec.shard)
    if args.output:
        from parsim.plan import plan_from_candidate
        write_json(args.output, plan_from_candidate(spec, cluster, cfg, est.to_json()).to_json())
    if args.trace:
        write_json(args.trace, chrome_trace(est))
    if args.csv:
        write_text(args.csv, action_frame(est).to_csv(index=False))
    if args.gantt or args.memory_plot:
        from parsim.report.plots import gantt, memory_plot
        if args.gantt:
            gantt(est, args.gantt)
        if args.memory_plot:
            memory_plot(est, args.memory_plot)
    if args.json:
        _print_json(est.to_json())
        _print_coverage([(args.profile, compute)], sys.stderr)
        return 0
    c = est.config
    print(f"{spec.name} on {cluster.spec}: dp={c['dp']} pp={c['pp']}"
          + (f" tp={c['tp']} ({c['tp_layout']})" if c["tp"] > 1 else "") + (" recompute" if c["recompute"] else "")
          + f" microbatches={c['microbatches']} "
          f"(size {c['microbatch_size']}) schedule={c['schedule']}"
          + (f" chunks={c['chunks']}" if c["chunks"] > 1 else "") + f" placement={c['placement']}")
    print(f"split: {c['split']}")
    print(f"step {human_time(est.step_time_s)}, {est.throughput_samples_per_s:,.1f} samples/s, "
          f"bubble {est.bubble_fraction:.1%}, waiting on other ranks {est.sync_wait_fraction:.1%}, "
          f"exposed communication {est.exposed_comm_fraction:.1%}")
    if est.input is not None:
        i = est.input
        how = (f"inline, {human_time(i['microbatch_s'])} per micro-batch on stage 0's rank" if not i["overlap"] else
               f"loader workers, {human_time(i['microbatch_s'])} of the node's loader per micro-batch "
               f"({i['readers_on_node']} input rank(s) share it)")
        print(f"input: {how}; {human_time(est.ranks[0].input_s)} of the step on rank 0"
              + ("; the loader, not compute, sets the step" if est.input_bound else ""))
    print(f"{'rank':>4} {'stages':>8} {'busy':>10} {'bubble':>10} {'sync wait':>10} {'exp.comm':>10} {'in flight':>9} "
          f"{'activations':>12} {'peak memory':>12} {'headroom':>10}")
    cap = cluster.device.usable_memory_bytes
    for r in est.ranks:
        print(f"{r.rank:>4} {','.join(map(str, r.stages)):>8} {human_time(r.busy_s):>10} {human_time(r.bubble_s):>10} "
              f"{human_time(r.sync_wait_s):>10} {human_time(r.exposed_comm_s):>10} {r.max_inflight_microbatches:>9} "
              f"{human_bytes(r.memory.activations_bytes):>12} {human_bytes(r.peak_memory_bytes):>12} "
              f"{human_bytes(cap - r.peak_memory_bytes):>10}")
    print("memory: " + memory_margin(max(est.peak_memory_bytes), cluster.device))
    print("bytes moved per step: " + ", ".join(f"{k} {human_bytes(v)}" for k, v in sorted(est.comm_bytes.items())))
    if args.grid:
        print(timeline_grid(est))
    _print_coverage([(args.profile, compute)])
    return 0


def _strategy_rows(spec, cluster, cfg) -> list[dict]:
    from parsim.shard.graph import strategy_summary
    from parsim.shard.prepare import auto_memory_bytes, layout_strategies

    patterns = layout_strategies(spec.graph, cfg.tp, cfg.tp_layout, spec.shard, cluster, spec.training,
                                 cfg.microbatch_size(spec.training.global_batch_size),
                                 auto_memory_bytes(cluster, cfg.pp))
    return [{"op": name, "strategy": str(strategy), "layers": n}
            for name, strategy, n in strategy_summary(spec.graph, patterns)]


def _tp_flags(p) -> None:
    from parsim.model.spec import TP_LAYOUTS

    p.add_argument("--tp", type=positive_int_arg, help="tensor-parallel group size")
    p.add_argument("--tp-layout", choices=TP_LAYOUTS,
                   help="operator strategies for tp > 1: megatron, megatron-sp, or the model's shard: section")
    p.add_argument("--recompute", action=argparse.BooleanOptionalAction, default=None,
                   help="activation recomputation (plan: tries both unless given)")


def _candidate_row(cand, names, cap):
    from parsim.report.fmt import human_bytes, human_time

    c, e = cand.config, cand.estimate
    return {"": cand.label, "dp": c.dp, "pp": c.pp, "tp": c.tp if c.tp == 1 else f"{c.tp} {c.tp_layout}",
            "recompute": "yes" if c.recompute else "", "m": c.microbatches,
            "schedule": c.schedule + (f" v={c.chunks}" if c.chunks > 1 else ""), "placement": c.placement,
            "step": human_time(e.step_time_s), "samples/s": f"{e.throughput_samples_per_s:,.1f}",
            "bubble": f"{e.bubble_fraction:.1%}", "sync wait": f"{e.sync_wait_fraction:.1%}",
            "exp.comm": f"{e.exposed_comm_fraction:.1%}",
            "peak mem": human_bytes(cand.peak_memory_bytes), "headroom": human_bytes(cap - cand.peak_memory_bytes)}


def _candidate_json(cand):
    c = cand.config
    return {"label": cand.label, "dp": c.dp, "pp": c.pp, "tp": c.tp, "tp_layout": c.tp_layout,
            "recompute": c.recompute, "microbatches": c.microbatches,
            "schedule": c.schedule, "chunks": c.chunks, "placement": c.placement, "bounds": list(c.bounds),
            "estimate": cand.estimate.to_json()}


def cmd_plan(args) -> int:
    import pandas as pd

    from parsim.cost.compute import AnalyticalCompute, tp_compute_models
    from parsim.fileio import check_output, write_json
    from parsim.hardware import load_cluster
    from parsim.inputs import parse_bytes
    from parsim.model.spec import load_model
    from parsim.plan import plan_from_candidate
    from parsim.search.planner import Constraints, plan

    check_output(args.output, "-o")
    cap = parse_bytes(args.max_memory, "--max-memory") if args.max_memory else None
    cluster = load_cluster(args.cluster)          # first: a bad cluster is refused before the model is built
    spec = load_model(args.model)
    compute = _compute_model(args, cluster, spec)
    tp_compute = tp_compute_models(args.tp_profile, AnalyticalCompute.for_training(cluster.device, spec.training))
    result = plan(spec, cluster, compute, Constraints(dp=args.dp, pp=args.pp, microbatches=args.microbatches,
                                                      schedule=args.schedule, max_memory_bytes=cap, top=args.top,
                                                      tp=args.tp, tp_layout=args.tp_layout, recompute=args.recompute),
                  progress=None if not args.json else False, tp_compute=tp_compute)
    used = [(args.profile, compute)] + [(f"tp={tp} {layout} profile", m) for (tp, layout), m in tp_compute.items()]
    chosen = result.chosen
    plan_json = plan_from_candidate(spec, cluster, chosen.config, chosen.estimate.to_json()).to_json()
    if args.output:
        write_json(args.output, plan_json)
    if args.json:
        c = chosen.config
        _print_json({"search_time_s": result.search_time_s, "considered": result.considered,
                     "simulated": result.simulated, "plan": plan_json,
                     "capacity_bytes": result.capacity_bytes, "margin_bytes": result.margin_bytes,
                     "strategies": _strategy_rows(spec, cluster, c) if c.tp > 1 else [],
                     "candidates": [_candidate_json(c) for c in result.ranked],
                     "pareto": [_candidate_json(c) for c in result.pareto],
                     "manual": _candidate_json(result.manual) if result.manual else None,
                     "explanation": list(result.explanation),
                     "profile_coverage": {p: m.coverage().describe() for p, m in used if hasattr(m, "coverage")}})
        return 0
    names = spec.graph.names
    rows = [_candidate_row(c, names, result.capacity_bytes) for c in result.ranked]
    for i, row in enumerate(rows):
        row[""] = "*" if i == 0 else str(i + 1)
    if result.manual:
        rows.append(_candidate_row(result.manual, names, result.capacity_bytes))
    print(f"{spec.name} on {cluster.spec} ({cluster.world_size} devices, global batch "
          f"{spec.training.global_batch_size}): searched {result.considered} candidates, simulated "
          f"{result.simulated} in {result.search_time_s:.2f} s")
    with pd.option_context("display.width", 250):
        print(pd.DataFrame(rows).to_string(index=False))
    print("splits:")
    shown = list(result.ranked) + ([result.manual] if result.manual else [])
    for row, cand in zip(rows, shown):
        print(f"  {row['']:>6}: {cand.config.describe_split(names)}")
    for line in result.explanation:
        print(line)
    if chosen.config.tp > 1:
        c = chosen.config
        rows = _strategy_rows(spec, cluster, c)
        print(f"operator strategies of the pick (tp={c.tp}, {c.tp_layout}) that differ from data parallelism:")
        if not rows:
            print("  none: every operator is replicated over the group")
        for row in rows[:12]:
            print(f"  {row['op']:>28}  {row['strategy']}  in {row['layers']} layer(s)")
        if len(rows) > 12:
            print(f"  ... {len(rows) - 12} more (--json lists all)")
    if len(result.pareto) > 1:
        print("pareto (throughput vs peak memory): " + "; ".join(
            f"dp={c.config.dp} pp={c.config.pp} m={c.config.microbatches} {c.config.schedule} "
            f"{c.estimate.throughput_samples_per_s:,.0f}/s {c.peak_memory_bytes / 2**30:.2f} GiB" for c in result.pareto))
    _print_coverage(used)
    if args.output:
        print(f"wrote {args.output}")
    return 0


def cmd_run(args) -> int:
    from parsim.exec.launch import launch
    from parsim.exec.train import check_run
    from parsim.run import options_from

    plan, _, _ = check_run(options_from(args))    # bad input fails here, once, before any process starts
    nproc = args.nproc or plan.config.world_size
    if nproc != plan.config.world_size:
        raise InputError(f"{args.plan}: parallel: the plan needs dp x pp x tp = {plan.config.world_size} ranks; "
                         f"use --nproc {plan.config.world_size}")
    from parsim.run import worker_argv

    return launch(worker_argv(args), nproc, args.timeout)


def cmd_profile(args) -> int:
    import json

    from parsim.fileio import check_output
    from parsim.model.spec import load_model
    from parsim.profile.layers import launch_profilers

    spec = load_model(args.model)          # bad input fails here, once
    sizes = args.microbatch_sizes
    if sizes[0] < spec.graph.min_microbatch:
        raise InputError(f"--microbatch-sizes: {spec.graph.min_microbatch_reason}; start at {spec.graph.min_microbatch}")
    out = args.output or f"{spec.name}.profile.json"
    check_output(out, "-o")
    if args.tp > 1 and args.nproc % args.tp:
        raise InputError(f"--tp {args.tp}: the {args.nproc} processes (--nproc) must form whole groups of {args.tp}")
    code = launch_profilers(args.model, sizes, out, args.nproc, args.repeats, args.device, args.threads,
                            tp=args.tp, tp_layout=args.tp_layout, noise_threshold=args.noise_threshold,
                            max_remeasure=args.max_remeasure)
    if code:
        return code
    with open(out) as f:
        table = json.load(f)
    if args.json:
        _print_json(table)
        return 0
    print(f"{spec.name}: {len(table['layers'])} layers x micro-batch sizes {sizes} on {table['device']}, "
          f"{args.nproc} concurrent process(es) x {table['threads']} thread(s); median of {args.repeats} -> {out}")
    machine = table.get("machine", {})
    print(f"machine: {machine.get('cpu_model')}, {machine.get('cores')} cores, torch {machine.get('torch')}; "
          f"spread = (max-min)/median of the repeats, worst process; proc = (max-min)/mean of the processes' F+B")
    for row in table["layers"]:
        flags = ([f"noisy at {','.join(map(str, row['noisy']))}"] if row.get("noisy") else []) + \
                ([f"falls {' '.join(f'{a}->{b}' for a, b in row['nonmonotone_confirmed'])} (confirmed)"]
                 if row.get("nonmonotone_confirmed") else [])
        print(f"  {row['name']:>10}  fwd " + " ".join(f"{t * 1e3:7.2f}" for t in row["fwd_s"]) +
              "  ms | bwd " + " ".join(f"{t * 1e3:7.2f}" for t in row["bwd_s"]) + " ms | spread " +
              " ".join(f"{max(f, b):.0%}" for f, b in zip(row["fwd_spread"], row["bwd_spread"])) + " | proc " +
              " ".join(f"{p:.0%}" for p in row["proc_spread"]) + ("  " + "; ".join(flags) if flags else ""))
    if table.get("remeasured"):
        print(f"re-measured for noise above {table['noise_threshold']:.0%}: sizes {table['remeasured']}")
    return 0


def cmd_profile_comm(args) -> int:
    from parsim.exec.launch import launch
    from parsim.fileio import check_output

    check_output(args.output, "-o")
    worker = ["-o", args.output, "--name", args.name, "--repeats", str(args.repeats)]
    code = launch(worker, args.nproc, timeout_s=120, module="parsim.profile.comm", quiet=args.json)
    if code == 0 and args.json:
        from parsim.hardware import load_cluster
        _print_json(load_cluster(args.output).describe())
    return code


def cmd_profile_data(args) -> int:
    from parsim.profile.data import check_target, section_text, time_loader, write_section

    check_target(args.output)         # before the timing, which takes a while
    timing = time_loader(args.data, args.samples, args.batch, args.repeats)
    command = (f"parsim profile-data -o {args.output}" + (f" --data {args.data}" if args.data else "")
               + f" --samples {args.samples} --batch {args.batch} --repeats {args.repeats}")
    write_section(args.output, section_text(timing, command, f"CIFAR records in {args.data}" if args.data
                                            else "synthetic CIFAR-shaped images"))
    if args.json:
        _print_json({"per_sample_s": list(timing.per_sample_s), "median_s": timing.median_s,
                     "samples_per_s": timing.samples_per_s, "spread": timing.spread, "output": args.output})
    else:
        print(f"loader: {timing.median_s * 1e6:.1f} us per sample ({timing.samples_per_s:,.0f} samples/s, one thread), "
              f"spread {timing.spread:.1%} over {args.repeats} repeats; wrote input_pipeline to {args.output}")
    return 0


def cmd_validate(args) -> int:
    import os

    from parsim.validation import validate

    tp_profiles = []
    if args.profile:
        profiles = {1: args.profile}
    else:                     # profile as the runs will run: alone, and with every core busy
        from parsim.hardware import load_cluster
        from parsim.model.spec import load_model
        from parsim.profile.layers import launch_profilers
        from parsim.validation import sizes_to_profile
        spec = load_model(args.model)
        per_node = load_cluster(args.cluster).devices_per_node
        sizes = sizes_to_profile(spec, set(args.microbatch_sizes), args.set)
        os.makedirs(args.out, exist_ok=True)
        profiles = {}
        for n in sorted({1, per_node}):
            profiles[n] = os.path.join(args.out, f"layers.{n}proc.profile.json")
            print(f"profiling the model with {n} process(es) at once (micro-batch sizes {sizes}) "
                  f"-> {profiles[n]}", file=sys.stderr)
            code = launch_profilers(args.model, sizes, profiles[n], n)
            if code:
                return code
        if spec.source.kind == "builtin" and spec.source.target == "gpt" and per_node >= 2:   # tp=2 plans
            tp_profiles.append(os.path.join(args.out, "layers.tp2.profile.json"))
            print(f"profiling the tensor-parallel shards (tp=2, megatron) -> {tp_profiles[0]}", file=sys.stderr)
            code = launch_profilers(args.model, sizes, tp_profiles[0], 2, tp=2)
            if code:
                return code
    log = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if args.json else print
    out = validate(args.model, args.cluster, profiles, args.out, args.steps, args.set, args.timeout, args.passes,
                   log=log, tp_profiles=tp_profiles)
    table = out.pop("table")
    if args.json:
        _print_json(out)
        return 0
    import pandas as pd
    with pd.option_context("display.width", 250):
        print(table.to_string(index=False))
    print(f"step time: MAPE {out['mape_step_time']:.1%}, max error {out['max_error_step_time']:.1%}; peak memory: "
          f"MAPE {out['mape_peak_memory']:.1%}; Spearman (throughput) {out['spearman_throughput']:.2f}; planner's pick "
          + (f"(the same plan as {', '.join(out['pick_same_as'])}) " if out['pick_same_as'] else "")
          + f"{'is' if out['pick_is_best'] else 'is not'} the measured best (gap {out['pick_gap_to_best']:.1%}, best: "
          f"{out['measured_best']}); median run-to-run spread {out['median_run_to_run_spread']:.1%}")
    print(f"calibrated analytical model: step-time MAPE {out['mape_step_time_analytical']:.1%}, "
          f"max error {out['max_error_step_time_analytical']:.1%}")
    print(f"wrote {args.out}/validation.json, validation.csv, scatter.png, overlay_*.png")
    return 0


def cmd_calibrate(args) -> int:
    from parsim.cost.compute import load_profile_table
    from parsim.fileio import check_output, write_text
    from parsim.hardware import load_cluster
    from parsim.model.spec import load_model
    from parsim.profile.calibrate import calibrate, profile_yaml

    check_output(args.output, "-o")
    spec = load_model(args.model)
    cluster = load_cluster(args.cluster)
    table = load_profile_table(args.profile)
    device, report = calibrate(spec.graph, table, cluster.device, spec.training.dtype)
    if args.output:
        write_text(args.output, profile_yaml(cluster.profile, device, args.profile))
    if args.json:
        _print_json(report)
        return 0
    print(f"calibrated {cluster.profile.name} to {args.profile}: {report['points']} layer timings, "
          f"{report['model']} model")
    if report["model"] == "kernel-level":
        print(f"  large-GEMM efficiency {report['gemm_efficiency']:.3f}, k_half {report['k_half']:.3g}, "
              f"launch {report['launch_s'] * 1e6:.3g} us per kernel")
    else:
        print("  efficiency (work FLOPs -> fraction of peak): "
              + ", ".join(f"{w:.3g}: {e:.3f}" for w, e in report["efficiency"]))
    print(f"  memory efficiency {report['memory_efficiency']:.3f}")
    print(f"  fit error per layer: MAPE {report['layer_mape']:.1%}, max {report['layer_max_error']:.1%}; "
          f"per whole forward+backward: MAPE {report['step_mape']:.1%}")
    for row in report["per_step"]:
        print(f"    micro-batch {row['microbatch']:>3}: measured {row['measured_s'] * 1e3:8.2f} ms, "
              f"analytical {row['predicted_s'] * 1e3:8.2f} ms ({row['error']:+.1%})")
    held = report["held_out"]
    if held["held_out_sizes"]:
        print(f"  held out: fitted on sizes {held['fit_sizes']}, predicting {held['held_out_sizes']}: median error "
              f"per layer {held['median_layer_error']:.1%} (worst layer {held['max_layer_median_error']:.1%})")
        for row in held["per_size"]:
            print(f"    micro-batch {row['microbatch']:>3}: measured {row['measured_s'] * 1e3:8.2f} ms, "
                  f"predicted {row['predicted_s'] * 1e3:8.2f} ms ({row['error']:+.1%})")
    if report.get("at_bound"):
        print(f"  efficiency reached 1.0 at work {report['at_bound']}: the profile's peak may be too low")
    if args.output:
        print(f"wrote {args.output}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="parsim", description="Simulate and plan parallel training.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("model", help="print a model's layer table")
    p.add_argument("model", help="model.yaml")
    p.add_argument("--ops", action="store_true", help="list the operators (ids for shard: strategies) instead")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.set_defaults(func=cmd_model)

    p = sub.add_parser("cluster", help="print a cluster: devices, groups and links")
    p.add_argument("cluster", help="PROFILE:NODESxDEVICES (ascend910:2x8), a profile YAML or a rank-table JSON")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_cluster)

    p = sub.add_parser("simulate", help="predict one training step of a parallel configuration")
    p.add_argument("model", help="model.yaml, or a plan.json from `parsim plan -o`")
    p.add_argument("--cluster", help=f"cluster (default {DEFAULT_CLUSTER}, or the plan's)")
    p.add_argument("--dp", type=positive_int_arg, help="data-parallel replicas (default: devices / pp)")
    p.add_argument("--pp", type=positive_int_arg, help="pipeline ranks")
    p.add_argument("--microbatches", type=positive_int_arg, help="micro-batches per replica")
    p.add_argument("--schedule", choices=SCHEDULE_CHOICES)
    p.add_argument("--chunks", type=positive_int_arg, help="model chunks per rank (interleaved, zbh1)")
    p.add_argument("--split", help="balanced | manual (model.yaml pipeline_stage) | boundaries e.g. 0,8,18")
    p.add_argument("--placement", choices=("pp-inner", "dp-inner"), default="pp-inner",
                   help="pp-inner: pipeline neighbours on adjacent devices; dp-inner: replicas adjacent")
    _tp_flags(p)
    p.add_argument("--algorithm", choices=("auto", "ring", "tree", "halving-doubling", "hierarchical"),
                   default="auto",
                   help="all-reduce algorithm; the cluster's library must implement it (default: the fastest it has)")
    p.add_argument("--profile", help="layer-profile YAML: use the profiled cost model")
    p.add_argument("--trace", help="write a Chrome trace JSON (Perfetto)")
    p.add_argument("--gantt", help="write a Gantt chart (.png or .svg)")
    p.add_argument("--memory-plot", help="write memory over time (.png or .svg)")
    p.add_argument("--csv", help="write per-action times as CSV")
    p.add_argument("--grid", action="store_true", help="print the step x rank grid")
    p.add_argument("-o", "--output", help="write this configuration as a plan.json (for `parsim run`)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("plan", help="search dp x pp, micro-batches, schedule and split; rank by throughput")
    p.add_argument("model", help="model.yaml")
    p.add_argument("--cluster", default=DEFAULT_CLUSTER, help=f"cluster (default {DEFAULT_CLUSTER})")
    p.add_argument("--dp", type=positive_int_arg)
    p.add_argument("--pp", type=positive_int_arg)
    p.add_argument("--microbatches", type=positive_int_arg)
    p.add_argument("--schedule", choices=SCHEDULE_CHOICES)
    _tp_flags(p)
    p.add_argument("--max-memory", help="memory per device, e.g. 24GiB, taken as given (default: the device's usable "
                                        "memory: its capacity less the profile's memory_reserved)")
    p.add_argument("--top", type=positive_int_arg, default=10, help="rows in the ranked table")
    p.add_argument("--profile", help="layer-profile YAML: use the profiled cost model")
    p.add_argument("--tp-profile", action="append",
                   help="a profile of tensor-parallel shards (parsim profile --tp): prices that tp's candidates; "
                        "repeatable")
    p.add_argument("-o", "--output", help="write the chosen plan as plan.json")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("profile", help="time each layer's forward and backward per micro-batch size")
    p.add_argument("model", help="model.yaml")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--microbatch-sizes", type=rising_sizes_arg, default="1,2,4,8,16,32")
    p.add_argument("--repeats", type=positive_int_arg, default=5, help="timed repeats after 2 warm-ups (median)")
    p.add_argument("--threads", type=positive_int_arg, default=1, help="compute threads, as in a run (default 1)")
    p.add_argument("--nproc", type=positive_int_arg, default=2,
                   help="profilers running at once, as the ranks of a run share the machine (default 2)")
    p.add_argument("--tp", type=positive_int_arg, default=1,
                   help="profile the tensor-parallel shards (groups of tp of the --nproc processes)")
    p.add_argument("--tp-layout", choices=("megatron", "megatron-sp"), default="megatron",
                   help="a layout the executor runs")
    p.add_argument("--noise-threshold", type=nonnegative_float_arg, default=0.05,
                   help="relative spread of the repeats above which a size is measured again (default 0.05)")
    p.add_argument("--max-remeasure", type=nonnegative_int_arg, default=2,
                   help="more rounds at most for a noisy size; still noisy rows are flagged (default 2)")
    p.add_argument("-o", "--output", help="profile file (default MODEL_NAME.profile.json)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("profile-comm", help="measure links, collectives and the device; write a cluster profile")
    p.add_argument("--nproc", type=positive_int_arg, default=2, help="processes on this machine (default 2)")
    p.add_argument("-o", "--output", default="measured-cluster.yaml")
    p.add_argument("--name", default="local-cpu", help="the profile's name")
    p.add_argument("--repeats", type=positive_int_arg, default=9)
    p.add_argument("--json", action="store_true", help="print the measured profile as JSON")
    p.set_defaults(func=cmd_profile_comm)

    p = sub.add_parser("profile-data", help="time the executor's input loader; write input_pipeline into a cluster profile")
    p.add_argument("-o", "--output", required=True, help="the cluster profile YAML to update")
    p.add_argument("--data", help="a cifar-10-batches-bin folder (default: synthetic CIFAR-shaped images)")
    p.add_argument("--samples", type=positive_int_arg, default=2048, help="samples per repeat (default 2048)")
    p.add_argument("--batch", type=positive_int_arg, default=32)
    p.add_argument("--repeats", type=positive_int_arg, default=5)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_profile_data)

    p = sub.add_parser("calibrate", help="fit the analytical model's efficiencies to a layer profile")
    p.add_argument("profile", help="layer profile from `parsim profile`")
    p.add_argument("--model", required=True, help="the model.yaml the profile measured")
    p.add_argument("--cluster", default="local-cpu", help="the profile whose device to calibrate")
    p.add_argument("-o", "--output", help="write the calibrated cluster profile YAML")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("validate", help="predict plans, run them, and compare")
    p.add_argument("model", nargs="?", default="examples/resnet50_cifar10_local.yaml")
    p.add_argument("--cluster", default="local-cpu")
    p.add_argument("--profile", help="one layer profile for every plan (default: profile the model first, "
                                     "alone and with every core busy, and price each plan with the matching one)")
    p.add_argument("--microbatch-sizes", type=rising_sizes_arg, default="2,4,8,16,32",
                   help="sizes to profile when --profile is not given, besides the plans' own (the planner's "
                        "pick is kept to the profiled sizes)")
    p.add_argument("--set", choices=("default", "quick", "schedules"), default="default",
                   help="plans to run: the full set, a quick three, or pp=2 m=4 under 1F1B, interleaved and ZB-H1")
    p.add_argument("--steps", type=positive_int_arg, default=12, help="steps per run, 3 of them warm-up (default 12)")
    p.add_argument("--passes", type=positive_int_arg, default=1,
                   help="run the whole set this many times in turn; medians over passes, spread reported")
    p.add_argument("--timeout", type=positive_float_arg, default=300.0, help="seconds a run may take (default 300)")
    p.add_argument("--out", default="runs/validate")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_validate)

    from parsim.run import add_run_options
    p = sub.add_parser("run", help="run a plan with torch.distributed on this machine and measure it")
    add_run_options(p)
    p.add_argument("--nproc", type=positive_int_arg, help="processes to start (default: the plan's dp x pp)")
    p.set_defaults(func=cmd_run)
    return parser


SCHEDULE_CHOICES = ("gpipe", "1f1b", "interleaved", "zbh1")
DEFAULT_CLUSTER = "ascend910:1x8"   # the seeds' 8-chip Atlas 800


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad flag or value as one line (a user error, exit 2) instead of the usage."""

    def error(self, message: str):
        raise InputError(f"{message} (see {self.prog} --help)")


def main(argv: list[str] | None = None) -> int:
    import warnings
    from parsim.hardware.machine import ProfileMachineWarning

    shown = warnings.showwarning

    def one_line(message, category, *rest, **kw):      # a warning the user acts on: one line, no source
        if issubclass(category, ProfileMachineWarning):
            print(f"parsim: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, *rest, **kw)
    try:
        args = build_parser().parse_args(argv)
        with warnings.catch_warnings():
            warnings.simplefilter("default", ProfileMachineWarning)    # once per message
            warnings.showwarning = one_line
            return args.func(args)
    except ParsimError as e:
        print(f"parsim: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # e.g. `parsim model m.yaml | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("parsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

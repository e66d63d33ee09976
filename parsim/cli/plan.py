"""The commands that read a model and a cluster and predict: model, cluster, simulate, plan."""

from __future__ import annotations

import dataclasses
import os
import sys

from parsim.cli.common import DEFAULT_CLUSTER, load_model_checked, print_json, print_lines
from parsim.errors import InputError

def cmd_model(args) -> int:
    from parsim.report.cli_text import model_lines, ops_lines

    spec = load_model_checked(args.model)
    g = spec.graph
    if args.ops:
        from parsim.shard.graph import ops_frame

        frame = ops_frame(g, spec.shard)
        if args.json:
            print_json(frame.to_dict(orient="records"))
        else:
            print_lines(ops_lines(spec, frame))
        return 0
    if args.json:
        print_json({"name": spec.name, "training": spec.training.__dict__, "graph": g.to_dict(),
                     "totals": g.totals(), "manual_stages": spec.manual_stages})
        return 0
    print_lines(model_lines(spec))
    return 0


def cmd_cluster(args) -> int:
    from parsim.hardware import load_cluster
    from parsim.report.cli_text import cluster_lines

    d = load_cluster(args.cluster).describe()
    if args.json:
        print_json(d)
        return 0
    print_lines(cluster_lines(d))
    return 0


def _compute_model(args, cluster, spec):
    """The analytical model, or with --profile the profiled one, whose fallback for sizes it did
    not measure is the analytical model calibrated to the same profile."""
    from parsim.cost.compute import AnalyticalCompute, load_profile_table
    from parsim.profile.calibrate import profiled_compute

    if getattr(args, "profile", None):
        if spec.training.fp8:
            from parsim.errors import InputError

            raise InputError(f"--profile: {args.profile} timed the layers without FP8 GEMMs; an FP8 plan "
                             "(training.fp8, --fp8) is priced by the analytical model: leave out --profile")
        return profiled_compute(load_profile_table(args.profile), spec.graph, cluster.device, spec.training.dtype)
    return AnalyticalCompute.for_training(cluster.device, spec.training)


def _print_coverage(models, file=None) -> None:
    """One line per profile used: which micro-batch sizes it priced how."""
    from parsim.report.cli_text import coverage_lines

    print_lines(coverage_lines(models), file)


def cmd_simulate(args) -> int:
    from parsim.fileio import check_output, write_json, write_text
    from parsim.hardware import load_cluster
    from parsim.report.cli_text import simulate_lines
    from parsim.report.timeline import action_frame, chrome_trace
    from parsim.search.resolve import resolve_config
    from parsim.sim import simulate
    from parsim.sim.band import with_band
    from parsim.sim.interval import profiled_intervals

    for flag in ("output", "trace", "csv", "gantt", "memory_plot"):
        check_output(getattr(args, flag), "--" + flag.replace("_", "-"))
    from_config = None
    if args.from_framework or args.from_model or args.set:
        from parsim.export.commands import imported_config

        args.cluster = args.cluster or DEFAULT_CLUSTER
        from_config = imported_config(args, _compute_model)
        spec, cluster, compute, cfg = from_config.spec, from_config.cluster, from_config.compute, from_config.config
    elif args.model.endswith(".json"):
        from parsim.plan import load_plan_and_model, model_changed

        from parsim.shard.prepare import check_shard_section

        plan, spec = load_plan_and_model(args.model)
        check_shard_section(spec)
        stale = model_changed(plan, args.model)
        if stale:          # a what-if is allowed: the plan's config, priced on the model as it is now
            print("parsim: note: " + stale.replace("; plan again", "; priced on the model as it is now"),
                  file=sys.stderr)
        cluster = load_cluster(args.cluster or plan.cluster)
        compute = _compute_model(args, cluster, spec)
        cfg = plan.config
    else:
        cluster = load_cluster(args.cluster or DEFAULT_CLUSTER)
        spec = _fp8(load_model_checked(args.model), args)
        compute = _compute_model(args, cluster, spec)
        cfg = resolve_config(spec, cluster, compute, dp=args.dp, pp=args.pp, microbatches=args.microbatches,
                             schedule=args.schedule, chunks=args.chunks, split=args.split, placement=args.placement,
                             tp=args.tp, tp_layout=args.tp_layout, recompute=args.recompute, zero=args.zero,
                             cp=args.cp, tp_comm_overlap=args.tp_comm_overlap, cp_mode=args.cp_mode, ep=args.ep,
                             ep_overlap=args.ep_overlap, etp=args.etp, recompute_layers=args.recompute_layers,
                             recompute_every=args.recompute_every, dp_shard=args.dp_shard,
                             overlap_grad_reduce=args.overlap_grad_reduce is not False, no_sync=args.no_sync)
    if args.overlap_grad_reduce is not None:      # beside a plan or an imported config: overrides theirs
        cfg = dataclasses.replace(cfg, overlap_grad_reduce=args.overlap_grad_reduce)
    if args.no_sync:
        cfg = dataclasses.replace(cfg, no_sync=True)
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, algorithm=args.algorithm, strategies=spec.shard)
    step, memory = profiled_intervals(spec, cluster, cfg, compute, est.step_time_s, algorithm=args.algorithm)
    est = dataclasses.replace(est, step_time_band=step, peak_memory_band=memory)
    est = with_band(est, spec.graph, cluster, cfg, stack=spec.training.stack)   # else the public benchmark's band
    if args.output:
        from parsim.plan import plan_from_candidate
        if from_config:
            from parsim.export.commands import write_model_beside
            spec = write_model_beside(args.output, from_config)
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
        print_json(est.to_json())
        _print_coverage([(args.profile, compute)], sys.stderr)
        return 0
    print_lines(simulate_lines(spec, cluster, est, args.grid))
    _print_coverage([(args.profile, compute)])
    return 0


def _strategy_rows(spec, cluster, cfg, prices) -> list[dict]:
    """The pick's operator strategies (``prices``: the search's pricing context, parsim.sim.prices,
    whose strategy searches serve where ``cluster`` is the one it searched on)."""
    from parsim.shard.graph import strategy_summary
    from parsim.shard.prepare import auto_memory_bytes, layout_strategies

    patterns = layout_strategies(spec.graph, cfg.tp, cfg.tp_layout, spec.shard, cluster, spec.training,
                                 cfg.microbatch_size(spec.training.global_batch_size),
                                 auto_memory_bytes(cluster, cfg.pp), cfg.etp, prices.shard)
    return [{"op": name, "strategy": str(strategy), "layers": n}
            for name, strategy, n in strategy_summary(spec.graph, patterns)]


def _fp8(spec, args):
    """The model with FP8 GEMMs where --fp8 asks for them (parsim.model.fp8)."""
    from parsim.model.spec import with_fp8

    return with_fp8(spec) if getattr(args, "fp8", False) else spec


def cmd_plan(args) -> int:
    from parsim.cost.compute import AnalyticalCompute, check_profile_ep, tp_compute_models
    from parsim.fileio import check_output, write_json
    from parsim.hardware import load_cluster
    from parsim.inputs import parse_bytes
    from parsim.plan import plan_from_candidate
    from parsim.report.cli_text import plan_lines, plan_result_json
    from parsim.search.noise import reranker
    from parsim.search.planner import Constraints, plan
    from parsim.sim.band import with_bands
    from parsim.sim.prices import Prices

    check_output(args.output, "-o")
    if args.dp_shard and args.hybrid_shard:
        raise InputError(f"--dp-shard {args.dp_shard} fixes the shard group and --hybrid-shard searches one; give one")
    validation = _report_inputs(args)
    cap = parse_bytes(args.max_memory, "--max-memory") if args.max_memory else None
    from_config = given = None
    if args.from_framework or args.from_model or args.set:     # the config as given is priced, then searched
        from parsim.export.commands import imported_config
        from parsim.sim import simulate

        from_config = imported_config(args, _compute_model)
        spec, cluster, compute = from_config.spec, from_config.cluster, from_config.compute
        given = simulate(spec.graph, spec.training, cluster, from_config.config, compute, strategies=spec.shard)
    else:
        cluster = load_cluster(args.cluster)      # first: a bad cluster is refused before the model is built
        spec = _fp8(load_model_checked(args.model), args)
        compute = _compute_model(args, cluster, spec)
    tp_compute = tp_compute_models(args.tp_profile, AnalyticalCompute.for_training(cluster.device, spec.training))
    profiled_ep = getattr(getattr(compute, "table", None), "ep", 1)      # an --ep profile prices its own ep only
    if profiled_ep > 1:
        check_profile_ep(compute, args.ep or profiled_ep)
    prices = Prices(cluster.for_dtype(spec.training.dtype))      # the search's, and the pick's layout's below
    result = plan(spec, cluster, compute, Constraints(dp=args.dp, pp=args.pp, microbatches=args.microbatches,
                                                      schedule=args.schedule, max_memory_bytes=cap, top=args.top,
                                                      tp=args.tp, tp_layout=args.tp_layout, recompute=args.recompute,
                                                      zero=args.zero, cp=args.cp,
                                                      ep=args.ep or (profiled_ep if profiled_ep > 1 else None),
                                                      ep_overlap=args.ep_overlap, etp=args.etp,
                                                      tp_comm_overlap=args.tp_comm_overlap, cp_mode=args.cp_mode,
                                                      partial_recompute=args.partial_recompute,
                                                      hybrid_shard=args.hybrid_shard, dp_shard=args.dp_shard,
                                                      overlap_grad_reduce=args.overlap_grad_reduce),
                  progress=None if not args.json else False, tp_compute=tp_compute, prices=prices,
                  rerank=reranker(spec, cluster, compute, tp_compute))
    result = with_bands(result, spec.graph, cluster, stack=spec.training.stack)   # where no profile gave one
    used = [(args.profile, compute)] + [(f"tp={tp} {layout} profile", m) for (tp, layout), m in tp_compute.items()]
    chosen = result.chosen
    if from_config and args.output:
        from parsim.export.commands import write_model_beside
        spec = write_model_beside(args.output, from_config)
    plan_json = plan_from_candidate(spec, cluster, chosen.config, chosen.estimate.to_json()).to_json()
    if args.output:
        write_json(args.output, plan_json)
    if args.report:
        _write_plan_report(args.report, spec, cluster, result,
                           tp_compute.get((chosen.config.tp, chosen.config.tp_layout), compute), validation, prices)
    strategies = _strategy_rows(spec, cluster, chosen.config, prices) if chosen.config.tp > 1 else []
    if args.json:
        print_json(plan_result_json(result, plan_json, strategies, used))
        return 0
    print_lines(plan_lines(spec, cluster, result, strategies))
    if given is not None:
        from parsim.export.commands import better_lines
        print_lines(better_lines(given, chosen, _after_backward_s(from_config, chosen, spec, cluster,
                                                                  tp_compute.get((chosen.config.tp,
                                                                                  chosen.config.tp_layout), compute))))
    _print_coverage(used)
    if args.output:
        print(f"wrote {args.output}")
    if args.report:
        print(f"wrote {os.path.join(args.report, 'report.html')}")
    return 0


def _after_backward_s(from_config, chosen, spec, cluster, compute) -> float | None:
    """The pick's step with its gradient buckets reduced as the config read with --from reduces them
    (DDP and ZeRO-1 after the backward, ZeRO-2 on the compute stream), where it does so and the pick
    overlaps them; else None."""
    from parsim.refusals import grad_reduce_refusal

    c = chosen.config
    after = dataclasses.replace(c, overlap_grad_reduce=False)
    if from_config.config.overlap_grad_reduce or not c.overlap_grad_reduce or c.grad_ranks == 1 \
            or grad_reduce_refusal(after):          # ZeRO-3 reduces under the backward only
        return None
    from parsim.sim import simulate

    return simulate(spec.graph, spec.training, cluster, after, compute, keep_timeline=False).step_time_s


def _report_inputs(args) -> dict | None:
    """--report's folder and --validation's file, checked before the search; the validation read."""
    from parsim.fileio import check_output_folder

    if args.validation and not args.report:
        raise InputError(f"--validation {args.validation}: only the report shows it; add --report DIR")
    check_output_folder(args.report, "--report")
    if not args.validation:
        return None
    from parsim.report.validation import load_validation
    return load_validation(args.validation)


def _write_plan_report(folder, spec, cluster, result, compute, validation, prices) -> None:
    """DIR/report.html (parsim.report.html), with the pick simulated again to keep its timeline."""
    from parsim.fileio import write_text
    from parsim.report.cli_text import plan_header, plan_rows
    from parsim.report.html import plan_report
    from parsim.sim import simulate

    est = simulate(spec.graph, spec.training, cluster, result.chosen.config, compute, strategies=spec.shard,
                   prices=prices)
    est = dataclasses.replace(est, step_time_band=result.chosen.estimate.step_time_band)
    page = plan_report(result, model=spec.name, cluster=cluster.spec, header=plan_header(spec, cluster, result),
                       rows=plan_rows(result, spec.graph.moe), names=spec.graph.names, estimate=est, validation=validation)
    os.makedirs(folder, exist_ok=True)
    write_text(os.path.join(folder, "report.html"), page)

"""The ``parsim`` command: parse, call, print.  Every command takes ``--json``.

User errors (ParsimError) print one line on stderr and exit with their code (2 for bad input,
3 when nothing fits); no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from parsim.errors import InputError, ParsimError
from parsim.inputs import (nonnegative_float_arg, nonnegative_int_arg, positive_float_arg, positive_int_arg,
                           rising_sizes_arg)

BUILTIN_SETS = ("default", "quick", "schedules", "zero")


def validation_set_arg(text: str) -> str:
    """--set: a built-in set's name, or a set file that exists."""
    if text in BUILTIN_SETS or (text.endswith((".yaml", ".yml")) and os.path.isfile(text)):
        return text
    raise argparse.ArgumentTypeError(f"expected one of {', '.join(BUILTIN_SETS)} or a set file (.yaml) that "
                                     f"exists, got {text!r}")


def _print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=True, default=float)
    sys.stdout.write("\n")


def _print_lines(lines, file=None) -> None:
    for line in lines:
        print(line, file=file or sys.stdout)


def cmd_model(args) -> int:
    from parsim.model.spec import load_model
    from parsim.report.cli_text import model_lines, ops_lines

    spec = load_model(args.model)
    g = spec.graph
    if args.ops:
        from parsim.shard.graph import ops_frame

        frame = ops_frame(g, spec.shard)
        if args.json:
            _print_json(frame.to_dict(orient="records"))
        else:
            _print_lines(ops_lines(spec, frame))
        return 0
    if args.json:
        _print_json({"name": spec.name, "training": spec.training.__dict__, "graph": g.to_dict(),
                     "totals": g.totals(), "manual_stages": spec.manual_stages})
        return 0
    _print_lines(model_lines(spec))
    return 0


def cmd_cluster(args) -> int:
    from parsim.hardware import load_cluster
    from parsim.report.cli_text import cluster_lines

    d = load_cluster(args.cluster).describe()
    if args.json:
        _print_json(d)
        return 0
    _print_lines(cluster_lines(d))
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

    _print_lines(coverage_lines(models), file)


def cmd_simulate(args) -> int:
    from parsim.fileio import check_output, write_json, write_text
    from parsim.hardware import load_cluster
    from parsim.model.spec import load_model
    from parsim.report.cli_text import simulate_lines
    from parsim.report.timeline import action_frame, chrome_trace
    from parsim.search.resolve import resolve_config
    from parsim.sim import simulate
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

        plan, spec = load_plan_and_model(args.model)
        stale = model_changed(plan, args.model)
        if stale:          # a what-if is allowed: the plan's config, priced on the model as it is now
            print("parsim: note: " + stale.replace("; plan again", "; priced on the model as it is now"),
                  file=sys.stderr)
        cluster = load_cluster(args.cluster or plan.cluster)
        compute = _compute_model(args, cluster, spec)
        cfg = plan.config
    else:
        cluster = load_cluster(args.cluster or DEFAULT_CLUSTER)
        spec = _fp8(load_model(args.model), args)
        compute = _compute_model(args, cluster, spec)
        cfg = resolve_config(spec, cluster, compute, dp=args.dp, pp=args.pp, microbatches=args.microbatches,
                             schedule=args.schedule, chunks=args.chunks, split=args.split, placement=args.placement,
                             tp=args.tp, tp_layout=args.tp_layout, recompute=args.recompute, zero=args.zero,
                             cp=args.cp, tp_comm_overlap=args.tp_comm_overlap, cp_mode=args.cp_mode, ep=args.ep,
                             ep_overlap=args.ep_overlap, etp=args.etp)
    est = simulate(spec.graph, spec.training, cluster, cfg, compute, algorithm=args.algorithm, strategies=spec.shard)
    step, memory = profiled_intervals(spec, cluster, cfg, compute, algorithm=args.algorithm)
    est = dataclasses.replace(est, step_interval=step, memory_interval=memory)
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
        _print_json(est.to_json())
        _print_coverage([(args.profile, compute)], sys.stderr)
        return 0
    _print_lines(simulate_lines(spec, cluster, est, args.grid))
    _print_coverage([(args.profile, compute)])
    return 0


def _strategy_rows(spec, cluster, cfg) -> list[dict]:
    from parsim.shard.graph import strategy_summary
    from parsim.shard.prepare import auto_memory_bytes, layout_strategies

    patterns = layout_strategies(spec.graph, cfg.tp, cfg.tp_layout, spec.shard, cluster, spec.training,
                                 cfg.microbatch_size(spec.training.global_batch_size),
                                 auto_memory_bytes(cluster, cfg.pp), cfg.etp)
    return [{"op": name, "strategy": str(strategy), "layers": n}
            for name, strategy, n in strategy_summary(spec.graph, patterns)]


def _fp8(spec, args):
    """The model with FP8 GEMMs where --fp8 asks for them (parsim.model.fp8)."""
    from parsim.model.spec import with_fp8

    return with_fp8(spec) if getattr(args, "fp8", False) else spec


def _tp_flags(p) -> None:
    from parsim.model.spec import TP_LAYOUTS, ZERO_STAGES
    from parsim.plan import CP_MODES

    p.add_argument("--tp", type=positive_int_arg, help="tensor-parallel group size")
    p.add_argument("--cp", type=positive_int_arg,
                   help="context-parallel group size: each rank holds s/cp tokens of a sequence, attention by a "
                        "K,V ring (models with attention; plan: searched unless given)")
    p.add_argument("--ep", type=positive_int_arg,
                   help="expert-parallel group size (mixtures of experts): each rank holds E/ep routed experts of "
                        "every MoE layer, tokens exchanged by all-to-alls; ep x etp divides tp x cp x dp (MoE "
                        "Parallel Folding) and ep the experts (plan: searched unless given)")
    p.add_argument("--etp", type=positive_int_arg,
                   help="expert tensor-parallel size with tp > 1 (Megatron-Core's --expert-tensor-parallel-size): "
                        "1, the routed experts whole on each rank beside attention's tp (default, as NVIDIA's MoE "
                        "recipes run), or tp, split as attention is (plan: searches both unless given)")
    p.add_argument("--ep-overlap", action="store_true",
                   help="ep > 1: hide each MoE layer's all-to-alls under the compute of the adjacent backward (forward) "
                        "of another micro-batch, as DeepSeek-V3's DualPipe pairs them (default: exposed)")
    p.add_argument("--tp-layout", choices=TP_LAYOUTS,
                   help="operator strategies for tp > 1: megatron, megatron-sp, or the model's shard: section")
    from parsim.model.recompute import MODES

    p.add_argument("--recompute", nargs="?", const="full", choices=MODES, default=None,
                   help="activation recomputation: none, selective (the core attention only, Korthikanti et al. "
                        "2022; Megatron's default), or full (alone: full); plan: searches all three unless given")
    p.add_argument("--no-recompute", dest="recompute", action="store_const", const="none",
                   help="no activation recomputation (--recompute none)")
    p.add_argument("--fp8", action="store_true",
                   help="Linear GEMMs in FP8 beside bf16, as Transformer Engine runs them (training.fp8: true; "
                        "a bf16 model on a device with an fp8 peak)")
    p.add_argument("--tp-comm-overlap", action=argparse.BooleanOptionalAction, default=None,
                   help="tp > 1 with megatron-sp: overlap the tensor-parallel collectives with the adjacent GEMMs "
                        "(Megatron-Core's --tp-comm-overlap; plan: tries both where it applies unless given)")
    p.add_argument("--cp-mode", choices=CP_MODES,
                   help="cp > 1: ring (K,V passed around a ring, overlapped) or allgather (K,V all-gathered, "
                        "exposed: Llama 3); plan: tries both unless given")
    p.add_argument("--zero", type=int, choices=ZERO_STAGES,
                   help="ZeRO stage over the dp ranks: 0 none, 1 optimizer state, 2 and gradients, 3 and "
                        "parameters (plan: searched unless given)")


def cmd_plan(args) -> int:
    from parsim.cost.compute import AnalyticalCompute, check_profile_ep, tp_compute_models
    from parsim.fileio import check_output, write_json
    from parsim.hardware import load_cluster
    from parsim.inputs import parse_bytes
    from parsim.model.spec import load_model
    from parsim.plan import plan_from_candidate
    from parsim.report.cli_text import plan_lines, plan_result_json
    from parsim.search.noise import reranker
    from parsim.search.planner import Constraints, plan

    check_output(args.output, "-o")
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
        spec = _fp8(load_model(args.model), args)
        compute = _compute_model(args, cluster, spec)
    tp_compute = tp_compute_models(args.tp_profile, AnalyticalCompute.for_training(cluster.device, spec.training))
    profiled_ep = getattr(getattr(compute, "table", None), "ep", 1)      # an --ep profile prices its own ep only
    if profiled_ep > 1:
        check_profile_ep(compute, args.ep or profiled_ep)
    result = plan(spec, cluster, compute, Constraints(dp=args.dp, pp=args.pp, microbatches=args.microbatches,
                                                      schedule=args.schedule, max_memory_bytes=cap, top=args.top,
                                                      tp=args.tp, tp_layout=args.tp_layout, recompute=args.recompute,
                                                      zero=args.zero, cp=args.cp,
                                                      ep=args.ep or (profiled_ep if profiled_ep > 1 else None),
                                                      ep_overlap=args.ep_overlap, etp=args.etp,
                                                      tp_comm_overlap=args.tp_comm_overlap, cp_mode=args.cp_mode),
                  progress=None if not args.json else False, tp_compute=tp_compute,
                  rerank=reranker(spec, cluster, compute, tp_compute))
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
                           tp_compute.get((chosen.config.tp, chosen.config.tp_layout), compute), validation)
    strategies = _strategy_rows(spec, cluster, chosen.config) if chosen.config.tp > 1 else []
    if args.json:
        _print_json(plan_result_json(result, plan_json, strategies, used))
        return 0
    _print_lines(plan_lines(spec, cluster, result, strategies))
    if given is not None:
        from parsim.export.commands import better_lines
        _print_lines(better_lines(given, chosen))
    _print_coverage(used)
    if args.output:
        print(f"wrote {args.output}")
    if args.report:
        print(f"wrote {os.path.join(args.report, 'report.html')}")
    return 0


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


def _write_plan_report(folder, spec, cluster, result, compute, validation) -> None:
    """DIR/report.html (parsim.report.html), with the pick simulated again to keep its timeline."""
    from parsim.fileio import write_text
    from parsim.report.cli_text import plan_header, plan_rows
    from parsim.report.html import plan_report
    from parsim.sim import simulate

    est = simulate(spec.graph, spec.training, cluster, result.chosen.config, compute, strategies=spec.shard)
    page = plan_report(result, model=spec.name, cluster=cluster.spec, header=plan_header(spec, cluster, result),
                       rows=plan_rows(result, spec.graph.moe), names=spec.graph.names, estimate=est, validation=validation)
    os.makedirs(folder, exist_ok=True)
    write_text(os.path.join(folder, "report.html"), page)


def cmd_run(args) -> int:
    from parsim.exec.launch import launch
    from parsim.exec.train import check_run
    from parsim.run import options_from

    plan, _, _ = check_run(options_from(args))    # bad input fails here, once, before any process starts
    nproc = args.nproc or plan.config.world_size
    if nproc != plan.config.world_size:
        raise InputError(f"{args.plan}: parallel: the plan needs dp x pp x cp x tp = {plan.config.world_size} ranks; "
                         f"use --nproc {plan.config.world_size}")
    from parsim.run import worker_argv

    return launch(worker_argv(args), nproc, args.timeout)


def cmd_profile(args) -> int:
    import json

    from parsim.fileio import check_output
    from parsim.model.spec import load_model
    from parsim.profile.layers import check_ep_flags, launch_profilers
    from parsim.profile.rounds import RoundsPolicy
    from parsim.report.cli_text import profile_lines

    spec = load_model(args.model)          # bad input fails here, once
    sizes = args.microbatch_sizes
    if sizes[0] < spec.graph.min_microbatch:
        raise InputError(f"--microbatch-sizes: {spec.graph.min_microbatch_reason}; start at {spec.graph.min_microbatch}")
    out = args.output or f"{spec.name}.profile.json"
    check_output(out, "-o")
    if args.tp > 1 and args.nproc % args.tp:
        raise InputError(f"--tp {args.tp}: the {args.nproc} processes (--nproc) must form whole groups of {args.tp}")
    check_ep_flags(spec, args.ep, args.tp, args.nproc, args.model)
    policy = RoundsPolicy(args.repeats, args.min_rounds, args.max_rounds, args.target, args.budget,
                          args.noise_threshold)
    code = launch_profilers(args.model, sizes, out, args.nproc, policy, args.device, args.threads,
                            tp=args.tp, tp_layout=args.tp_layout, ep=args.ep)
    if code:
        return code
    with open(out) as f:
        table = json.load(f)
    disturbed = table.get("rounds", {}).get("disturbed", [])
    if args.json:
        _print_json(table)
    else:
        _print_lines(profile_lines(spec, table, sizes, args.nproc, out))
    if disturbed and args.strict:
        raise InputError(f"--strict: {out}: the host was disturbed while profiling ({'; '.join(disturbed)}); "
                         "profile again on a quiet machine, or leave out --strict to keep it flagged")
    return 0


def cmd_profile_comm(args) -> int:
    from parsim.fileio import check_output
    from parsim.hardware.cluster import measured_dtypes
    from parsim.profile.comm import launch_profile_comm

    check_output(args.output, "-o")
    measured_dtypes(args.dtypes)
    code = launch_profile_comm(args.output, args.nproc, args.name, args.repeats, args.dtypes, quiet=args.json,
                               threads=args.threads)
    if code == 0 and args.strict:
        with open(args.output) as f:
            seen = [line[len("# DISTURBED: "):].strip() for line in f if line.startswith("# DISTURBED: ")]
        if seen:
            raise InputError(f"--strict: {args.output}: the host was disturbed while measuring ({'; '.join(seen)}); "
                             "measure again on a quiet machine, or leave out --strict to keep it flagged")
    if code == 0 and args.json:
        from parsim.hardware import load_cluster
        _print_json(load_cluster(args.output).describe())
    return code


def cmd_profile_device(args) -> int:
    import shlex

    from parsim.fileio import check_output
    from parsim.profile.device_yaml import run

    check_output(args.output, "-o")
    given = [("--tables", args.tables), ("--links", args.links), ("--peak", args.peak)]
    command = shlex.join(["parsim", "profile-device", "-o", args.output, "--device", args.device, "--name", args.name]
                         + [x for flag, value in given if value for x in (flag, value)]
                         + (["--quick"] if args.quick else []) + ["--repeats", str(args.repeats)])
    tables = run(args.device, args.output, args.name, command, args.tables, args.links, args.peak, args.quick,
                 args.repeats, args.budget_minutes * 60, args.threads,
                 log=(lambda line: print(line, file=sys.stderr)) if args.json else print)
    if args.json:
        from parsim.hardware import load_cluster
        _print_json({"profile": args.output, "tables": tables, "cluster": load_cluster(args.output).describe()})
    else:
        print(f"wrote {args.output} (kernel tables in {tables})")
    return 0


def cmd_profile_data(args) -> int:
    from parsim.profile.data import check_target, section_text, time_loader, write_section
    from parsim.report.cli_text import profile_data_line

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
        print(profile_data_line(timing, args.repeats, args.output))
    return 0


def cmd_validate(args) -> int:
    from parsim.report.cli_text import validate_lines
    from parsim.validation import validate

    if args.profile:
        profiles = {1: args.profile}
    else:                     # profile as the runs will run: alone, and with every core busy; before each pass
        from parsim.hardware import load_cluster
        from parsim.model.spec import load_model
        from parsim.validation import measure_this_machine, sizes_to_profile
        spec = load_model(args.model)
        per_node = load_cluster(args.cluster).devices_per_node
        from parsim.validation_sets import is_set_file
        # a set file is held out: only its own sizes (never profiled in development) unless asked
        asked = args.microbatch_sizes if args.microbatch_sizes is not None else \
            ([] if is_set_file(args.set) else [2, 4, 8, 16, 32])
        sizes = sizes_to_profile(spec, set(asked), args.set)
        once = args.profile_once or args.passes == 1

        taken = {}

        def profiles(k):      # validate asks before each pass
            k = 0 if once else k
            if k not in taken:
                where = args.out if once else os.path.join(args.out, f"profiles.pass{k + 1}")
                taken[k] = measure_this_machine(args.model, spec, sizes, per_node, where,
                                                collectives=not args.keep_collectives,
                                                log=lambda line: print(line, file=sys.stderr))
            return taken[k]
    log = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if args.json else print
    out = validate(args.model, args.cluster, profiles, args.out, args.steps, args.set, args.timeout, args.passes,
                   log=log, results_root=None if args.no_results else args.results)
    table = out.pop("table")
    if args.json:
        _print_json(out)
        return 0
    _print_lines(validate_lines(table, out, args.out))
    return 0


def cmd_calibrate(args) -> int:
    from parsim.cost.compute import load_profile_table
    from parsim.fileio import check_output, write_text
    from parsim.hardware import load_cluster
    from parsim.model.spec import load_model
    from parsim.profile.calibrate import calibrate, profile_yaml
    from parsim.report.cli_text import calibrate_lines

    check_output(args.output, "-o")
    if args.published:
        return _calibrate_published(args)
    if args.profile is None or args.model is None:
        raise InputError("calibrate: give a layer profile and --model (fit to layer timings), or --published "
                         "FIGURES.yaml (fit to published end-to-end figures)")
    if args.fit or args.rows:
        raise InputError("calibrate: --fit and --rows go with --published FIGURES.yaml")
    spec = load_model(args.model)
    cluster = load_cluster(args.cluster)
    table = load_profile_table(args.profile)
    device, report = calibrate(spec.graph, table, cluster.device, spec.training.dtype)
    if args.output:
        write_text(args.output, profile_yaml(cluster.profile, device, args.profile))
    if args.json:
        _print_json(report)
        return 0
    _print_lines(calibrate_lines(cluster.profile.name, args.profile, report))
    if args.output:
        print(f"wrote {args.output}")
    return 0


def _calibrate_published(args) -> int:
    """``parsim calibrate --published FIGURES --cluster PROFILE -o OUT``: fit the fields the
    figures file's calibration section names for PROFILE (or --fit) on its rows (or --rows), and
    write the profile with them and their provenance (parsim.profile.fit_published)."""
    import shlex

    from parsim.fileio import write_text
    from parsim.hardware.cluster import profile_path
    from parsim.profile.fit_published import fit_profile, provenance
    from parsim.profile.published import load_figures

    if args.profile is not None or args.model is not None:
        raise InputError("calibrate --published: a layer profile and --model belong to the other mode; drop them")
    figures = load_figures(args.published)
    name = args.cluster
    if ":" in name or name.endswith((".yaml", ".yml", ".json")):
        raise InputError(f"--cluster {name}: with --published, name a shipped profile (e.g. dgx-a100)")
    source = profile_path(name)
    cal = figures.calibration(name)
    fields = tuple(args.fit.split(",")) if args.fit else (cal.fit if cal else ())
    rows = tuple(args.rows.split(",")) if args.rows else (cal.rows if cal else ())
    if not fields or not rows:
        raise InputError(f"{args.published}: calibration.{name}: missing; add fit: and rows: for {name}, or give "
                         "--fit and --rows")
    text, values, priced = fit_profile(figures, source, name, fields, rows)
    command = "parsim calibrate --published " + shlex.join([args.published, "--cluster", name]
                                                           + (["--fit", args.fit] if args.fit else [])
                                                           + (["--rows", args.rows] if args.rows else [])
                                                           + (["-o", args.output] if args.output else []))
    for field, value in values.items():
        print(f"{name}: {field} = {value:.4g}")
    for p in priced:
        print(f"  {p.figure.id}: measured {p.figure.measured:g} {p.figure.metric}, predicted {p.predicted:.4g} "
              f"({p.error:+.1%})")
    if args.output:
        write_text(args.output, provenance(text, values, priced, args.published, command))
        print(f"wrote {args.output}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from parsim.export.commands import add_from_options as _from_flags, cmd_export
    from parsim.profile.rounds import RoundsPolicy

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
    p.add_argument("model", help="model.yaml, a plan.json from `parsim plan -o`, or with --from a framework's config")
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
    _from_flags(p)
    from parsim.cost.comm import ALGORITHMS
    p.add_argument("--algorithm", choices=ALGORITHMS, default="auto",
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
    p.add_argument("model", help="model.yaml, or with --from a framework's config")
    p.add_argument("--cluster", default=DEFAULT_CLUSTER, help=f"cluster (default {DEFAULT_CLUSTER})")
    p.add_argument("--dp", type=positive_int_arg)
    p.add_argument("--pp", type=positive_int_arg)
    p.add_argument("--microbatches", type=positive_int_arg)
    p.add_argument("--schedule", choices=SCHEDULE_CHOICES)
    _tp_flags(p)
    p.add_argument("--max-memory", help="memory per device, e.g. 24GiB, taken as given (default: the device's usable "
                                        "memory: its capacity less the profile's memory_reserved)")
    _from_flags(p)
    p.add_argument("--top", type=positive_int_arg, default=10, help="rows in the ranked table")
    p.add_argument("--profile", help="layer-profile YAML: use the profiled cost model")
    p.add_argument("--tp-profile", action="append",
                   help="a profile of tensor-parallel shards (parsim profile --tp): prices that tp's candidates; "
                        "repeatable")
    p.add_argument("-o", "--output", help="write the chosen plan as plan.json")
    p.add_argument("--report", metavar="DIR",
                   help="write DIR/report.html, one self-contained page: the pick, the explanation, the table, "
                        "the pick's Gantt chart, memory and bubble, and its expected error (--validation)")
    p.add_argument("--validation", metavar="FILE",
                   help="a validation.json from parsim validate: the report shows its errors")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("profile", help="time each layer's forward and backward per micro-batch size")
    p.add_argument("model", help="model.yaml")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--microbatch-sizes", type=rising_sizes_arg, default="1,2,4,8,16,32")
    policy = RoundsPolicy()
    p.add_argument("--repeats", type=positive_int_arg, default=policy.repeats,
                   help=f"timed repeats per size and round, after one warm-up (their median is the round's; "
                        f"default {policy.repeats})")
    p.add_argument("--min-rounds", type=positive_int_arg, default=policy.min_rounds,
                   help=f"rounds at least: each measures every size once, interleaved (default {policy.min_rounds})")
    p.add_argument("--max-rounds", type=positive_int_arg, default=policy.max_rounds,
                   help=f"rounds at most (default {policy.max_rounds})")
    p.add_argument("--target", type=nonnegative_float_arg, default=policy.target,
                   help="stop once every size's forward and backward chain is known within this, relative, at 90%% "
                        f"(default {policy.target})")
    p.add_argument("--budget", type=positive_float_arg, default=policy.budget_s,
                   help=f"stop after this many seconds of rounds even if not that precise (default {policy.budget_s:g})")
    p.add_argument("--strict", action="store_true",
                   help="refuse (exit 2) a profile the canary or the host's counters found disturbed")
    p.add_argument("--threads", type=positive_int_arg, default=1, help="compute threads, as in a run (default 1)")
    p.add_argument("--nproc", type=positive_int_arg, default=2,
                   help="profilers running at once, as the ranks of a run share the machine (default 2)")
    p.add_argument("--tp", type=positive_int_arg, default=1,
                   help="profile the tensor-parallel shards (groups of tp of the --nproc processes)")
    p.add_argument("--tp-layout", choices=("megatron", "megatron-sp"), default="megatron",
                   help="a layout the executor runs")
    p.add_argument("--ep", type=positive_int_arg, default=1,
                   help="profile MoE layers with their experts split over groups of ep of the --nproc processes, "
                        "the token all-to-alls included (prices plans of that ep)")
    p.add_argument("--noise-threshold", type=nonnegative_float_arg, default=policy.noise_threshold,
                   help="flag an entry whose 90%% interval reaches further than this from its value "
                        f"(default {policy.noise_threshold})")
    p.add_argument("-o", "--output", help="profile file (default MODEL_NAME.profile.json)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("profile-comm", help="measure links, collectives and the device; write a cluster profile")
    p.add_argument("--nproc", type=positive_int_arg, default=2, help="processes on this machine (default 2)")
    p.add_argument("-o", "--output", default="measured-cluster.yaml")
    p.add_argument("--name", default="local-cpu", help="the profile's name")
    p.add_argument("--repeats", type=positive_int_arg, default=9)
    p.add_argument("--dtypes", default="fp32,bf16",
                   help="dtypes to fit the all-reduce and measure the overlap in, fp32 first (default fp32,bf16)")
    p.add_argument("--threads", type=positive_int_arg, default=1,
                   help="compute threads per rank, as in a run (default 1); the interaction of collectives and "
                        "compute is recorded at this count")
    p.add_argument("--strict", action="store_true",
                   help="refuse (exit 2) a profile the canary or the host's counters found disturbed")
    p.add_argument("--json", action="store_true", help="print the measured profile as JSON")
    p.set_defaults(func=cmd_profile_comm)

    p = sub.add_parser("profile-device", help="time GEMMs, convolutions, memory and launches on this device; "
                                              "write kernel tables and a hardware profile")
    p.add_argument("-o", "--output", required=True, help="the hardware profile YAML to write")
    p.add_argument("--device", choices=("cpu", "cuda", "npu"), default="cpu")
    p.add_argument("--name", default="measured-device", help="the profile's name")
    p.add_argument("--tables", help="folder for gemm.csv, conv.csv, device.csv (default: OUTPUT without .yaml, "
                                    "plus .kernels)")
    p.add_argument("--links", help="a profile from parsim profile-comm: its node, network and collective sections "
                                   "(default: one device)")
    p.add_argument("--peak", help="datasheet peaks in TFLOPS, e.g. fp16=989,fp32=67 (default: the best GEMM measured)")
    p.add_argument("--quick", action="store_true", help="a small grid (seconds), for a first look or a test")
    p.add_argument("--repeats", type=positive_int_arg, default=5, help="timed repeats per operation (default 5)")
    p.add_argument("--threads", type=positive_int_arg, default=1,
                   help="CPU: intra-op threads, as a rank of a run has (default 1)")
    p.add_argument("--budget-minutes", type=positive_float_arg, default=30.0,
                   help="leave out the largest GEMMs until the estimate fits (default 30)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_profile_device)

    p = sub.add_parser("profile-data", help="time the executor's input loader; write input_pipeline into a cluster profile")
    p.add_argument("-o", "--output", required=True, help="the cluster profile YAML to update")
    p.add_argument("--data", help="a cifar-10-batches-bin folder (default: synthetic CIFAR-shaped images)")
    p.add_argument("--samples", type=positive_int_arg, default=2048, help="samples per repeat (default 2048)")
    p.add_argument("--batch", type=positive_int_arg, default=32)
    p.add_argument("--repeats", type=positive_int_arg, default=5)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_profile_data)

    p = sub.add_parser("calibrate", help="fit the analytical model's efficiencies to a layer profile, or a "
                                         "hardware profile's fields to published end-to-end figures (--published)")
    p.add_argument("profile", nargs="?", help="layer profile from `parsim profile`")
    p.add_argument("--model", help="the model.yaml the profile measured")
    p.add_argument("--cluster", default="local-cpu", help="the profile whose device to calibrate")
    p.add_argument("-o", "--output", help="write the calibrated cluster profile YAML")
    p.add_argument("--published", metavar="FIGURES", help="a published-figures YAML (results/published/figures.yaml): "
                                                          "fit the fields its calibration section names for --cluster")
    p.add_argument("--fit", help="with --published: comma-separated profile fields to fit, instead of the file's")
    p.add_argument("--rows", help="with --published: comma-separated figure ids to fit on, instead of the file's")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("validate", help="predict plans, run them, and compare")
    p.add_argument("model", nargs="?", default="examples/resnet50_cifar10_local.yaml")
    p.add_argument("--cluster", default="local-cpu")
    p.add_argument("--profile", help="one layer profile for every plan and pass, and the cluster's collectives as "
                                     "its profile has them (default: before each pass, profile the model alone and "
                                     "with every core busy, price each plan with the matching one, and measure the "
                                     "collectives with profile-comm)")
    p.add_argument("--profile-once", action="store_true",
                   help="profile before the first pass only, and price every pass with that")
    p.add_argument("--keep-collectives", action="store_true",
                   help="price collectives from the cluster profile as it is, without measuring them first")
    p.add_argument("--microbatch-sizes", type=rising_sizes_arg, default=None,
                   help="sizes to profile when --profile is not given, besides the plans' own (the planner's "
                        "pick is kept to the profiled sizes; default 2,4,8,16,32, none for a set file)")
    p.add_argument("--set", type=validation_set_arg, default="default",
                   help="plans to run: default (the full set), quick (three), schedules (pp=2 m=4 under 1F1B, "
                        "interleaved and ZB-H1), zero (dp=2 m=2 under ZeRO 0-3), or a set file such as "
                        "results/heldout/2026-11-27.yaml (its plans for the model)")
    p.add_argument("--steps", type=positive_int_arg, default=12, help="steps per run, 3 of them warm-up (default 12)")
    p.add_argument("--passes", type=positive_int_arg, default=1,
                   help="run the whole set this many times in turn; medians over passes, spread reported")
    p.add_argument("--timeout", type=positive_float_arg, default=300.0, help="seconds a run may take (default 300)")
    p.add_argument("--out", default="runs/validate", help="every output: runs, plots, plans (git-ignored)")
    p.add_argument("--results", default="results",
                   help="the evidence, to commit: validation.json, the CSVs and the profiles that priced them, "
                        "under RESULTS/<date>-<cpu>/<set>/<model>/ (parsim.report.accuracy reads them)")
    p.add_argument("--no-results", action="store_true", help="write no evidence copy (a trial run)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_validate)

    from parsim.export import TARGETS
    p = sub.add_parser("export", help="write a plan as MindSpore's, Megatron-LM's, torchtitan's or DeepSpeed's settings")
    p.add_argument("plan", help="a plan.json from `parsim plan -o`")
    p.add_argument("--to", required=True, choices=TARGETS, help="the framework to launch it with")
    p.add_argument("-o", "--output", help="the file to write (default: PLAN.TARGET.{py,args,toml,json}; - prints it)")
    p.set_defaults(func=cmd_export)

    from parsim.run import add_run_options
    p = sub.add_parser("run", help="run a plan with torch.distributed on this machine and measure it")
    add_run_options(p)
    p.add_argument("--nproc", type=positive_int_arg, help="processes to start (default: the plan's dp x pp x tp x cp)")
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

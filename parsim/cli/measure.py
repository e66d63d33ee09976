"""The commands that measure this machine and check predictions: run, profile, profile-comm,
profile-data, validate, calibrate."""

from __future__ import annotations

import os
import sys

from parsim.cli.common import load_model_checked, print_json, print_lines
from parsim.errors import InputError

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
    from parsim.profile.layers import check_ep_flags, launch_profilers
    from parsim.profile.rounds import RoundsPolicy
    from parsim.report.cli_text import profile_lines

    spec = load_model_checked(args.model)          # bad input fails here, once
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
        print_json(table)
    else:
        print_lines(profile_lines(spec, table, sizes, args.nproc, out))
    if disturbed and args.strict:
        raise InputError(f"--strict: {out}: the host was disturbed while profiling ({'; '.join(disturbed)}); "
                         "profile again on a quiet machine, or leave out --strict to keep it flagged")
    return 0


def cmd_profile_comm(args) -> int:
    from parsim.fileio import check_output
    from parsim.hardware.collectives import measured_dtypes
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
        print_json(load_cluster(args.output).describe())
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
        print_json({"profile": args.output, "tables": tables, "cluster": load_cluster(args.output).describe()})
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
        print_json({"per_sample_s": list(timing.per_sample_s), "median_s": timing.median_s,
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
        from parsim.validation import measure_this_machine, sizes_to_profile
        spec = load_model_checked(args.model)
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
        print_json(out)
        return 0
    print_lines(validate_lines(table, out, args.out))
    return 0


def cmd_calibrate(args) -> int:
    from parsim.cost.compute import load_profile_table
    from parsim.fileio import check_output, write_text
    from parsim.hardware import load_cluster
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
    spec = load_model_checked(args.model)
    cluster = load_cluster(args.cluster)
    table = load_profile_table(args.profile)
    device, report = calibrate(spec.graph, table, cluster.device, spec.training.dtype)
    if args.output:
        write_text(args.output, profile_yaml(cluster.profile, device, args.profile))
    if args.json:
        print_json(report)
        return 0
    print_lines(calibrate_lines(cluster.profile.name, args.profile, report))
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

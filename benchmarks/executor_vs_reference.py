"""parsim's executor against plain torch (issue 41 item 4), measured in one sitting: for each plan,
``parsim run`` (A) and ``benchmarks/reference_torch.py`` (B, plain DDP or
torch.distributed.pipelining) alternate A B A B ... for N pairs on the same plan, each run's
figure its median step after warm-up (the slowest rank's, both ways).  Per plan it prints the
ratio executor / reference, the geometric mean of the pairs' ratios, with a 95% bootstrap
interval over the pairs (parsim.report.errorbars.paired_ratio): an interval that excludes 1
is a gap; one that holds 1 is not shown to be.

    # one plan (parsim simulate/plan -o, or a validate folder's <label>.plan.json):
    python benchmarks/executor_vs_reference.py runs/validate/pp2-1f1b-m4.plan.json
    # every 2-rank plan of a validate folder that the reference runs (dp=2, or pp=2 GPipe/1F1B):
    python benchmarks/executor_vs_reference.py runs/heldout-c/resnet18_seq_w24
    # every such plan of a held-out set file (each planned here with `parsim simulate`):
    python benchmarks/executor_vs_reference.py results/heldout/2026-11-28.yaml --pairs 4 --steps 12

Writes ``<source>.json`` and ``<source>.txt`` (the source's name without its extension) under
``results/<date>-<cpu>/executor-vs-reference/`` (``--out`` elsewhere): every run's median and
steps, the 1-minute load average before each run (a busy host shows there), the host, the
command and the time.  The executor runs with ``--force`` (a plan made on another day or machine
still runs: both sides run the same plan, its prediction is not used).  Run it on a quiet machine:
the figures are timings.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import reference_torch  # noqa: E402  (benchmarks/, beside this file)

from parsim.fileio import write_json, write_text  # noqa: E402
from parsim.hardware.machine import this_machine  # noqa: E402
from parsim.report.errorbars import LEVEL, N_BOOT, SEED, paired_ratio  # noqa: E402


def cpu_slug(cpu_model: str) -> str:
    """The results folder's machine part: vendor and family of the CPU model, e.g. "AMD EPYC 9B14"
    -> "amd-epyc", "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz" -> "intel-xeon"."""
    words = re.sub(r"\((R|TM)\)|\bCPU\b|@.*", " ", cpu_model, flags=re.I).split()
    return "-".join(w.lower() for w in words[:2]) or "unknown-cpu"


def plans_from(source: str, workdir: str) -> list[tuple[str, str]]:
    """(label, plan path) of every plan the reference runs: ``source`` a plan.json, a validate
    folder (its *.plan.json), or a held-out set file, each of whose 2-rank plans is planned here
    with the analytical model on local-cpu (the ranks' layout is the set's; only the split
    could differ from a profiled plan's)."""
    if source.endswith((".yaml", ".yml")):
        from parsim.model.spec import load_model
        from parsim.validation_sets import load_plan_set

        out = []
        for model, plans in load_plan_set(source).models:
            name = load_model(model).name
            for p in plans:
                if p.dp * p.pp != 2 or p.ep != 1:          # one process, or experts split: no reference
                    continue
                path = os.path.join(workdir, f"{name}.{p.label}.plan.json")
                subprocess.run([sys.executable, "-m", "parsim.cli", "simulate", model, "--cluster", "local-cpu",
                                "--dp", str(p.dp), "--pp", str(p.pp), "--microbatches", str(p.microbatches),
                                "--schedule", p.schedule, "-o", path, "--json"], check=True, stdout=subprocess.DEVNULL)
                if _runs(path):
                    out.append((f"{name}/{p.label}", path))
        return out
    paths = sorted(glob.glob(os.path.join(source, "*.plan.json"))) if os.path.isdir(source) else [source]
    chosen = [(os.path.basename(p).removesuffix(".json").removesuffix(".plan"), p) for p in paths if _runs(p)]
    if not chosen:
        raise SystemExit(f"{source}: no plan the reference runs (dp=2, or pp=2 with GPipe or 1F1B)")
    return chosen


def _runs(plan_path: str) -> bool:
    with open(plan_path) as f:
        return reference_torch.supported(json.load(f)["parallel"])


def run_executor(plan: str, steps: int, warmup: int) -> dict:
    """One ``parsim run`` of the plan: its median step and its timed steps (slowest rank each)."""
    with tempfile.TemporaryDirectory(prefix="parsim-run-") as out:      # its checkpoints go with it
        done = subprocess.run([sys.executable, "-m", "parsim.cli", "run", plan, "--steps", str(steps), "--warmup",
                               str(warmup), "--out", out, "--json", "--force"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        if done.returncode:
            raise SystemExit(f"parsim run {plan} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        with open(os.path.join(out, "measured.json")) as f:
            m = json.load(f)
    return {"step_time_s": m["step_time_s"], "step_times_s": m["step_times_s"][warmup:]}


def run_reference(plan: str, steps: int, warmup: int) -> dict:
    got = reference_torch.run(plan, steps, warmup)
    return {"step_time_s": got["step_time_s"], "step_times_s": got["step_times_s"][warmup:]}


def measure(plans: list[tuple[str, str]], pairs: int, steps: int, warmup: int) -> dict:
    """Per plan, ``pairs`` runs of each, alternated A B A B, one plan after the other."""
    out = {}
    for label, plan in plans:
        runs: dict[str, list] = {"executor": [], "reference": []}
        for i in range(pairs):
            for side in ("executor", "reference"):
                load = os.getloadavg()[0]
                got = run_executor(plan, steps, warmup) if side == "executor" else run_reference(plan, steps, warmup)
                runs[side].append({**got, "loadavg_1min_before": load,
                                   "finished": datetime.datetime.now(datetime.timezone.utc).isoformat()})
                print(f"{label} pair {i + 1}/{pairs} {side}: median step {got['step_time_s']:.4f} s "
                      f"(load {load:.2f})", flush=True)
        ratio, ci = paired_ratio([r["step_time_s"] for r in runs["executor"]],
                                 [r["step_time_s"] for r in runs["reference"]])
        with open(plan) as f:
            parallel = json.load(f)["parallel"]
        out[label] = {"plan": plan, "parallel": parallel, "ratio": ratio, "ratio_ci": list(ci), "runs": runs}
    return out


def report_lines(result: dict) -> list[str]:
    lines = [f"parsim's executor / plain torch (benchmarks/reference_torch.py), {result['pairs']} pairs A B A B, "
             f"{result['steps']} steps ({result['warmup']} warm-up) each; {result['machine']['cpu_model']}, "
             f"{result['machine']['cores']} cores, torch {result['machine']['torch']}; {result['started']} to "
             f"{result['finished']}",
             f"ratio: geometric mean over the pairs of executor median / reference median, [{LEVEL:.0%} bootstrap "
             f"interval over the pairs, {N_BOOT} replicates, seed {SEED}]",
             f"{'plan':40} {'executor s':>11} {'reference s':>12} {'ratio':>7}  interval        max load"]
    for label, p in result["plans"].items():
        med = {side: statistics.median(r["step_time_s"] for r in runs) for side, runs in p["runs"].items()}
        load = max(r["loadavg_1min_before"] for runs in p["runs"].values() for r in runs)
        lo, hi = p["ratio_ci"]
        lines.append(f"{label:40} {med['executor']:11.4f} {med['reference']:12.4f} {p['ratio']:7.3f}  "
                     f"[{lo:.3f}, {hi:.3f}]  {load:8.2f}")
    lines.append("executor s, reference s: the median over the pairs of each run's median step")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="a plan.json, a parsim validate folder, or a held-out set file (*.yaml)")
    ap.add_argument("--pairs", type=int, default=4, help="A B pairs per plan (default 4)")
    ap.add_argument("--steps", type=int, default=12, help="steps a run (default 12, as parsim validate)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps a run, left out (default 3)")
    ap.add_argument("--out", help="folder for the JSON and TXT (default results/<date>-<cpu>/executor-vs-reference)")
    args = ap.parse_args(argv)
    if args.pairs < 1 or args.steps <= args.warmup:
        ap.error("--pairs must be at least 1 and --steps above --warmup")
    machine = this_machine()
    out = args.out or os.path.join("results", f"{machine.date}-{cpu_slug(machine.cpu_model)}", "executor-vs-reference")
    started = datetime.datetime.now(datetime.timezone.utc).isoformat()
    with tempfile.TemporaryDirectory(prefix="executor-vs-reference-") as workdir:
        plans = plans_from(args.source, workdir)
        measured = measure(plans, args.pairs, args.steps, args.warmup)
    given = sys.argv[1:] if argv is None else list(argv)
    result = {"command": " ".join(["python", os.path.relpath(__file__), *given]),
              "source": args.source, "pairs": args.pairs, "steps": args.steps, "warmup": args.warmup,
              "machine": machine.__dict__, "started": started,
              "finished": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "n_boot": N_BOOT, "seed": SEED, "level": LEVEL, "plans": measured}
    lines = report_lines(result)
    os.makedirs(out, exist_ok=True)
    stem = os.path.join(out, os.path.basename(os.path.normpath(args.source)).split(".")[0])
    write_json(stem + ".json", result)
    write_text(stem + ".txt", "\n".join(lines + ["", result["command"]]) + "\n")
    print("\n".join(lines))
    print(f"wrote {stem}.json and {stem}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Byte-for-byte check of parsim's outputs across a restructuring (issue 40).

    python benchmarks/check_outputs_identical.py record BASE_DIR      # before: write every output
    python benchmarks/check_outputs_identical.py compare BASE_DIR     # after: write them again and diff
    python benchmarks/check_outputs_identical.py compare BASE_DIR --quick    # the cases under ~10 s only

Runs, each in a fresh process as a user would:

- ``parsim plan EXAMPLE --json -o plan.json`` on every example in examples/ on the default
  cluster, then ``parsim simulate plan.json --json`` and ``--grid`` (the pick, priced again);
- ``parsim plan --json`` on the large clusters of benchmarks/bench_planner.py --goals;
- ``parsim simulate`` of hand-chosen configurations that exercise every schedule, ZeRO stage,
  tp, cp and ep (JSON and the text with the step x rank grid);
- ``python benchmarks/bench_published.py`` for the published figures (both files).

What differs run to run is removed before the comparison: the planner's ``search_time_s`` and the
"in 0.37 s" of its text; outputs whose numbers differ between two runs of main itself (UNSTABLE,
with the reason) are compared number by number to 0.5%.  ``compare`` prints a unified diff of each
output that changed and exits 1 if any did (the outputs of both runs stay in BASE_DIR and
BASE_DIR.new for a closer look).
The outputs are not committed: write them under /tmp.
"""

from __future__ import annotations

import argparse
import difflib
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARSIM = [sys.executable, "-m", "parsim.cli"]

# the large searches (bench_planner.py --goals and the DeepSeek-V3 case): (model, cluster)
LARGE = [("examples/resnet50_imagenet.yaml", "ascend910:128x8"),
         ("examples/resnet50_imagenet.yaml", "dgx-a100:64x8"),
         ("examples/gpt3_175b.yaml", "dgx-a100:128x8"),
         ("examples/llama3_405b.yaml", "dgx-h100-superpod:2048x8"),
         ("examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8")]
# the examples planned on another cluster than the default (ascend910:1x8: no bf16 units)
CLUSTER = {"gpt3_175b_bf16": "dgx-h100:16x8", "gpt_tiny_local_bf16": "local-cpu:1x2", "llama3_405b": "dgx-h100:64x8",
           "llama3_70b": "dgx-h100:8x8", "llama3_8b": "dgx-h100:1x8", "mixtral_8x7b": "dgx-h100:8x8",
           "qwen3_235b_a22b": "dgx-h100:16x8", "qwen3_30b_a3b": "dgx-h100:2x8",
           "resnet50_cifar10_local_bf16": "local-cpu:1x2", "megatron_39b": "dgx-a100:64x8",
           "deepseek_v3": "dgx-h100:32x8"}
SLOW = {"examples/deepseek_v3.yaml", "examples/gpt3_175b.yaml"}     # over ~10 s each: left out by --quick

# hand-chosen configurations: (name, args after `parsim simulate`)
SIMULATE = [
    ("resnet-pp2-1f1b", ["examples/resnet50_cifar10.yaml", "--pp", "2", "--microbatches", "8", "--schedule", "1f1b"]),
    ("resnet-pp2-gpipe", ["examples/resnet50_cifar10.yaml", "--pp", "2", "--microbatches", "8", "--schedule", "gpipe"]),
    ("resnet-pp4-interleaved", ["examples/resnet50_cifar10.yaml", "--pp", "4", "--microbatches", "8",
                                "--schedule", "interleaved", "--chunks", "2"]),
    ("resnet-pp4-zbh1", ["examples/resnet50_cifar10.yaml", "--pp", "4", "--microbatches", "8", "--schedule", "zbh1"]),
    ("resnet-dp8-zero1", ["examples/resnet50_cifar10.yaml", "--dp", "8", "--pp", "1", "--zero", "1"]),
    ("resnet-dp8-zero2", ["examples/resnet50_cifar10.yaml", "--dp", "8", "--pp", "1", "--zero", "2",
                          "--microbatches", "2"]),
    ("resnet-dp8-zero3", ["examples/resnet50_cifar10.yaml", "--dp", "8", "--pp", "1", "--zero", "3",
                          "--microbatches", "2"]),
    ("resnet-dp4-pp2-zero1-dpinner", ["examples/resnet50_cifar10.yaml", "--dp", "4", "--pp", "2", "--zero", "1",
                                      "--microbatches", "4", "--placement", "dp-inner"]),
    ("resnet-local-cpu", ["examples/resnet50_cifar10_local.yaml", "--cluster", "local-cpu:1x2", "--pp", "2",
                          "--microbatches", "4", "--schedule", "1f1b"]),
    ("gpt3-tp8-pp8-interleaved", ["examples/gpt3_175b.yaml", "--cluster", "dgx-a100:16x8", "--tp", "8", "--pp", "8",
                                  "--microbatches", "16", "--schedule", "interleaved", "--chunks", "2",
                                  "--recompute", "selective"]),
    ("gpt3-tp8-sp-overlap", ["examples/gpt3_175b.yaml", "--cluster", "dgx-a100:16x8", "--tp", "8", "--pp", "16",
                             "--microbatches", "32", "--tp-layout", "megatron-sp", "--tp-comm-overlap",
                             "--recompute", "full"]),
    ("llama8b-cp2-ring", ["examples/llama3_8b.yaml", "--cluster", "dgx-h100:2x8", "--tp", "4", "--cp", "2",
                          "--pp", "2", "--microbatches", "8", "--recompute", "full"]),
    ("llama8b-cp2-allgather", ["examples/llama3_8b.yaml", "--cluster", "dgx-h100:2x8", "--tp", "4", "--cp", "2",
                               "--cp-mode", "allgather", "--pp", "2", "--microbatches", "8"]),
    ("moe-tiny-ep2", ["examples/moe_tiny_local.yaml", "--cluster", "local-cpu:1x2", "--dp", "2", "--ep", "2"]),
    ("gpt-tiny-tp2", ["examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:1x2", "--tp", "2",
                      "--microbatches", "4"]),
    ("gpt-tiny-pp2-zbh1", ["examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:1x2", "--pp", "2",
                           "--microbatches", "4", "--schedule", "zbh1"]),
    ("mlp-semi-auto-tp2", ["examples/mlp_semi_auto.yaml", "--cluster", "local-cpu:1x2", "--tp", "2"]),
    ("mixtral-ep8", ["examples/mixtral_8x7b.yaml", "--cluster", "dgx-h100:8x8", "--ep", "8", "--pp", "4",
                     "--microbatches", "8", "--recompute", "full"]),
    ("mixtral-ep8-overlap", ["examples/mixtral_8x7b.yaml", "--cluster", "dgx-h100:8x8", "--ep", "8", "--pp", "4",
                             "--microbatches", "8", "--recompute", "full", "--ep-overlap"]),
]

_SEARCH_TIME = re.compile(r"(simulated [\d,]+) in [\d.]+ (m?s)")
# Outputs that differ between two runs of main itself, and why: compared number by number to
# 0.5% (a memory margin of 344 MiB moves by 0.75 MiB) or 0.011 in the last printed digit, the
# rest of the text exactly.  DeepSeek-V3's MoE
# layers' saved bytes come out 3,142,991,872 or 3,143,254,016 for layers.4 from one process to
# the next (the same operators each time; parsim.model.extract keys saved storages by their C
# address, _storage_key), so its backward workspace is 8,047,591,424, 8,048,115,712 or
# 8,049,688,576 bytes a stage, PYTHONHASHSEED fixed or not.
UNSTABLE = {"plan-deepseek_v3": "main's memory numbers for DeepSeek-V3 vary run to run "
                                "(saved bytes by storage address)"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _close(a: str, b: str) -> bool:
    """The same text but for numbers within 0.5% (or 0.011) of each other."""
    if _NUMBER.split(a) != _NUMBER.split(b):
        return False
    xs, ys = _NUMBER.findall(a), _NUMBER.findall(b)
    return len(xs) == len(ys) and all(abs(float(x) - float(y)) <= max(5e-3 * abs(float(x)), 0.011)
                                      for x, y in zip(xs, ys))


def _normalise(text: str, kind: str) -> str:
    """What differs run to run removed: the search time, and the checkout's path (the outputs of
    two checkouts are compared)."""
    text = text.replace(ROOT, "<ROOT>")
    if kind == "json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            return text
        if isinstance(obj, dict):
            obj.pop("search_time_s", None)
        return json.dumps(obj, indent=1, sort_keys=True) + "\n"
    return _SEARCH_TIME.sub(r"\1 in _ s", text)


def _tasks(quick: bool) -> list[list[tuple[str, list[str]]]]:
    """Each task: (output name, command) pairs run in turn in one scratch folder (an example's
    simulate reads the plan.json its plan wrote)."""
    tasks = []
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.yaml"))):
        if quick and os.path.relpath(path, ROOT) in SLOW:
            continue
        name = os.path.basename(path)[:-5]
        cluster = ["--cluster", CLUSTER[name]] if name in CLUSTER else []
        tasks.append([(f"plan-{name}.json", PARSIM + ["plan", path, "--json", "-o", "plan.json"] + cluster),
                      (f"plan-{name}-simulate.json", PARSIM + ["simulate", "plan.json", "--json"]),
                      (f"plan-{name}-simulate.txt", PARSIM + ["simulate", "plan.json", "--grid"])])
    for model, cluster in LARGE:
        if quick and model in SLOW:
            continue
        name = f"plan-{os.path.basename(model)[:-5]}-{cluster.replace(':', '-')}.json"
        tasks.append([(name, PARSIM + ["plan", os.path.join(ROOT, model), "--cluster", cluster, "--json"])])
    for name, args in SIMULATE:
        argv = PARSIM + ["simulate", os.path.join(ROOT, args[0])] + args[1:]
        tasks.append([(f"simulate-{name}.json", argv + ["--json"]), (f"simulate-{name}.txt", argv + ["--grid"])])
    if not quick:
        # the repository's figures and fit spec by absolute path: each task runs in a scratch folder
        bench = [sys.executable, os.path.join(ROOT, "benchmarks", "bench_published.py"),
                 "--folder", os.path.join(ROOT, "results", "published"),
                 "--fit", os.path.join(ROOT, "results", "published", "fit.yaml")]
        tasks.append([("bench_published.txt", bench)])
    return tasks


def _names(quick: bool) -> list[str]:
    return sorted(name for task in _tasks(quick) for name, _ in task)


def write_outputs(folder: str, quick: bool, workers: int, only: str = "") -> None:
    os.makedirs(folder, exist_ok=True)
    scratch_root = folder.rstrip("/") + ".scratch"

    def run_task(task):
        scratch = os.path.join(scratch_root, task[0][0])
        os.makedirs(scratch, exist_ok=True)
        for name, argv in task:
            p = subprocess.run(argv, cwd=scratch, capture_output=True, text=True)
            kind = "json" if name.endswith(".json") else "txt"
            text = (_normalise(p.stdout, kind) + f"--- stderr ---\n{_normalise(p.stderr, 'txt')}"
                    f"--- exit {p.returncode}\n")
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
            print(f"  {name}", flush=True)

    env_root = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = ROOT + (os.pathsep + env_root if env_root else "")
    # one hash seed for every run: main's backward workspace of DeepSeek-V3's MoE layers depends on
    # it (8,047,591,424 against 8,048,115,712 bytes a stage under PYTHONHASHSEED 1 and 2)
    os.environ["PYTHONHASHSEED"] = "0"
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(run_task, [task for task in _tasks(quick) if any(only in name for name, _ in task)]))
    shutil.rmtree(scratch_root, ignore_errors=True)


def compare(base: str, new: str, quick: bool) -> int:
    changed, close = 0, []
    names = _names(quick)
    for name in names:
        a_path, b_path = os.path.join(base, name), os.path.join(new, name)
        if not os.path.exists(a_path):
            print(f"{name}: not in {base} (record it first)")
            changed += 1
            continue
        a, b = open(a_path).read(), open(b_path).read()
        unstable = next((why for key, why in UNSTABLE.items() if name.startswith(key)), None)
        if a != b and unstable and _close(a, b):
            close.append(f"{name}: within 0.5% ({unstable})")
        elif a != b:
            changed += 1
            sys.stdout.writelines(difflib.unified_diff(a.splitlines(True), b.splitlines(True), a_path, b_path, n=2))
    for line in close:
        print(line)
    print(f"{len(names) - changed - len(close)} of {len(names)} outputs identical"
          + (f", {len(close)} within 0.5% where main itself varies" if close else "")
          + (f", {changed} differ" if changed else ""))
    return 1 if changed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("record", "compare"))
    ap.add_argument("base", help="folder of the recorded outputs (e.g. /tmp/parsim-baseline)")
    ap.add_argument("--quick", action="store_true", help="leave out the searches over ~10 s and the published rows")
    ap.add_argument("--workers", type=int, default=2, help="processes at once (default 2)")
    ap.add_argument("--only", default="", help="record: only the outputs whose name contains this")
    args = ap.parse_args()
    if args.mode == "record":
        write_outputs(args.base, args.quick, args.workers, args.only)
        return 0
    new = args.base.rstrip("/") + ".new"
    shutil.rmtree(new, ignore_errors=True)
    write_outputs(new, args.quick, args.workers)
    return compare(args.base, new, args.quick)


if __name__ == "__main__":
    sys.exit(main())

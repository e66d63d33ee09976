"""Why GPipe's and ZB-H1's first pipeline stages are priced one stage-output tensor a micro-batch above their
measured peak while 1F1B's are exact (set 2026-12-07d's report, README there): the allocations alive at the measured
peak of each schedule's first stage, by the operator that made them, and where the peak falls.  A diagnosis, in
sample (the model is set 2026-12-07d's, a development set since its report); no pricing changes with it.

Each plan is made by ``parsim simulate ... -o`` and run by ``parsim run`` (2 gloo ranks x 1 thread, 4 steps, the
peak measured on the last warm-up step as every run measures it), with tracehook/sitecustomize.py on the path:
under PARSIM_TRACE_PEAK it makes the executor's measurement also write, per rank, what its peak holds
(torch.profiler's allocation events, as parsim.exec.measure reads them).

    python -W ignore results/2026-12-07e-amd-epyc/first_stage_schedules.py \\
        > results/2026-12-07e-amd-epyc/first-stage-schedules.txt

Read from its output (first-stage-schedules.txt): every schedule's first stage peaks in a MulBackward0 of the MLP's
backward with two micro-batches' saved tensors alive (GPipe's at 66 sequences, 1F1B's and ZB-H1's at 33), and 1F1B's
holds one tensor more: a stage output (aten::add, 1.128 MiB at 33 sequences: 9 adds alive in one micro-batch's group,
8.35 MiB, against 8 in the other, 7.22 MiB, and 8 in each GPipe and ZB-H1 group).  So parsim prices one stage-output
tensor a micro-batch that no schedule's first stage holds (GPipe's and ZB-H1's +0.8% to +1.2%), and 1F1B's extra one
makes its price exact.  Candidates, not yet checked: the measured rise counts the gradient entering the stage's last
layer, which torch's PipelineStage receives into a buffer priced already among the pipeline buffers
(torch_pipeline_buffer_bytes); and 1F1B's unpriced tensor, the output its last forward send keeps alive, as
Schedule1F1B's pending backward sends keep a gradient (the rule's ``held``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

MODEL = "results/heldout/models/llama_relu2_tiny.yaml"
PLANS = [("gpipe", 2), ("1f1b", 4), ("zbh1", 4)]
HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tracehook")
MIB = 2 ** 20


def run(schedule: str, m: int, where: str) -> dict:
    plan = os.path.join(where, f"{schedule}.json")
    subprocess.run([sys.executable, "-m", "parsim.cli", "simulate", MODEL, "--cluster", "local-cpu", "--pp", "2",
                    "--microbatches", str(m), "--schedule", schedule, "-o", plan], check=True, capture_output=True)
    trace = os.path.join(where, schedule)
    env = dict(os.environ, PARSIM_TRACE_PEAK=trace, PYTHONPATH=os.pathsep.join([HOOK, os.getcwd()]))
    subprocess.run([sys.executable, "-m", "parsim.cli", "run", plan, "--steps", "4", "--warmup", "3", "--out",
                    os.path.join(where, f"run-{schedule}")], check=True, capture_output=True, env=env)
    with open(f"{trace}.rank0.json") as f:
        return json.load(f)


def main() -> None:
    with tempfile.TemporaryDirectory() as where:
        for schedule, m in PLANS:
            t = run(schedule, m, where)
            print(f"{schedule} m={m}, first stage: peak {(t['peak_total'] - t['start_total']) / MIB:.2f} MiB above the "
                  f"step's start, at {t['peak_t_us'] / 1e3:.1f} ms, in {t['peak_op'][:120]}")
            by_op: dict[str, list[int]] = defaultdict(list)
            for size, op, _ in t["live"]:
                by_op[op].append(size)
            for op, sizes in sorted(by_op.items(), key=lambda kv: -sum(kv[1]))[:14]:
                shown = ", ".join(f"{s / MIB:.3f}" for s in sorted(set(sizes), reverse=True)[:4])
                print(f"  {sum(sizes) / MIB:8.2f} MiB {len(sizes):4d} alive (sizes {shown} MiB)  {op[:110]}")


if __name__ == "__main__":
    main()

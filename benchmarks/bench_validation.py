"""Prediction accuracy on this machine class: the default validation set, 3 interleaved passes.

    python benchmarks/bench_validation.py [--out runs/bench-validate]

Runs `parsim validate --passes 3` (about 10 minutes on the 2-core machine: profiling with 1 and
2 processes, then 11 plans x 3 passes of 12 steps) and prints the figures against the goals:
step-time MAPE <= 5% and maximum error <= 10%, peak memory within 10%, and the planner's pick
within 5% of the best measured plan.
"""

import json
import subprocess
import sys

if __name__ == "__main__":
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else "runs/bench-validate"
    subprocess.run([sys.executable, "-m", "parsim.cli", "validate", "--passes", "3", "--out", out], check=True)
    with open(f"{out}/validation.json") as f:
        r = json.load(f)
    goals = [("step-time MAPE", r["mape_step_time"], 0.05), ("step-time max error", r["max_error_step_time"], 0.10),
             ("peak-memory max error", r["max_error_peak_memory"], 0.10),
             ("planner's pick vs best measured", r["pick_gap_to_best"], 0.05)]
    for name, value, goal in goals:
        print(f"{name:34s} {value:6.1%}  goal <= {goal:.0%}  {'met' if value <= goal else 'NOT met'}")
    print(f"{'Spearman (throughput)':34s} {r['spearman_throughput']:6.2f}")
    print(f"{'median run-to-run spread':34s} {r['median_run_to_run_spread']:6.1%}")

"""The out-of-sample MAPEs the docs quote to two decimals (bench_published.txt prints one), from the
committed residual table: the development rows, the same without the largest (the +469% row), the
held-out rows, all rows, and how many are beyond 25%.

    python results/2026-12-02d-amd-epyc/mape_from_residuals.py [RESIDUALS.yaml ...]
        (default results/published/residuals.yaml; give `git show REV:results/published/residuals.yaml`
        saved to a file for an earlier state)
"""
import statistics
import sys

import yaml


def summary(path: str) -> str:
    rows = yaml.safe_load(open(path))["rows"]
    dev = sorted(abs(r["error"]) for r in rows if not r.get("held_out"))
    held = [abs(r["error"]) for r in rows if r.get("held_out")]
    every = dev + held
    return (f"{path}: development {100 * statistics.mean(dev):.2f}% on {len(dev)} "
            f"({100 * statistics.mean(dev[:-1]):.2f}% without the largest), {sum(x > 0.25 for x in dev)} beyond 25%; "
            f"held-out {100 * statistics.mean(held):.2f}% on {len(held)}; all {100 * statistics.mean(every):.2f}% "
            f"on {len(every)}, {sum(x > 0.25 for x in every)} beyond 25%")


for p in sys.argv[1:] or ["results/published/residuals.yaml"]:
    print(summary(p))

"""The out-of-sample residuals before and after the fused kernels (args.fused_ops on the NVIDIA
Megatron-Core rows: dgxc-benchmarking, megatron-bridge, nemo-perf-2407) and the refit they took, on
the same rows: the 179 rows of the development sources of before, the 33 rows of the sources still
held out, NeMo's 12 (held out before, development after), the H100 rows, the MoE rows.

    git show 15644f5:results/published/residuals.yaml > /tmp/res_old.yaml
    python results/2026-12-02h-amd-epyc/compare_residuals.py /tmp/res_old.yaml results/published/residuals.yaml
"""

import sys

import yaml


def load(path):
    return {r["id"]: r for r in yaml.safe_load(open(path))["rows"]}


def mape(ids, rows):
    errors = [abs(rows[i]["error"]) for i in ids]
    return f"{100 * sum(errors) / len(errors):.2f}% on {len(errors)} ({sum(e > 0.25 for e in errors)} beyond 25%)"


old, new = load(sys.argv[1]), load(sys.argv[2])
groups = {
    "development rows of before (NeMo not among them)": [i for i in old if not old[i].get("held_out")],
    "rows of the sources still held out": [i for i in old if old[i].get("held_out") and old[i]["family"] != "nemo-perf-2407"],
    "NeMo 24.07 (held out before, development after)": [i for i in new if new[i]["family"] == "nemo-perf-2407"],
    "H100 rows but NeMo's": [i for i in new if "H100" in new[i]["device"] and new[i]["family"] != "nemo-perf-2407"],
    "all rows": list(new),
}
for name, ids in groups.items():
    print(f"{name}: before {mape(ids, old)}, after {mape(ids, new)}")
print("MoE rows:")
for i in (i for i in new if new[i]["model"] == "moe"):
    print(f"  {i}: {old[i]['error']:+.1%} -> {new[i]['error']:+.1%}")
print("rows that moved by 3 points or more:")
for i in new:
    if abs(abs(new[i]["error"]) - abs(old[i]["error"])) >= 0.03:
        print(f"  {i}: {old[i]['error']:+.1%} -> {new[i]['error']:+.1%}")

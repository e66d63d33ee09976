"""The 910B rows with tensor parallelism, split by whether they run MC2 (tp_comm_overlap), from a
residuals file (python benchmarks/bench_published.py --residuals): mean and mean absolute error.

    python results/2026-12-02-amd-epyc/mc2_rows.py RESIDUALS.yaml
"""
import sys

import yaml

from parsim.profile.published import load_all_figures

res = {r["id"]: r for r in yaml.safe_load(open(sys.argv[1], encoding="utf-8"))["rows"]}
groups = {True: [], False: []}
for f in load_all_figures().figures:
    r = res.get(f.id)
    par = dict(f.parallel)
    if r is None or not r["device"].startswith("Ascend 910B") or par.get("tp", 1) < 2 or "deepseek15" in f.id:
        continue
    groups[bool(par.get("tp_comm_overlap"))].append((f.id, r["error"]))
for mc2, rows in groups.items():
    errs = [e for _, e in rows]
    print(f"{'MC2' if mc2 else 'no MC2'}: {len(rows)} rows, mean {100 * sum(errs) / len(errs):+.1f}%, "
          f"MAPE {100 * sum(map(abs, errs)) / len(errs):.1f}%")
    for i, e in sorted(rows, key=lambda x: x[1]):
        print(f"  {i:44s} {100 * e:+6.1f}%")

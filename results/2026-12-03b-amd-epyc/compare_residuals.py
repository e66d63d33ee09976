"""The out-of-sample residuals before and after a change, row by row where a row moved by more than
half a point, with each set's MAPE (development and held-out sources, all rows):

    git show HEAD:results/published/residuals.yaml > /tmp/res_old.yaml
    python results/2026-12-03b-amd-epyc/compare_residuals.py /tmp/res_old.yaml results/published/residuals.yaml
"""

import sys

import yaml


def load(path):
    return {r["id"]: r for r in yaml.safe_load(open(path))["rows"]}


old, new = load(sys.argv[1]), load(sys.argv[2])
ids = sorted(set(old) & set(new))
print(f"{'row':50s} {'family':24s} {'before':>8s} {'after':>8s}")
for i in sorted(ids, key=lambda i: new[i]["error"] - old[i]["error"]):
    if abs(new[i]["error"] - old[i]["error"]) > 0.005:
        print(f"{i:50s} {new[i]['family']:24s} {old[i]['error']:+8.1%} {new[i]['error']:+8.1%}")
held = [i for i in ids if new[i].get("held_out")]
for name, rows in (("development rows", [i for i in ids if i not in held]), ("held-out rows", held), ("all rows", ids)):
    if rows:
        m = lambda res: sum(abs(res[i]["error"]) for i in rows) / len(rows)   # noqa: E731
        print(f"{name}: {len(rows)}, out-of-sample MAPE {m(old):.2%} -> {m(new):.2%}")

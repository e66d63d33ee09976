"""Out-of-sample residuals before and after a change, per row and per family, from two residuals
files written by ``python benchmarks/bench_published.py --residuals``:

    python results/2026-12-02-amd-epyc/compare_residuals.py BEFORE.yaml AFTER.yaml [--only "Ascend 910B"]

Prints every row that moved by half a point or more, then each family's MAPE before and after,
the development rows' (with and without the row at +463%), and the held-out sources'."""

from __future__ import annotations

import argparse

import yaml

UNEXPLAINED = "mf3-deepseek15-7b-s4096-900-a2"      # DeepSeek Coder 7B v1.5: 5.6x its figure (docs/accuracy.md)


def rows(path: str) -> dict:
    return {r["id"]: r for r in yaml.safe_load(open(path, encoding="utf-8"))["rows"]}


def mape(errors) -> float:
    errors = list(errors)
    return 100 * sum(abs(e) for e in errors) / len(errors) if errors else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--only", default="", help="rows whose device starts with this")
    args = ap.parse_args()
    a, b = rows(args.before), rows(args.after)
    ids = [i for i in a if i in b and b[i]["device"].startswith(args.only)]
    print(f"{'row':46s} {'family':24s} {'before':>8s} {'after':>8s}")
    for i in sorted(ids, key=lambda i: abs(b[i]["error"]) - abs(a[i]["error"])):
        if abs(a[i]["error"] - b[i]["error"]) >= 0.005:
            print(f"{i:46s} {a[i]['family']:24s} {100 * a[i]['error']:+7.1f}% {100 * b[i]['error']:+7.1f}%"
                  f"{'  held out' if a[i].get('held_out') else ''}")
    print()
    for fam in sorted({a[i]["family"] for i in ids}):
        mine = [i for i in ids if a[i]["family"] == fam]
        print(f"{fam:28s} {len(mine):3d} rows  MAPE {mape(a[i]['error'] for i in mine):5.2f}% -> "
              f"{mape(b[i]['error'] for i in mine):5.2f}%{'  (held out)' if a[mine[0]].get('held_out') else ''}")
    dev = [i for i in ids if not a[i].get("held_out")]
    held = [i for i in ids if a[i].get("held_out")]
    beyond = lambda r, sel: sum(abs(r[i]["error"]) > 0.25 for i in sel)
    print(f"development rows: {len(dev)}, MAPE {mape(a[i]['error'] for i in dev):.2f}% -> "
          f"{mape(b[i]['error'] for i in dev):.2f}%; without {UNEXPLAINED} "
          f"{mape(a[i]['error'] for i in dev if i != UNEXPLAINED):.2f}% -> "
          f"{mape(b[i]['error'] for i in dev if i != UNEXPLAINED):.2f}%; beyond 25%: {beyond(a, dev)} -> {beyond(b, dev)}")
    print(f"held-out rows: {len(held)}, MAPE {mape(a[i]['error'] for i in held):.2f}% -> "
          f"{mape(b[i]['error'] for i in held):.2f}%")


if __name__ == "__main__":
    main()

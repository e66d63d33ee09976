"""The Ultra-Scale Playbook's held-out rows (results/published/ultrascale_playbook_figures.yaml) as first
priced (results/2026-12-05d-intel-xeon/ultrascale-heldout.txt), grouped by where the run's collectives cross
nodes: tensor parallelism over more than a node's 8 GPUs, pipeline stages on more than one node; and by the
micro-batch size.  Also each panel's rank agreement (Spearman) between parsim's and the measured
tokens/s/GPU, whether parsim's fastest row is the measured fastest, and the source's own MFU of the rows
within 25% and beyond.  Reads committed files; prices nothing.

    python results/2026-12-05d-intel-xeon/ultrascale_groups.py
"""

from __future__ import annotations

import re
import statistics

from parsim.profile.published import load_figures

PRICED = "results/2026-12-05d-intel-xeon/ultrascale-heldout.txt"
FIGURES = "results/published/ultrascale_playbook_figures.yaml"
ROW = re.compile(r"ultrascale-(\w+)-n(\d+)-dp(\d+)-tp(\d+)-pp(\d+)-mbs(\d+)-ga(\d+)-z(\d)")


def _ranks(xs: list[float]) -> list[int]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0] * len(xs)
    for k, i in enumerate(order):
        r[i] = k
    return r


def main() -> None:
    rows = []
    for line in open(PRICED):
        if not line.startswith("ultrascale-") or "(excluded)" in line:
            continue
        p = line.split()
        panel, nodes, dp, tp, pp, mbs, ga, _ = ROW.match(p[0]).groups()
        rows.append(dict(id=p[0], panel=panel, nodes=int(nodes), dp=int(dp), tp=int(tp), pp=int(pp), mbs=int(mbs),
                         ga=int(ga), measured=float(p[2]), predicted=float(p[3]), error=float(p[4].rstrip("%")) / 100))
    errors = [r["error"] for r in rows]
    print(f"{len(rows)} scored rows: MAPE {statistics.mean(abs(e) for e in errors):.1%}, median error "
          f"{statistics.median(errors):+.1%}, {sum(abs(e) <= 0.25 for e in errors)} within 25% "
          f"(+ is parsim's price too fast)")
    print("\nBy where the collectives cross nodes (8 GPUs a node):")
    groups: dict[str, list[dict]] = {}
    for r in rows:
        tp_across = r["tp"] > 8
        pp_across = r["pp"] > 1 and r["nodes"] > 1 and r["tp"] * r["pp"] > 8
        key = ("tp across nodes" if tp_across else "tp inside a node") + ", " + \
              ("pp across nodes" if pp_across else "no pp across nodes")
        groups.setdefault(key, []).append(r)
    for key, members in sorted(groups.items()):
        e = [m["error"] for m in members]
        print(f"  {key}: {len(members)} rows, median error {statistics.median(e):+.1%}, "
              f"{sum(abs(x) <= 0.25 for x in e)} within 25%")
    print("\nMicro-batches of one sample (mbs 1) against larger:")
    for one in (True, False):
        e = [r["error"] for r in rows if (r["mbs"] == 1) == one]
        print(f"  mbs {'1' if one else '>1'}: {len(e)} rows, median error {statistics.median(e):+.1%}")
    mfu = {f.id: dict(f.source_config)["mfu_percent"] for f in load_figures(FIGURES).figures}
    print("\nThe source's own MFU (its hover text), rows within 25% against the rest:")
    for within in (True, False):
        m = [mfu[r["id"]] for r in rows if (abs(r["error"]) <= 0.25) == within]
        print(f"  {'within 25%' if within else 'beyond 25%'}: {len(m)} rows, MFU median {statistics.median(m):.1f}%, "
              f"range {min(m):.1f}-{max(m):.1f}%")
    print("\nThe rows within 25%:")
    for r in rows:
        if abs(r["error"]) <= 0.25:
            print(f"  {r['id']:<48} {r['error']:+.1%}")
    print("\nEach panel: rank agreement of parsim's and the measured tokens/s/GPU, and parsim's fastest row:")
    for panel in ("1b", "3b", "8b", "80b"):
        sub = [r for r in rows if r["panel"] == panel]
        n = len(sub)
        a, b = _ranks([r["measured"] for r in sub]), _ranks([r["predicted"] for r in sub])
        rho = 1 - 6 * sum((x - y) ** 2 for x, y in zip(a, b)) / (n * (n * n - 1))
        best = max(sub, key=lambda r: r["measured"])
        pick = max(sub, key=lambda r: r["predicted"])
        print(f"  {panel}: {n} rows, Spearman {rho:.2f}; parsim's fastest {pick['id']} runs at "
              f"{pick['measured'] / best['measured']:.2f} of the measured fastest ({best['id']})")


if __name__ == "__main__":
    main()

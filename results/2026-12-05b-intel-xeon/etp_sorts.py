"""Every mixture-of-experts row priced at the shipped profiles (bench_published.py --quick: a
held-out source's rows out of sample, a development source's in-sample), before and after the local
sorts were priced at the expert-tp group's rows (parsim.cost.experts._local_sorts, x etp): the rows
the change moves, and so the sources it was made on.  Run from the tree to price (the before from a
worktree of the commit before the change):

    python results/2026-12-05b-intel-xeon/etp_sorts.py /tmp/before .
"""
import subprocess
import sys

FILES = ("moe", "moe_modelzoo", "moe_parallel_folding", "megascale_moe", "automodel", "xtuner_moe", "mcore_release")


def priced(tree):
    """{row id: (its source, its throughput error)} priced in ``tree``."""
    out = {}
    r = subprocess.run([sys.executable, "-c", QUICK], cwd=tree, capture_output=True, text=True, check=True)
    for line in r.stdout.splitlines():
        ident, source, err = line.split()
        out[ident] = (source, float(err))
    return out


QUICK = f"""
from parsim.profile.published import load_figures, price
for name in {FILES!r}:
    for f in load_figures(f"results/published/{{name}}_figures.yaml").figures:
        if f.excluded:
            continue
        print(f.id, f.source, f"{{price(f).error:+.5f}}")
"""

before, after = priced(sys.argv[1]), priced(sys.argv[2])
moved = {}
print(f"{'row':60s} {'source':28s} {'before':>8s} {'after':>8s}")
for ident, (source, b) in before.items():
    a = after[ident][1]
    if abs(a - b) > 5e-5:
        moved.setdefault(source, []).append((b, a))
        print(f"{ident[-60:]:60s} {source:28s} {b:+8.1%} {a:+8.1%}")
print("\nsources whose rows moved (mean |error| before -> after):")
for source, pairs in moved.items():
    print(f"  {source:28s} {len(pairs):3d} rows  {sum(abs(b) for b, _ in pairs) / len(pairs):6.1%} -> "
          f"{sum(abs(a) for _, a in pairs) / len(pairs):6.1%}")

"""Each public row's prediction before and after a change to the cost model, with the shipped
profiles of before (nothing refitted): the ratio after/before, the rows that moved, the largest.

    python results/2026-12-03-amd-epyc/compare_quick.py BEFORE.txt AFTER.txt

BEFORE and AFTER: python benchmarks/bench_published.py --quick at the two commits' code and the
first commit's hardware_profiles/ (eager-norm-layout.txt says how they were made)."""

import re
import statistics
import sys


def load(path):
    out = {}
    for line in open(path):
        parts = line.split()
        if len(parts) > 5 and re.match(r"^[+-]\d", parts[4]):
            out[parts[0]] = (float(parts[3]), parts[1])
    return out


before, after = load(sys.argv[1]), load(sys.argv[2])
ratios = {k: after[k][0] / before[k][0] for k in before if k in after}
moved = {k: r for k, r in ratios.items() if abs(r - 1) > 5e-5}
print(f"rows priced {len(ratios)}; predictions moved (beyond 0.005%) {len(moved)}")
for profile in sorted({before[k][1] for k in moved}):
    rs = [r for k, r in moved.items() if before[k][1] == profile]
    print(f"  {profile:<20} {len(rs):>3} rows moved, median {statistics.median(rs) - 1:+.3%}, "
          f"range {min(rs) - 1:+.3%} .. {max(rs) - 1:+.3%}")
print("the ten largest moves (predicted throughput after / before - 1):")
for k, r in sorted(moved.items(), key=lambda x: -abs(x[1] - 1))[:10]:
    print(f"  {k:<50} {r - 1:+.3%}")

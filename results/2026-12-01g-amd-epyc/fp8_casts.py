"""TE's FP8 cast-transpose kernels priced (parsim.model.fp8, Casts): every FP8 row and every
family's leave-one-source-out score before (the benchmark committed at BEFORE) and after (the
working tree's results/published/bench_published.txt, from
python benchmarks/bench_published.py --out results/published/bench_published.txt
    --residuals results/published/residuals.yaml --write-profiles
alternated with python benchmarks/bench_kernels.py --write-profiles to the fixed point,
docs/hardware.md, Calibration).

    python results/2026-12-01g-amd-epyc/fp8_casts.py > results/2026-12-01g-amd-epyc/fp8-casts.txt
"""

import re
import subprocess
import sys

BEFORE = "3dd3d15"
PATH = "results/published/bench_published.txt"


def rows(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+([+-][\d.]+%)\s+(\S+)\s+(\S+)\s", line)
        if m and not line.startswith(" "):
            out[m.group(1)] = (m.group(4), m.group(5), m.group(6), m.group(7), m.group(8))
    return out


def summaries(text):
    return {m.group(1): m.group(2) for m in re.finditer(r"^  ([\w -]+?(?: \(.*?\))?): (\d+ rows, .*)$", text, re.M)}


def main():
    before = subprocess.run(["git", "show", f"{BEFORE}:{PATH}"], capture_output=True, text=True, check=True).stdout
    after = open(PATH).read()
    rb, ra = rows(before), rows(after)
    print(f"before: {PATH} at {BEFORE}; after: the working tree's (this commit's)")
    print("\nFP8 rows (measured; out-of-sample predicted and error, before -> after):")
    for rid in sorted(r for r in ra if "fp8" in r):
        b, a = rb[rid], ra[rid]
        print(f"  {rid:50s} measured {a[0]:>10s}  {b[3]:>10s} {b[4]:>7s} -> {a[3]:>10s} {a[4]:>7s}")
    print("\nEvery row whose out-of-sample error moved by half a point or more:")
    for rid in sorted(ra):
        b, a = rb.get(rid), ra[rid]
        if b is None or "%" not in a[4] or "%" not in b[4]:
            continue
        d = float(a[4].rstrip("%")) - float(b[4].rstrip("%"))
        if abs(d) >= 0.5:
            print(f"  {rid:50s} {b[4]:>7s} -> {a[4]:>7s}")
    sb, sa = summaries(before), summaries(after)
    print("\nFamilies and totals, before -> after:")
    for k in sa:
        if sb.get(k) != sa[k]:
            print(f"  {k}:\n    {sb.get(k)}\n    {sa[k]}")
    for tag in ("Bands (90%", "Held-out sources against"):
        for text, when in ((before, "before"), (after, "after")):
            line = next((x for x in text.splitlines() if x.startswith(tag)), "")
            print(f"{when}: {line[:230]}")
    for text, when in ((before, "before"), (after, "after")):
        line = next((x for x in text.splitlines() if x.strip().startswith("all families")), "")
        print(f"{when} (all-family fit): {' '.join(line.split())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

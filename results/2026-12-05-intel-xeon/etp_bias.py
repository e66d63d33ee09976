"""The out-of-sample errors of every scored MoE row of the public benchmark, grouped by source, tp and
the experts' tensor parallelism (etp), read from results/published/bench_published.txt: a summary of
the committed output, for the docs' statement of how rows with experts split over tp are priced.
Nothing is priced here.

    python results/2026-12-05-intel-xeon/etp_bias.py
"""
import collections
import re

groups = collections.defaultdict(list)
for line in open("results/published/bench_published.txt"):
    # id, source, profile, measured, in-sample priced and error, out-of-sample priced and error, layout
    m = re.match(r"(\S+)\s+(\S+)\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)\s+([+-][0-9.]+)%\s+(.*?); scored", line)
    if not m or (" ep=" not in m.group(5) and "etp=" not in m.group(5)):
        continue
    layout = m.group(5)
    tp = int(re.search(r"tp=(\d+)", layout).group(1))
    etp = int(re.search(r"etp=(\d+)", layout).group(1)) if "etp=" in layout else 1
    held = "held-out" if "a held-out source" in line else "development"
    groups[(m.group(2), held, tp, etp)].append(float(m.group(4)))
print(f"{'source':28s} {'kind':11s} {'tp':>3s} {'etp':>4s} {'rows':>5s} {'mean':>7s} {'min':>7s} {'max':>7s}  (out-of-sample error, %)")
for (source, held, tp, etp), errs in sorted(groups.items(), key=lambda kv: (kv[0][3] > 1, kv[0])):
    print(f"{source:28s} {held:11s} {tp:3d} {etp:4d} {len(errs):5d} {sum(errs) / len(errs):+7.1f} {min(errs):+7.1f} {max(errs):+7.1f}")

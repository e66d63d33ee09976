"""The development rows' out-of-sample MAPE with and without each row beyond 25%, from the committed
results/published/bench_published.txt (no pricing: the figures its leave-one-source-out run printed).

    python results/2026-12-03f-amd-epyc/dev-mape-one-row.py
"""
import re

import yaml

held = set(yaml.safe_load(open("results/published/fit.yaml"))["held_out"])
rows = []
for line in open("results/published/bench_published.txt"):
    if "; scored" not in line:
        continue
    parts = line.split()
    errors = re.findall(r"([+-]\d+\.\d)%", line)
    rows.append((parts[0], parts[1], float(errors[1])))        # the second: out of sample
dev = [r for r in rows if r[1] not in held]
mape = lambda rs: sum(abs(e) for *_, e in rs) / len(rs)
print(f"development rows {len(dev)}, out-of-sample MAPE {mape(dev):.2f}%")
for name, source, e in sorted((r for r in dev if abs(r[2]) > 25), key=lambda r: -abs(r[2])):
    print(f"  without {name} ({source}, {e:+.1f}%): {mape([r for r in dev if r[0] != name]):.2f}%")
print(f"without all {sum(abs(r[2]) > 25 for r in dev)} beyond 25%: {mape([r for r in dev if abs(r[2]) <= 25]):.2f}%")

"""Each function's share of the samples under plan() in a py-spy raw file (inclusive, each function once a
stack):  python results/2026-12-03c-amd-epyc/pyspy_share.py FILE [N]"""
import sys, collections, re
incl = collections.Counter(); total = 0
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1); n = int(n)
    frames = stack.split(";")
    if not any("plan (parsim/search/planner.py" in f for f in frames): continue
    total += n
    seen = set()
    for f in frames:
        name = re.sub(r":\d+\)$", ")", f)
        if name not in seen:
            incl[name] += n; seen.add(name)
for name, n in incl.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 60):
    print(f"{100*n/total:5.1f}% {name}")

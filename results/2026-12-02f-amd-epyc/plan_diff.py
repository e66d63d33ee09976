"""What changed in each plan of benchmarks/check_outputs_identical.py's two runs: whether everything but
the Pareto line and the simulation count is the same (the pick, the ranked candidates with their
estimates, the explanation), and those two.

    python results/2026-12-02f-amd-epyc/plan_diff.py BASE_DIR          (BASE_DIR and BASE_DIR.new)
"""
import glob
import json
import os
import sys

base = sys.argv[1]
for path in sorted(glob.glob(os.path.join(base, "plan-*.json"))):
    name = os.path.basename(path)
    new = os.path.join(base + ".new", name)
    if name.endswith("-simulate.json") or not os.path.exists(new):
        continue
    texts = [open(p).read() for p in (path, new)]
    if texts[0] == texts[1]:
        continue
    try:
        a, b = (json.JSONDecoder().raw_decode(t.lstrip())[0] for t in texts)   # the stdout part
    except json.JSONDecodeError:
        print(f"{name} | not JSON:", texts[1].strip().splitlines()[-1][:200])
        continue
    if a == b:
        continue
    rest = [{k: v for k, v in x.items() if k not in ("pareto", "simulated")} for x in (a, b)]
    print(f"{name} | pick, ranked plans, explanation and the rest the same: {rest[0] == rest[1]} "
          f"| pareto: {len(a['pareto'])}->{len(b['pareto'])} | simulated: {a['simulated']}->{b['simulated']}")

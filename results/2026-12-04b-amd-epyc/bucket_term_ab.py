"""Cold searches alternated in one run: the lower bound's buckets term off (split.final_backward_reductions
monkeypatched to 0) and on, three pairs each, each search in a fresh process.

    python results/2026-12-04b-amd-epyc/bucket_term_ab.py
"""
import sys, json, subprocess, statistics
cases = [("examples/resnet50_imagenet.yaml", "ascend910:128x8"), ("examples/gpt3_175b.yaml", "dgx-a100:128x8"), ("examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8")]
one = r'''
import sys, json
sys.path.insert(0, "benchmarks")
import bench_planner as b
from parsim.search import split
if sys.argv[3] == "off":
    split.final_backward_reductions = lambda *_: 0.0
print(json.dumps(b._one(sys.argv[1], sys.argv[2])))
'''
for spec, cl in cases:
    t = {"off": [], "on": []}
    for _ in range(3):
        for mode in ("off", "on"):
            out = subprocess.run([sys.executable, "-c", one, spec, cl, mode], capture_output=True, text=True, check=True).stdout
            t[mode].append(json.loads(out.strip().splitlines()[-1])["search_time_s"])
    r = [a / b for a, b in zip(t["on"], t["off"])]
    print(f"{spec:32s} off {statistics.median(t['off']):.3f} {[round(x,3) for x in t['off']]}  on {statistics.median(t['on']):.3f} {[round(x,3) for x in t['on']]}  on/off per pair {[round(x,3) for x in r]}", flush=True)

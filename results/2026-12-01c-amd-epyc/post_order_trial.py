"""The first BACKWARD_POST trial, as run at 03f6660 (2026-12-01 ~10:35 UTC, before any change; it patches
parsim.sim.simulate's prefetched_gather_s as that commit called it, and no longer runs against later code).
It queued each unit's reduce-scatter AHEAD of the next unit's gather, the order torch's _post_backward_hook does
not use (it prefetches first), and applied post to every llm-foundry row, the large-scale table's included,
whose sweep.py runs BACKWARD_PRE.  Kept as the record of why the harnesses were read before any setting was
written; the kept rule: parsim.cost.comm.prefetched_gather_s, results/2026-12-01c-amd-epyc/fsdp-backward-post.txt."""
import importlib

import yaml

S = importlib.import_module("parsim.sim.simulate")
from parsim.profile.published import load_all_figures, price
orig = S.prefetched_gather_s
MODE = {"post": False}
def post(g, c, overlap, reduces=None):
    if not MODE["post"] or reduces is None:
        return orig(g, c, overlap, reduces)
    n = len(g); start = stream = g[0]
    for i in range(n):
        end = start + c[i]
        stream = max(stream, end) + reduces[i]
        if i + 1 < n:
            stream = stream + g[i + 1]
            start = max(end, stream)
        else:
            start = end
    return start - sum(c[:n])
S.prefetched_gather_s = post
res = {r["id"]: r for r in yaml.safe_load(open("results/published/residuals.yaml"))["rows"]}
for f in load_all_figures().figures:
    if not f.id.startswith("llmfoundry") or f.excluded: continue
    MODE["post"] = False; a = price(f)
    MODE["post"] = True; b = price(f)
    e = lambda p: p.predicted / f.measured - 1
    print(f"{f.id:45s} {'held-out' if res.get(f.id,{}).get('held_out') else 'dev':8s} shipped {e(a):+.3f}  POST {e(b):+.3f}")
